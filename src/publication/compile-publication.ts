import type { Capability, EntrypointConfig, PublicationConfig, RouteCondition } from "../config/publication-schema.ts";
import type { RequestFeature } from "../protocol/features.ts";
import type { AlgorithmConfig } from "../config/algorithm-schema.ts";
import type { InputOperationId } from "../protocol/input-operation.ts";
import { compileSignal, compileSignals, type CompiledSignal } from "../signals/compile-signals.ts";
import { compileCondition, type CompiledCondition, type ConditionConfig } from "../signals/conditions.ts";
import type { SignalConfig } from "../signals/signal-schema.ts";
import { compileBudgetPolicy, type BudgetPolicy, type EntrypointBudget } from "./budgets.ts";
import type { Principal } from "./principal.ts";

/** What a model entrypoint serves: chat (every generation API), or one input-only operation (`POST /v1/embeddings`, `POST /v1/moderations`). */
export type ModelOperation = "chat" | InputOperationId;

/** A decision compiled once per publication (see `entrypoints[].decisions`). */
export interface CompiledDecision {
  readonly name: string;
  readonly priority: number;
  readonly when: CompiledCondition;
  /** Undefined: the entrypoint's default tiers. */
  readonly tiers: readonly (readonly string[])[] | undefined;
  /** Plugin names (publication.yaml `plugins:`), run after the entrypoint's own. */
  readonly plugins: readonly string[];
  readonly onUnknown: "skip" | "refuse";
  /** A Looper algorithm over the tiers (docs/looper.md); undefined: one dispatch of the tiers. */
  readonly algorithm: AlgorithmConfig | undefined;
}

/** A public model name clients send, with its decisions, tiers, retry bound and budget policy. */
export interface CompiledEntrypoint {
  readonly name: string;
  readonly description: string | undefined;
  readonly operation: ModelOperation;
  /** In the order they are tried: highest priority first, equal priorities as configured. */
  readonly decisions: readonly CompiledDecision[];
  readonly defaultTiers: readonly (readonly string[])[];
  /** Plugin names that run for every request of the entrypoint, before its decision's. */
  readonly plugins: readonly string[];
  readonly maxAttempts: number;
  readonly affinityHeader: string | undefined;
  readonly budget: EntrypointBudget;
  /** Content logging of this entrypoint's requests; undefined: never. */
  readonly contentLog: ContentLogPolicy | undefined;
}

/** What a content log line keeps of a sampled request: see `entrypoints[].contentLog`. */
export interface ContentLogPolicy {
  readonly sampleRatio: number;
  readonly maxChars: number;
  /** The configured patterns and the built-in secret patterns, compiled once. */
  readonly redact: readonly RegExp[];
}

/**
 * Shapes of secrets a prompt may carry whatever the configuration says: provider and gateway API
 * keys, bearer tokens, AWS access keys, private-key blocks — to their end line, or to the end of
 * the text when the content kept for the log was cut before it.
 */
const BUILT_IN_REDACTIONS = [/\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}/g, /\bBearer\s+[A-Za-z0-9._~+/-]{16,}=*/gi, /\bAKIA[0-9A-Z]{16}\b/g, /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)/g];

/** A logical model at its active revision. */
export interface ActiveModel {
  readonly id: string;
  readonly revision: number;
  readonly pool: string;
  readonly requires: readonly Capability[];
  readonly downgrades: readonly RequestFeature[];
}

/** What a publication needs from a BackendSnapshot: checked whenever a snapshot is activated. */
export interface PoolRequirement {
  readonly pool: string;
  readonly requires: readonly Capability[];
  /** Who needs it, for error messages: `model chat-small revision 2`. */
  readonly neededBy: string;
}

/** An API key as the publication knows it; found by the SHA-256 of the presented key. */
export interface CompiledKey {
  readonly principal: Principal;
  readonly disabled: boolean;
  /** Epoch ms from which this value is refused: the key's `expiresAt`, or a rotated-out value's grace end. */
  readonly notAfter?: number | undefined;
}

/**
 * The publication, compiled once per isolate into the one immutable structure every phase reads:
 * authentication (keys), authorization (grants), decisions (entrypoints, rules, active revisions),
 * budgets (scopes, prices, entrypoint policies), the admin route table and the snapshot
 * requirements. Nothing here is re-resolved per request.
 */
export interface CompiledPublication {
  /**
   * What every record names as its publication: `label@N`, the publication's own `revision` label
   * and the controller's revision number it was activated as; the label alone when compiled
   * outside a running gateway (the CLI's offline tools).
   */
  readonly revision: string;
  /** The validated publication it was compiled from (redacted views, the admin route table). */
  readonly source: PublicationConfig;
  readonly entrypoints: ReadonlyMap<string, CompiledEntrypoint>;
  /** Logical models by id, at their active revision. */
  readonly models: ReadonlyMap<string, ActiveModel>;
  /** Keys by the lower-case hex SHA-256 of the key. */
  readonly keys: ReadonlyMap<string, CompiledKey>;
  readonly budgets: BudgetPolicy;
  readonly poolRequirements: readonly PoolRequirement[];
  /** Every signal decisions may read: the publication's own, and those its entrypoints' routes stand for. */
  readonly signals: ReadonlyMap<string, CompiledSignal>;
  /** How long model-backed signals may take once a decision needs them. */
  readonly signalDeadlineMs: number;
  /** Plugin names run on every MCP `tools/call`'s arguments. */
  readonly mcpPlugins: readonly string[];
  /** Whether a principal may call an entrypoint. */
  mayUse(principal: Principal, entrypoint: string): boolean;
  /**
   * The entrypoints a principal may call, in the publication's order: for a model listing. Read
   * from its grants (all entrypoints, listed once per revision, for `*`), so the cost follows what
   * the caller may see, not the size of the publication.
   */
  grantedEntrypoints(principal: Principal): readonly CompiledEntrypoint[];
}

/**
 * A route (the earlier, first-match form) as the condition of a decision over signals that stand
 * for its conditions: one per kind of fact, shared by every route (`routes.context`,
 * `routes.modality`, `routes.header.<name>`) or the route's own (`routes.<entrypoint>.<route>.keywords`).
 */
function routeCondition(ep: string, route: string, when: RouteCondition, signals: Map<string, CompiledSignal>): ConditionConfig {
  const declare = (c: SignalConfig): string => {
    if (!signals.has(c.name)) signals.set(c.name, compileSignal(c));
    return c.name;
  };
  const all: ConditionConfig[] = [];
  if (when.keywords) all.push({ signal: declare({ name: `routes.${ep}.${route}.keywords`, kind: "keywords", words: when.keywords, match: "word", in: "last_user" }) });
  if (when.regex) all.push({ signal: declare({ name: `routes.${ep}.${route}.regex`, kind: "regex", pattern: when.regex.pattern, flags: when.regex.flags, in: "last_user" }) });
  if (when.promptTokensAbove !== undefined) all.push({ signal: declare({ name: "routes.context", kind: "context" }), above: when.promptTokensAbove });
  if (when.promptTokensAtMost !== undefined) all.push({ signal: declare({ name: "routes.context", kind: "context" }), atMost: when.promptTokensAtMost });
  for (const [flag, modality] of [[when.toolsPresent, "tools"], [when.imagesPresent, "images"]] as const) {
    if (flag === undefined) continue;
    const has: ConditionConfig = { signal: declare({ name: "routes.modality", kind: "modality" }), contains: modality };
    all.push(flag ? has : { not: has });
  }
  if (when.header) all.push({ signal: declare({ name: `routes.header.${when.header.name}`, kind: "header", header: when.header.name }), in: when.header.in });
  return { all };
}

/** An entrypoint's decisions (or its routes as decisions), compiled and in the order they are tried. */
function compileDecisions(ep: EntrypointConfig, signals: Map<string, CompiledSignal>): readonly CompiledDecision[] {
  const shapes = () => new Map([...signals].map(([n, s]) => [n, s.shape]));
  if (ep.routes.length > 0) {
    // Priority 0 each, in their order: first match wins, as routes always did.
    return ep.routes.map((r) => ({ name: r.name, priority: 0, when: compileCondition(routeCondition(ep.name, r.name, r.when, signals), shapes(), r.name).condition, tiers: r.models, plugins: [], onUnknown: "skip" as const, algorithm: undefined }));
  }
  const known = shapes();
  return byPriority(
    ep.decisions.map((d) => ({ name: d.name, priority: d.priority, when: compileCondition(d.when, known, d.name).condition, tiers: d.models, plugins: d.plugins, onUnknown: d.onUnknown, algorithm: d.algorithm })),
  );
}

/** Decisions in the order the decide phase tries them: highest priority first, equal priorities as written. */
export function byPriority<D extends { readonly priority: number }>(decisions: readonly D[]): readonly D[] {
  return decisions.map((d, i) => ({ d, i })).sort((a, b) => b.d.priority - a.d.priority || a.i - b.i).map(({ d }) => d);
}

function compileEntrypoint(ep: EntrypointConfig, budgets: BudgetPolicy, signals: Map<string, CompiledSignal>): CompiledEntrypoint {
  return {
    name: ep.name,
    description: ep.description,
    operation: ep.operation,
    decisions: compileDecisions(ep, signals),
    defaultTiers: ep.default,
    plugins: ep.plugins,
    maxAttempts: ep.retry.maxAttempts,
    affinityHeader: ep.affinityHeader,
    budget: budgets.entrypoint(ep.name),
    contentLog: ep.contentLog ? { sampleRatio: ep.contentLog.sampleRatio, maxChars: ep.contentLog.maxChars, redact: [...ep.contentLog.redact.map((r) => new RegExp(r, "g")), ...BUILT_IN_REDACTIONS] } : undefined,
  };
}

/**
 * Compiles a validated publication (its cross-references were checked at load). Read-only by
 * type: a request pins this object, so nothing may change it under another request.
 * `controllerRevision`: the revision number the publication controller activated it as.
 */
export function compilePublication(pub: PublicationConfig, controllerRevision?: number): CompiledPublication {
  const budgets = compileBudgetPolicy(pub);
  const models = new Map<string, ActiveModel>();
  const poolRequirements: PoolRequirement[] = [];
  for (const m of pub.models) {
    const r = m.revisions.find((rev) => rev.revision === m.activeRevision);
    if (!r) continue;
    models.set(m.id, { id: m.id, revision: r.revision, pool: r.pool, requires: r.requires, downgrades: r.downgrades });
    // Inactive revisions are not required, so operators can retire the pools nobody routes to.
    poolRequirements.push({ pool: r.pool, requires: r.requires, neededBy: `model ${m.id} revision ${r.revision}` });
  }
  const keys = new Map<string, CompiledKey>();
  const grants = new Map<string, "*" | ReadonlySet<string>>();
  for (const t of pub.tenants) {
    for (const k of t.apiKeys) {
      // A revoked key is not a key: its entry stays only so its id is never reused.
      if (k.revokedAt === undefined) {
        const principal: Principal = { tenantId: t.id, keyId: k.id, ...(k.chargeTo !== undefined ? { chargeTo: k.chargeTo } : {}) };
        const expires = k.expiresAt === undefined ? undefined : Date.parse(k.expiresAt);
        keys.set(k.sha256, { principal, disabled: k.disabled, notAfter: expires });
        // The same principal for every value a rotation replaced: sessions, approvals, task bindings and budgets carry over.
        for (const p of k.previous) keys.set(p.sha256, { principal, disabled: k.disabled, notAfter: Math.min(Date.parse(p.until), expires ?? Number.POSITIVE_INFINITY) });
      }
      grants.set(`${t.id}\u0000${k.id}`, k.entrypoints.includes("*") ? "*" : new Set(k.entrypoints));
    }
  }
  const signals = new Map(compileSignals(pub.signals));
  const entrypoints = new Map(pub.entrypoints.map((ep) => [ep.name, compileEntrypoint(ep, budgets, signals)]));
  const everyEntrypoint = Object.freeze([...entrypoints.values()]);
  const order = new Map(pub.entrypoints.map((ep, i) => [ep.name, i]));
  const listed = (names: Iterable<string>): readonly CompiledEntrypoint[] =>
    [...new Set(names)]
      .filter((n) => order.has(n))
      .sort((a, b) => order.get(a)! - order.get(b)!)
      .map((n) => entrypoints.get(n)!);
  return Object.freeze({
    revision: controllerRevision === undefined ? pub.revision : `${pub.revision}@${controllerRevision}`,
    source: pub,
    entrypoints,
    models,
    keys,
    budgets,
    poolRequirements,
    signals,
    signalDeadlineMs: pub.signalDeadlineMs,
    mcpPlugins: pub.mcp?.plugins ?? [],
    mayUse(principal: Principal, entrypoint: string): boolean {
      // A token carries its grants; a key's are the publication's (a token's key id, `<issuer>:<sub>`, is never a key's).
      if (principal.entrypoints !== undefined) return principal.entrypoints.includes("*") || principal.entrypoints.includes(entrypoint);
      const g = grants.get(`${principal.tenantId}\u0000${principal.keyId}`);
      return g === "*" || (g !== undefined && g.has(entrypoint));
    },
    grantedEntrypoints(principal: Principal): readonly CompiledEntrypoint[] {
      // A token's scopes, as mayUse reads them; else the key's grant.
      if (principal.entrypoints !== undefined) return principal.entrypoints.includes("*") ? everyEntrypoint : listed(principal.entrypoints);
      const g = grants.get(`${principal.tenantId}\u0000${principal.keyId}`);
      return g === undefined ? [] : g === "*" ? everyEntrypoint : listed(g);
    },
  });
}
