import { JSONRPC_BINDING, SPOKEN_GENERATIONS, generationOfVersion, generationsOf, type A2aGeneration, type AgentCardView } from "../protocol/a2a/agent-card.ts";

/**
 * The card the gateway serves for an agent: built from the agent's validated view, never copied
 * from the agent's bytes, so nothing the gateway does not vouch for reaches a caller.
 *
 * - Every interface URL is the gateway's (`<public origin>/a2a/<agent>`), in both generations.
 * - Only the JSON-RPC binding, and only the protocol versions the gateway speaks for this agent
 *   (`generations`; by default the agent's own: what the gateway can relay without bridging).
 * - The gateway's security schemes (API key as a bearer token or `x-api-key`; OAuth issuers when
 *   configured), never the agent's: the agent's credential is the gateway's to send.
 * - The agent's signatures are dropped (they sign the agent's card, not this one), and the
 *   description says the card is the gateway's rewriting.
 * - Skills the caller may not use are left out (`skillVisible`, from the caller's policy).
 * - Capabilities only as far as the gateway serves them: streaming when the agent streams; push
 *   notifications only when the caller says the gateway relays them; no extensions and no
 *   extended card.
 */

/** What the served card says about how callers authenticate to the gateway. */
export interface GatewaySecurity {
  /** OpenID Connect discovery URLs of the OAuth issuers whose access tokens the gateway accepts; none: API keys only. */
  readonly openIdConnectUrls: readonly string[];
}

/** What a card is rewritten with. */
export interface CardRewrite {
  /** The agent's name in the gateway (`/a2a/<agent>`). */
  readonly agent: string;
  /** The gateway's public origin as callers reach it (`https://gw.example.com`), no trailing slash. */
  readonly publicOrigin: string;
  /** Which skills the caller may see. */
  readonly skillVisible: (skillId: string) => boolean;
  readonly security: GatewaySecurity;
  /** The generations the gateway speaks to callers for this agent; default: the agent's own. */
  readonly generations?: readonly A2aGeneration[];
  /** Whether the gateway relays push notifications for this agent; default false. */
  readonly pushNotifications?: boolean;
}

/** The gateway's note on every card it serves. */
export const REWRITTEN_NOTE = "Served by the Sluice gateway: interface URLs, security schemes and the skills listed are the gateway's; the agent's own signatures are not included.";

/** The gateway's endpoint for an agent. */
export function gatewayAgentUrl(publicOrigin: string, agent: string): string {
  return `${publicOrigin.replace(/\/+$/, "")}/a2a/${encodeURIComponent(agent)}`;
}

const API_KEY_BEARER = "sluiceApiKey";
const API_KEY_HEADER = "sluiceApiKeyHeader";
const oidcName = (i: number) => `sluiceOAuth${i === 0 ? "" : i + 1}`;

function servedGenerations(view: AgentCardView, rewrite: CardRewrite): A2aGeneration[] {
  const wanted = rewrite.generations ?? generationsOf(view);
  return SPOKEN_GENERATIONS.filter((g) => wanted.includes(g));
}

/**
 * Which card shape a caller asked for by its `A2A-Version` header: `1.0` for a 1.x version, `0.3`
 * when the header is absent or names 0.3 (A2A 1.0 §3.6.2: no header means 0.3). A version the
 * gateway does not speak gets the newest card.
 */
export function requestedCardShape(a2aVersion: string | null | undefined): A2aGeneration {
  const v = a2aVersion?.trim();
  if (v === undefined || v === "") return "0.3";
  return generationOfVersion(v) ?? "1.0";
}

/**
 * The served card in the shape the caller asked for. A 0.3 card is served only when the gateway
 * speaks 0.3 for this agent; otherwise a 0.3 caller gets the 1.0 card (it cannot use the agent
 * through the gateway, and the card does not pretend it can).
 */
export function rewriteAgentCard(view: AgentCardView, rewrite: CardRewrite, shape: A2aGeneration): Record<string, unknown> {
  const generations = servedGenerations(view, rewrite);
  if (shape === "0.3" && generations.includes("0.3")) return cardV03(view, rewrite);
  return cardV1(view, rewrite, generations);
}

function description(view: AgentCardView): string {
  return view.description === "" ? REWRITTEN_NOTE : `${view.description}\n\n${REWRITTEN_NOTE}`;
}

function common(view: AgentCardView) {
  return {
    name: view.name,
    description: description(view),
    version: view.version,
    ...(view.provider === undefined ? {} : { provider: view.provider }),
    ...(view.documentationUrl === undefined ? {} : { documentationUrl: view.documentationUrl }),
    ...(view.iconUrl === undefined ? {} : { iconUrl: view.iconUrl }),
    defaultInputModes: [...view.defaultInputModes],
    defaultOutputModes: [...view.defaultOutputModes],
  };
}

function visibleSkills(view: AgentCardView, rewrite: CardRewrite) {
  return view.skills
    .filter((s) => rewrite.skillVisible(s.id))
    .map((s) => ({
      id: s.id,
      name: s.name,
      description: s.description,
      tags: [...s.tags],
      examples: [...s.examples],
      ...(s.inputModes === undefined ? {} : { inputModes: [...s.inputModes] }),
      ...(s.outputModes === undefined ? {} : { outputModes: [...s.outputModes] }),
    }));
}

/** The A2A 1.0 card: ProtoJSON, as the specification's JSON binding writes it. */
function cardV1(view: AgentCardView, rewrite: CardRewrite, generations: readonly A2aGeneration[]): Record<string, unknown> {
  const url = gatewayAgentUrl(rewrite.publicOrigin, rewrite.agent);
  const oidc = rewrite.security.openIdConnectUrls;
  const schemes: Record<string, unknown> = {
    [API_KEY_BEARER]: { httpAuthSecurityScheme: { scheme: "Bearer", description: "A Sluice API key as a bearer token." } },
    [API_KEY_HEADER]: { apiKeySecurityScheme: { location: "header", name: "x-api-key", description: "A Sluice API key in the x-api-key header." } },
  };
  oidc.forEach((u, i) => (schemes[oidcName(i)] = { openIdConnectSecurityScheme: { openIdConnectUrl: u, description: "An OAuth 2.1 access token from this issuer, as a bearer token." } }));
  return {
    ...common(view),
    supportedInterfaces: generations.map((g) => ({ url, protocolBinding: JSONRPC_BINDING, protocolVersion: g })),
    capabilities: { streaming: view.streaming, pushNotifications: rewrite.pushNotifications === true && view.pushNotifications, extendedAgentCard: false },
    securitySchemes: schemes,
    // Alternatives: any one of them authenticates.
    securityRequirements: Object.keys(schemes).map((name) => ({ schemes: { [name]: { list: [] } } })),
    skills: visibleSkills(view, rewrite),
  };
}

/** The A2A 0.3 card: one JSON-RPC URL, the 0.3 security shapes. */
function cardV03(view: AgentCardView, rewrite: CardRewrite): Record<string, unknown> {
  const url = gatewayAgentUrl(rewrite.publicOrigin, rewrite.agent);
  const schemes: Record<string, unknown> = {
    [API_KEY_BEARER]: { type: "http", scheme: "bearer", description: "A Sluice API key as a bearer token." },
    [API_KEY_HEADER]: { type: "apiKey", in: "header", name: "x-api-key", description: "A Sluice API key in the x-api-key header." },
  };
  rewrite.security.openIdConnectUrls.forEach((u, i) => (schemes[oidcName(i)] = { type: "openIdConnect", openIdConnectUrl: u, description: "An OAuth 2.1 access token from this issuer, as a bearer token." }));
  return {
    ...common(view),
    url,
    preferredTransport: JSONRPC_BINDING,
    protocolVersion: "0.3.0",
    capabilities: { streaming: view.streaming, pushNotifications: rewrite.pushNotifications === true && view.pushNotifications },
    securitySchemes: schemes,
    security: Object.keys(schemes).map((name) => ({ [name]: [] })),
    skills: visibleSkills(view, rewrite),
  };
}
