import { canonicalDigest } from "../digest/canonical-digest.ts";

/** Whose answers a cache entry may serve within a tenant: everyone in the project (default), or only the same key. */
export type CacheScope = "project" | "key";

/**
 * Everything an answer depends on besides the prompt's last words, and the principal it may be
 * served to. Two requests share cache entries only when every field is equal.
 */
export interface CacheKeyParts {
  readonly tenant: string;
  readonly entrypoint: string;
  readonly decision: string;
  /**
   * The plan's logical models with their published revisions, tier by tier (`chat-small@3|chat-large@1`):
   * a new revision never serves an older one's answers.
   */
  readonly models: string;
  /** Digests (`sha256:…`) of the system prompt and of the tool declarations; "" when there are none. */
  readonly systemDigest: string;
  readonly toolsDigest: string;
  /** The requested response format (`text`, `json_object`, or a schema's digest). */
  readonly responseFormat: string;
  /** Digest of the conversation before the last user turn: a semantic match compares the last turn only. */
  readonly historyDigest: string;
  /**
   * How prompts are matched: `exact`, or `semantic:<embeddings model>` (vectors of two models are
   * not comparable, so each model has its own partition).
   */
  readonly matcher: string;
  /** The publication's `knowledgeVersion`, or the trusted header's; "" when neither. */
  readonly knowledgeVersion: string;
  readonly scope: CacheScope;
  readonly project: string;
  readonly key: string;
}

/**
 * Where a request's entries live. `tenant` names the Durable Object (the partition: one per tenant,
 * so no lookup can reach another tenant's entries); `scopeKey` is the partition within it every
 * lookup and store is confined to; `project` and `key` (the key only under key scope) are kept on
 * each entry so an operator can delete by scope.
 */
export interface CachePartition {
  readonly tenant: string;
  readonly scopeKey: string;
  readonly project: string;
  readonly key?: string | undefined;
}

/** The partition of a request (see {@link CachePartition}). */
export async function cachePartition(parts: CacheKeyParts): Promise<CachePartition> {
  const principal = parts.scope === "key" ? { project: parts.project, key: parts.key } : { project: parts.project };
  const scopeKey = await canonicalDigest({
    v: 1,
    tenant: parts.tenant,
    entrypoint: parts.entrypoint,
    decision: parts.decision,
    models: parts.models,
    system: parts.systemDigest,
    tools: parts.toolsDigest,
    responseFormat: parts.responseFormat,
    history: parts.historyDigest,
    matcher: parts.matcher,
    knowledgeVersion: parts.knowledgeVersion,
    scope: parts.scope,
    principal,
  });
  return { tenant: parts.tenant, scopeKey, project: parts.project, key: parts.scope === "key" ? parts.key : undefined };
}

/**
 * The exact-match digest of a prompt within a partition: the last user turn with runs of white
 * space folded, so a resent prompt matches whatever its trailing newline.
 */
export async function promptDigest(prompt: string): Promise<string> {
  return canonicalDigest({ prompt: prompt.trim().replace(/\s+/g, " ") });
}
