import type { Capability, EntrypointConfig, PublicationConfig, RouteCondition } from "../config/publication-schema.ts";
import type { RequestFeature } from "../protocol/features.ts";
import type { InputOperationId } from "../protocol/input-operation.ts";
import { compileBudgetPolicy, type BudgetPolicy, type EntrypointBudget } from "./budgets.ts";
import type { Principal } from "./principal.ts";

/**
 * A decision rule's conditions, compiled once: regular expressions built, value lists turned into
 * sets. Every condition given must hold; the decide phase evaluates them against request facts.
 */
export interface CompiledCondition {
  /** Any configured keyword as a whole word, case-insensitive. */
  readonly keywords?: RegExp | undefined;
  readonly regex?: RegExp | undefined;
  readonly promptTokensAbove?: number | undefined;
  readonly promptTokensAtMost?: number | undefined;
  readonly toolsPresent?: boolean | undefined;
  readonly imagesPresent?: boolean | undefined;
  readonly header?: { readonly name: string; readonly values: ReadonlySet<string> } | undefined;
}

export interface CompiledRoute {
  readonly name: string;
  readonly when: CompiledCondition;
  readonly tiers: readonly (readonly string[])[];
}

/** What a model entrypoint serves: chat (every generation API), or one input-only operation (`POST /v1/embeddings`, `POST /v1/moderations`). */
export type ModelOperation = "chat" | InputOperationId;

/** A public model name clients send, with its rules, tiers, retry bound and budget policy. */
export interface CompiledEntrypoint {
  readonly name: string;
  readonly description: string | undefined;
  readonly operation: ModelOperation;
  readonly routes: readonly CompiledRoute[];
  readonly defaultTiers: readonly (readonly string[])[];
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
}

/**
 * The publication, compiled once per isolate into the one immutable structure every phase reads:
 * authentication (keys), authorization (grants), decisions (entrypoints, rules, active revisions),
 * budgets (scopes, prices, entrypoint policies), the admin route table and the snapshot
 * requirements. Nothing here is re-resolved per request.
 */
export interface CompiledPublication {
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
  /** Whether a principal may call an entrypoint. */
  mayUse(principal: Principal, entrypoint: string): boolean;
}

const escapeRegex = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

function compileCondition(when: RouteCondition): CompiledCondition {
  return {
    keywords: when.keywords ? new RegExp(`(?:^|\\W)(?:${when.keywords.map(escapeRegex).join("|")})(?:$|\\W)`, "iu") : undefined,
    regex: when.regex ? new RegExp(when.regex.pattern, when.regex.flags) : undefined,
    promptTokensAbove: when.promptTokensAbove,
    promptTokensAtMost: when.promptTokensAtMost,
    toolsPresent: when.toolsPresent,
    imagesPresent: when.imagesPresent,
    header: when.header ? { name: when.header.name, values: new Set(when.header.in) } : undefined,
  };
}

function compileEntrypoint(ep: EntrypointConfig, budgets: BudgetPolicy): CompiledEntrypoint {
  return {
    name: ep.name,
    description: ep.description,
    operation: ep.operation,
    routes: ep.routes.map((r) => ({ name: r.name, when: compileCondition(r.when), tiers: r.models })),
    defaultTiers: ep.default,
    maxAttempts: ep.retry.maxAttempts,
    affinityHeader: ep.affinityHeader,
    budget: budgets.entrypoint(ep.name),
    contentLog: ep.contentLog ? { sampleRatio: ep.contentLog.sampleRatio, maxChars: ep.contentLog.maxChars, redact: [...ep.contentLog.redact.map((r) => new RegExp(r, "g")), ...BUILT_IN_REDACTIONS] } : undefined,
  };
}

/**
 * Compiles a validated publication (its cross-references were checked at load). Read-only by
 * type: a request pins this object, so nothing may change it under another request.
 */
export function compilePublication(pub: PublicationConfig): CompiledPublication {
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
      keys.set(k.sha256, { principal: { tenantId: t.id, keyId: k.id, ...(k.chargeTo !== undefined ? { chargeTo: k.chargeTo } : {}) }, disabled: k.disabled });
      grants.set(`${t.id}\u0000${k.id}`, k.entrypoints.includes("*") ? "*" : new Set(k.entrypoints));
    }
  }
  const entrypoints = new Map(pub.entrypoints.map((ep) => [ep.name, compileEntrypoint(ep, budgets)]));
  return Object.freeze({
    revision: pub.revision,
    source: pub,
    entrypoints,
    models,
    keys,
    budgets,
    poolRequirements,
    mayUse(principal: Principal, entrypoint: string): boolean {
      const g = grants.get(`${principal.tenantId}\u0000${principal.keyId}`);
      return g === "*" || (g !== undefined && g.has(entrypoint));
    },
  });
}
