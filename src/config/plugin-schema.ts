import { z } from "zod";
import { PII_DETECTORS } from "../signals/pii.ts";
import { regexSource, scope } from "../signals/signal-schema.ts";
import { upstreamHeaderRefusal } from "../egress/upstream-headers.ts";

const id = z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, "ids are 1-64 lower-case letters, digits, '.', '_' or '-'");
/**
 * What happens when the check itself fails (a detector throws): `closed` refuses the request
 * (`signal_unavailable`), `open` lets it through as it is. Either way the record says which.
 */
const onError = z.enum(["closed", "open"]);

const common = { name: id, description: z.string().optional() };

/**
 * PII in the request (`request_safe`): `redact` sends placeholders such as `[EMAIL_1]` upstream
 * and, with `restore`, puts the values back in the answer (`stream_event_safe`); `block` refuses
 * the request naming the detectors; `allow` lets it through and counts what it found.
 */
const piiPlugin = z.strictObject({
  ...common,
  kind: z.literal("pii"),
  action: z.enum(["redact", "block", "allow"]),
  detectors: z.array(z.enum(PII_DETECTORS)).min(1).default([...PII_DETECTORS]),
  in: scope.default("all"),
  restore: z.boolean().default(true),
  onError: onError.default("closed"),
});

/** The published jailbreak phrase set (and the operator's rules) in the request: refuse it, naming the rule. */
const jailbreakPlugin = z.strictObject({
  ...common,
  kind: z.literal("jailbreak"),
  builtIn: z.boolean().default(true),
  rules: z.array(z.strictObject({ id, pattern: regexSource })).default([]),
  in: scope.default("user"),
  onError: onError.default("closed"),
});

/** Refuses every request it runs for: the action of a decision that stands for "do not serve this" (a jailbreak, a flagged prompt). */
const blockPlugin = z.strictObject({
  ...common,
  kind: z.literal("block"),
  /** Published with the refusal, so it is the operator's words, never the prompt's. */
  reason: z.string().min(1).max(200).optional(),
});

/** A system prompt of the operator's: put before the request's own, after them, or instead of them. */
const systemPromptPlugin = z.strictObject({
  ...common,
  kind: z.literal("system_prompt"),
  mode: z.enum(["prepend", "append", "replace"]),
  text: z.string().min(1).max(65_536),
});

/** Headers set on the request to the backend, from a fixed allowlist (never credentials, hop-by-hop or the gateway's own). */
const headersPlugin = z.strictObject({
  ...common,
  kind: z.literal("headers"),
  set: z
    .record(
      z.string().superRefine((name, ctx) => {
        const why = upstreamHeaderRefusal(name);
        if (why !== undefined) ctx.addIssue({ code: "custom", message: why });
      }),
      z.string().max(1024).regex(/^[\t\x20-\x7e]*$/, "header values are visible ASCII"),
    )
    .refine((h) => Object.keys(h).length > 0, { message: "set at least one header" }),
});

/** PII in the answer, masked (`[EMAIL]`) before the client sees it; streamed answers hold back a short tail to see a value whole. */
const outputPiiPlugin = z.strictObject({
  ...common,
  kind: z.literal("output_pii"),
  detectors: z.array(z.enum(PII_DETECTORS)).min(1).default([...PII_DETECTORS]),
  onError: onError.default("closed"),
});

/**
 * The response cache (docs/cache.md): a request it has answered before is answered from the
 * tenant's partition without a provider attempt. `exact` matches the last user turn's text;
 * `semantic` its embedding by `model` (an embeddings entrypoint; the similarity signals' embedding
 * of the same text is reused) at `threshold`, and a lexical second gate.
 */
const cachePlugin = z
  .strictObject({
    ...common,
    kind: z.literal("cache"),
    mode: z.enum(["exact", "semantic"]),
    model: id.optional(),
    threshold: z.number().gt(0).max(1).default(0.85),
    ttlMs: z.number().int().min(1_000).max(30 * 86_400_000).default(3_600_000),
    maxEntries: z.number().int().min(1).max(1_000).default(100),
    scope: z.enum(["project", "key"]).default("project"),
    /** Answers to requests sampled above this temperature are not stored (nor served). */
    maxTemperature: z.number().min(0).max(2).default(0.3),
    /** The version of the knowledge answers draw on: a new value stops every older answer from matching. */
    knowledgeVersion: z.string().max(128).default(""),
    /** A trusted header whose value, when present, is part of the knowledge version. */
    knowledgeVersionHeader: z.string().regex(/^[a-z0-9-]+$/, "a lower-case header name").optional(),
    /** Answers larger than this (UTF-8 bytes of the stored form) are not stored. */
    maxResponseBytes: z.number().int().min(1_024).max(1_048_576).default(65_536),
  })
  .refine((c) => (c.mode === "semantic") === (c.model !== undefined), { message: "a semantic cache names its embeddings entrypoint (model); an exact cache names none", path: ["model"] });

/** A named plugin of the publication (publication.yaml `plugins:`); entrypoints, decisions and MCP refer to it by name. */
export const pluginSchema = z.discriminatedUnion("kind", [piiPlugin, jailbreakPlugin, blockPlugin, systemPromptPlugin, headersPlugin, outputPiiPlugin, cachePlugin]);

export type PluginConfig = z.infer<typeof pluginSchema>;
export type PluginKind = PluginConfig["kind"];

/** Plugin kinds that apply to an MCP tool call's arguments (the others are about prompts and answers). */
export const TOOL_CALL_PLUGIN_KINDS: readonly PluginKind[] = ["pii", "jailbreak", "block"];

/**
 * The plugins a Looper algorithm may run on each of its sub-calls (`algorithm.perModelCall`): not
 * `cache` (a step's answer is not the answer the decision's cache keys) and not `block` (it would
 * refuse every step; a decision that must not be served refuses once, with its own plugins).
 */
export const PER_MODEL_CALL_PLUGIN_KINDS: readonly PluginKind[] = ["pii", "jailbreak", "system_prompt", "headers", "output_pii"];
