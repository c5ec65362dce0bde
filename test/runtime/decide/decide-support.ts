import { parse } from "yaml";
import { loadConfig } from "../../../src/config/load-config.ts";
import { publicationSchema } from "../../../src/config/publication-schema.ts";
import { decideChat, type DecisionInput, type Decided } from "../../../src/decide/decide.ts";
import { systemScheduler } from "../../../src/deps/scheduler.ts";
import type { SignalModels } from "../../../src/signals/signal-models.ts";
import { SignalSet } from "../../../src/signals/signal-set.ts";
import type { DispatchPlan } from "../../../src/decide/dispatch-plan.ts";
import type { ContentPart, NeutralMessage, NeutralRequest, ToolDefinition } from "../../../src/protocol/neutral.ts";
import { compilePublication, type CompiledEntrypoint, type CompiledPublication } from "../../../src/publication/compile-publication.ts";
import { bundledTexts } from "../support/fixtures.ts";

/*
 * A publication small enough to read in one go: one entrypoint per kind of condition, so each
 * test sees one rule at a time, and `ordered` where several rules could match the same request.
 * Header names are the bundled gateway's trusted ones (x-sluice-tier, x-sluice-session).
 */
export const RULES_YAML = `
version: 1
revision: decide-test-1
tenants:
  - id: t
entrypoints:
  - name: by-keyword
    routes:
      - name: code
        when: { keywords: [code, stack trace, c++] }
        models: [[large], [small]]
    default: [[small]]
  - name: by-regex
    routes:
      - name: translate
        when: { regex: { pattern: "^translate\\\\b", flags: i } }
        models: [[small]]
    default: [[large]]
  - name: by-tokens
    routes:
      - name: long
        when: { promptTokensAbove: 100 }
        models: [[large]]
      - name: medium
        when: { promptTokensAbove: 20, promptTokensAtMost: 50 }
        models: [[small, large]]
    default: [[small]]
  - name: by-tools
    routes:
      - name: agent
        when: { toolsPresent: true }
        models: [[large]]
      - name: chat-only
        when: { toolsPresent: false }
        models: [[small]]
    default: [[vision]]
  - name: by-images
    routes:
      - name: vision
        when: { imagesPresent: true }
        models: [[vision]]
    default: [[small]]
  - name: by-header
    routes:
      - name: premium
        when: { header: { name: x-sluice-tier, in: [premium, gold] } }
        models: [[large]]
    default: [[small]]
  - name: ordered
    routes:
      - name: premium
        when: { header: { name: x-sluice-tier, in: [premium] } }
        models: [[large]]
      - name: code-with-tools
        when: { keywords: [code], toolsPresent: true }
        models: [[large], [small]]
      - name: code
        when: { keywords: [code] }
        models: [[small], [large]]
    default: [[small], [large], [vision]]
    retry: { maxAttempts: 4 }
    affinityHeader: x-sluice-session
  - name: plain
    default: [[small]]
models:
  - id: small
    activeRevision: 1
    revisions:
      - { revision: 1, pool: pool-small, requires: [chat] }
  - id: large
    activeRevision: 2
    revisions:
      - { revision: 1, pool: pool-large-old, requires: [chat] }
      - { revision: 2, pool: pool-large, requires: [tools, chat, streaming], downgrades: [top_k] }
  - id: vision
    activeRevision: 1
    revisions:
      - { revision: 1, pool: pool-vision, requires: [chat, images] }
`;

/** A publication text through the full config load (cross-checks included) and compiled. */
export function compile(publicationYaml: string): CompiledPublication {
  return compilePublication(loadConfig({ ...bundledTexts, publication: publicationYaml }).publication);
}

/**
 * A publication text validated by its schema only, skipping the load's cross-checks: the way to
 * get a tier naming a model the publication lacks, which the load would refuse.
 */
export function compileUnchecked(publicationYaml: string): CompiledPublication {
  return compilePublication(publicationSchema.parse(parse(publicationYaml)));
}

export const rules = compile(RULES_YAML);

export function entrypoint(name: string, publication: CompiledPublication = rules): CompiledEntrypoint {
  const ep = publication.entrypoints.get(name);
  if (ep === undefined) throw new Error(`no entrypoint ${name}`);
  return ep;
}

export const T0 = 1_800_000_000_000;

/** What the decide phase reads besides the request: received and planned at T0, a minute to live. */
export function input(over: Partial<DecisionInput> = {}): DecisionInput {
  return { requestId: "req_decide", receivedAt: T0, now: T0, clock: () => over.now ?? T0, clientProtocol: "openai-chat", trustedHeaders: new Map(), requestDeadlineMs: 60_000, ...over };
}

/** The request's signals over a publication's declared ones, as the runner builds them. */
export function signalsFor(publication: CompiledPublication, req: NeutralRequest, over: { readonly trustedHeaders?: ReadonlyMap<string, string>; readonly models?: SignalModels; readonly principal?: { tenantId: string; keyId: string; chargeTo?: string } } = {}): SignalSet {
  return new SignalSet(
    [...publication.signals.values()].map((s) => s.definition),
    {
      input: () => ({ subject: { kind: "model", request: req }, principal: over.principal, trustedHeaders: over.trustedHeaders ?? new Map(), models: over.models }),
      signal: new AbortController().signal,
      scheduler: systemScheduler,
      onFailure: () => {},
    },
  );
}

/** The decide phase on local signals, which decide synchronously (a test fails if it had to wait). */
export function decideLocal(publication: CompiledPublication, ep: CompiledEntrypoint, req: NeutralRequest, inp: DecisionInput): Decided {
  const out = decideChat(publication, ep, req, inp, signalsFor(publication, req, { trustedHeaders: inp.trustedHeaders }));
  if (out instanceof Promise) throw new Error("the decide phase waited for a model-backed signal");
  return out;
}

/** The plan of {@link decideLocal}. */
export function planRequest(publication: CompiledPublication, ep: CompiledEntrypoint, req: NeutralRequest, inp: DecisionInput): DispatchPlan {
  return decideLocal(publication, ep, req, inp).plan;
}

export const text = (t: string): ContentPart => ({ type: "text", text: t });
export const image = (url = "https://images.example/cat.png"): ContentPart => ({ type: "image", url });
export const user = (...parts: (string | ContentPart)[]): NeutralMessage => ({ role: "user", content: parts.map((p) => (typeof p === "string" ? text(p) : p)) });
export const assistant = (t: string): NeutralMessage => ({ role: "assistant", content: [text(t)] });
export const system = (t: string): NeutralMessage => ({ role: "system", content: [text(t)] });
export const tool: ToolDefinition = { name: "lookup", description: "Looks a thing up", parameters: { type: "object" } };

/** A neutral request to `model` (an entrypoint name), not streamed unless told. */
export function request(model: string, messages: readonly NeutralMessage[], extra: Partial<NeutralRequest> = {}): NeutralRequest {
  return { model, messages, stream: false, streamUsage: false, ...extra };
}

/** The plan's tiers as logical model ids. */
export const tierIds = (plan: DispatchPlan): string[][] => plan.tiers.map((t) => t.map((m) => m.logicalModel));
