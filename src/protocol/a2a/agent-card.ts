import { z } from "zod";

/**
 * Agent cards as agents publish them, validated, and the one neutral view the gateway works from.
 *
 * Two generations of card exist on the wire:
 * - **A2A 1.0**: `supportedInterfaces[]` of `{url, protocolBinding, protocolVersion, tenant?}`;
 *   security as `securitySchemes` (a map of one-of objects) and `securityRequirements`.
 * - **A2A 0.3**: one `url` spoken over `preferredTransport` (default `JSONRPC`), more in
 *   `additionalInterfaces[]` of `{url, transport}`, and the card's `protocolVersion` (`0.3.x`).
 *
 * A card with `supportedInterfaces` is read as 1.0 even when it also carries the 0.3 fields (the
 * hybrid card a 1.0 agent with v0.3 compatibility serves): its interfaces say per entry which
 * version each speaks. The gateway speaks the JSON-RPC binding only, so a card's use to the
 * gateway is which generations it serves over JSON-RPC and at which URL.
 *
 * The schemas are written here rather than taken from `@a2a-js/sdk`: the SDK's card types are its
 * in-memory protobuf shapes (one-ofs as `{$case, value}`) and its `fromJSON` accepts anything, so
 * neither refuses a bad card; and the SDK is not a dependency of the Worker. Unknown fields are
 * allowed (the specification adds fields, and nothing unknown is served on: the rewritten card is
 * built from the fields named here).
 */

/** The protocol generations the gateway speaks. */
export type A2aGeneration = "1.0" | "0.3";

/** The binding name of JSON-RPC in both generations' cards. */
export const JSONRPC_BINDING = "JSONRPC";

const httpUrl = z.url({ protocol: /^https?$/, message: "an http(s) URL" });
const text = z.string();
const nonEmpty = z.string().min(1);
const strings = z.array(z.string());
const jsonObject = z.record(z.string(), z.unknown());

const skill = z.looseObject({
  id: nonEmpty,
  name: nonEmpty,
  description: text,
  tags: strings,
  examples: strings.optional(),
  inputModes: strings.optional(),
  outputModes: strings.optional(),
});

const signature = z.looseObject({ protected: nonEmpty, signature: nonEmpty });

const provider = z.looseObject({ organization: text, url: text }).optional();

const uniqueSkillIds = (skills: readonly { id: string }[], ctx: z.RefinementCtx) => {
  const seen = new Set<string>();
  skills.forEach((s, i) => {
    if (seen.has(s.id)) ctx.addIssue({ code: "custom", path: ["skills", i, "id"], message: `duplicate skill id "${s.id}"` });
    seen.add(s.id);
  });
};

/** An A2A 1.0 agent card (the fields the gateway reads; others pass validation untouched). */
export const agentCardV1Schema = z
  .looseObject({
    name: nonEmpty,
    description: text,
    version: nonEmpty,
    supportedInterfaces: z.array(z.looseObject({ url: httpUrl, protocolBinding: nonEmpty, protocolVersion: nonEmpty, tenant: text.optional() })).min(1, "an agent card lists at least one interface"),
    provider,
    documentationUrl: text.optional(),
    iconUrl: text.optional(),
    capabilities: z.looseObject({ streaming: z.boolean().optional(), pushNotifications: z.boolean().optional(), extensions: z.array(jsonObject).optional(), extendedAgentCard: z.boolean().optional() }),
    securitySchemes: z.record(z.string(), jsonObject).optional(),
    securityRequirements: z.array(jsonObject).optional(),
    defaultInputModes: strings,
    defaultOutputModes: strings,
    skills: z.array(skill.extend({ securityRequirements: z.array(jsonObject).optional() })),
    signatures: z.array(signature).optional(),
  })
  .superRefine((card, ctx) => uniqueSkillIds(card.skills, ctx));

/** An A2A 0.3 agent card. */
export const agentCardV03Schema = z
  .looseObject({
    name: nonEmpty,
    description: text,
    version: nonEmpty,
    url: httpUrl,
    protocolVersion: z.string().regex(/^0\.3(\.\d+)?$/, "a 0.3 card's protocolVersion is 0.3 or 0.3.x"),
    preferredTransport: nonEmpty.optional(),
    additionalInterfaces: z.array(z.looseObject({ url: httpUrl, transport: nonEmpty })).optional(),
    provider,
    documentationUrl: text.optional(),
    iconUrl: text.optional(),
    capabilities: z.looseObject({ streaming: z.boolean().optional(), pushNotifications: z.boolean().optional(), stateTransitionHistory: z.boolean().optional(), extensions: z.array(jsonObject).optional() }),
    securitySchemes: z.record(z.string(), jsonObject).optional(),
    security: z.array(z.record(z.string(), strings)).optional(),
    defaultInputModes: strings,
    defaultOutputModes: strings,
    skills: z.array(skill.extend({ security: z.array(z.record(z.string(), strings)).optional() })),
    signatures: z.array(signature).optional(),
    supportsAuthenticatedExtendedCard: z.boolean().optional(),
  })
  .superRefine((card, ctx) => uniqueSkillIds(card.skills, ctx));

export type AgentCardV1 = z.infer<typeof agentCardV1Schema>;
export type AgentCardV03 = z.infer<typeof agentCardV03Schema>;

/** A skill as the gateway sees it, whichever generation declared it. */
export interface AgentSkillView {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  readonly tags: readonly string[];
  readonly examples: readonly string[];
  readonly inputModes: readonly string[] | undefined;
  readonly outputModes: readonly string[] | undefined;
}

/**
 * One agent card, whichever generation it came in: what the gateway routes by and rewrites from.
 * Plain JSON (it crosses Durable Object RPC and is stored as JSON).
 */
export interface AgentCardView {
  /** The generation of the card's shape. */
  readonly shape: A2aGeneration;
  readonly name: string;
  readonly description: string;
  readonly version: string;
  /** The agent's JSON-RPC endpoint per generation it speaks there; at least one is set. */
  readonly jsonRpc: { readonly "1.0"?: string; readonly "0.3"?: string };
  readonly streaming: boolean;
  readonly pushNotifications: boolean;
  readonly defaultInputModes: readonly string[];
  readonly defaultOutputModes: readonly string[];
  readonly skills: readonly AgentSkillView[];
  readonly provider: { readonly organization: string; readonly url: string } | undefined;
  readonly documentationUrl: string | undefined;
  readonly iconUrl: string | undefined;
  /** Whether the agent signed its card (the signatures themselves are never served on). */
  readonly signed: boolean;
}

/** The generations the gateway speaks, in order of preference. */
export const SPOKEN_GENERATIONS: readonly A2aGeneration[] = ["1.0", "0.3"];

/** The generations `view` speaks over JSON-RPC, newest first. */
export function generationsOf(view: AgentCardView): A2aGeneration[] {
  return SPOKEN_GENERATIONS.filter((g) => view.jsonRpc[g] !== undefined);
}

/** Which generation an interface's `protocolVersion` is, if the gateway speaks it: `1.0`, `1.0.x`, `0.3`, `0.3.x`. */
export function generationOfVersion(version: string): A2aGeneration | undefined {
  if (/^1\.0(\.\d+)?$/.test(version)) return "1.0";
  if (/^0\.3(\.\d+)?$/.test(version)) return "0.3";
  return undefined;
}

/** The outcome of reading a card: its view, or every reason it was refused. */
export type CardReading = { readonly ok: true; readonly view: AgentCardView } | { readonly ok: false; readonly reasons: readonly string[] };

const reasonsOf = (error: z.ZodError): string[] => error.issues.map((i) => (i.path.length > 0 ? `${i.path.join(".")}: ${i.message}` : i.message));

/**
 * Validates a card in either generation and normalizes it. Refused: not an object, a card that
 * fails its generation's schema, or one with no JSON-RPC interface in a generation the gateway
 * speaks (it could not be reached through the gateway).
 */
export function readAgentCard(raw: unknown): CardReading {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return { ok: false, reasons: ["an agent card is a JSON object"] };
  const shape: A2aGeneration = "supportedInterfaces" in raw ? "1.0" : "0.3";
  const view = shape === "1.0" ? readV1(raw) : readV03(raw);
  if (!view.ok) return view;
  if (generationsOf(view.view).length === 0) {
    return { ok: false, reasons: [`no JSON-RPC interface of A2A ${SPOKEN_GENERATIONS.join(" or ")}: the gateway speaks the JSON-RPC binding of those versions only`] };
  }
  return view;
}

function readV1(raw: object): CardReading {
  const parsed = agentCardV1Schema.safeParse(raw);
  if (!parsed.success) return { ok: false, reasons: reasonsOf(parsed.error) };
  const card = parsed.data;
  const jsonRpc: { "1.0"?: string; "0.3"?: string } = {};
  for (const i of card.supportedInterfaces) {
    const generation = generationOfVersion(i.protocolVersion);
    // The first interface of a generation wins: the card lists them in the agent's order of preference.
    if (i.protocolBinding === JSONRPC_BINDING && generation !== undefined && jsonRpc[generation] === undefined) jsonRpc[generation] = i.url;
  }
  return {
    ok: true,
    view: {
      shape: "1.0",
      name: card.name,
      description: card.description,
      version: card.version,
      jsonRpc,
      ...sharedView(card),
    },
  };
}

/** What both generations' cards say alike: capabilities, modes, skills, provider, links, whether signed. */
function sharedView(card: AgentCardV1 | AgentCardV03) {
  return {
    streaming: card.capabilities.streaming === true,
    pushNotifications: card.capabilities.pushNotifications === true,
    defaultInputModes: card.defaultInputModes,
    defaultOutputModes: card.defaultOutputModes,
    skills: card.skills.map(skillView),
    provider: card.provider === undefined ? undefined : { organization: card.provider.organization, url: card.provider.url },
    documentationUrl: card.documentationUrl || undefined,
    iconUrl: card.iconUrl || undefined,
    signed: (card.signatures?.length ?? 0) > 0,
  };
}

function readV03(raw: object): CardReading {
  const parsed = agentCardV03Schema.safeParse(raw);
  if (!parsed.success) return { ok: false, reasons: reasonsOf(parsed.error) };
  const card = parsed.data;
  const preferred = card.preferredTransport ?? JSONRPC_BINDING;
  const url = preferred === JSONRPC_BINDING ? card.url : card.additionalInterfaces?.find((i) => i.transport === JSONRPC_BINDING)?.url;
  return {
    ok: true,
    view: {
      shape: "0.3",
      name: card.name,
      description: card.description,
      version: card.version,
      jsonRpc: url === undefined ? {} : { "0.3": url },
      ...sharedView(card),
    },
  };
}

function skillView(s: z.infer<typeof skill>): AgentSkillView {
  return { id: s.id, name: s.name, description: s.description, tags: s.tags, examples: s.examples ?? [], inputModes: s.inputModes, outputModes: s.outputModes };
}
