import { cachePartition, promptDigest, type CachePartition } from "../cache/cache-key.ts";
import { notStoredReason } from "../cache/cache-policy.ts";
import { lexicalSignature, type LexicalSignature } from "../cache/lexical-gate.ts";
import { requestKey } from "../cache/request-key.ts";
import type { PluginConfig } from "../config/plugin-schema.ts";
import type { NeutralResponse, StopReason, Usage } from "../protocol/neutral.ts";
import type { ImmediateAnswer, Plugin, PluginDeps, PluginFactory, RequestSafeInput, StreamEventFilter } from "./plugin.ts";

type CacheConfig = Extract<PluginConfig, { kind: "cache" }>;

/** A miss that may be stored once its answer is known. */
interface Pending {
  readonly partition: CachePartition;
  readonly promptDigest: string;
  readonly signature: LexicalSignature;
  readonly vector: Float32Array | undefined;
  readonly temperature: number | undefined;
}

/** The answer as it passed the plugin's place in the stream-event chain. */
interface Assembled {
  text: string;
  reasoning: { text: string; signature?: string | undefined }[];
  toolCalls: boolean;
  stop: { reason: StopReason; stopSequence?: string | undefined } | undefined;
  /** As the answer reported it (a Looper run's: its accepted step's); an upstream attempt's own wins. */
  usage: Usage | undefined;
  failed: boolean;
}

/** Stop reasons of an answer that ended on its own: a cut (`max_tokens`), a refusal or a tool call is not replayed. */
const COMPLETE: ReadonlySet<StopReason> = new Set(["end_turn", "stop_sequence"]);

/**
 * The response cache as a plugin (docs/cache.md). Per request it is three hooks sharing that
 * request's state:
 * - `request_safe`: computes the key on the request as it will be sent, looks it up in the
 *   tenant's partition, and on a hit hands back the answer (nothing is reserved or sent);
 * - `stream_event_safe`: on a miss, assembles the answer as it passes (holding nothing back);
 * - `terminal_observer`: once the request has ended, stores the answer when everything says it
 *   may be (a success with known usage, complete, no tool call, no refusal, within the size bound).
 * A cache that cannot be read or written never fails a request: the lookup is a miss, the store
 * is skipped, and the failure is logged.
 */
export function responseCachePlugin(c: CacheConfig, deps: PluginDeps): PluginFactory {
  const name = c.name;
  const log = deps.log ?? (() => {});
  return {
    name,
    instantiate(): readonly Plugin[] {
      let pending: Pending | undefined;
      let assembled: Assembled | undefined;
      const lookup = async (input: RequestSafeInput): Promise<ImmediateAnswer | undefined> => {
        const { subject, facts } = input;
        if (input.explain || subject.kind !== "model" || facts === undefined) return undefined;
        const skip = (why: string) => void input.report({ plugin: name, action: "cache_skipped", detail: why });
        const cacheOf = deps.cacheOf;
        if (cacheOf === undefined) return skip("unavailable");
        if (!facts.cache.lookup && !facts.cache.store) return skip("bypass");
        const request = subject.request;
        if (request.temperature !== undefined && request.temperature > c.maxTemperature) return skip("temperature");
        const key = await requestKey(request);
        if (typeof key === "string") return skip(key);
        const header = c.knowledgeVersionHeader === undefined ? undefined : facts.trustedHeaders.get(c.knowledgeVersionHeader);
        const partition = await cachePartition({
          tenant: input.principal.tenantId,
          entrypoint: facts.entrypoint,
          decision: input.decision ?? "default",
          models: facts.models,
          systemDigest: key.systemDigest,
          toolsDigest: key.toolsDigest,
          responseFormat: key.responseFormat,
          historyDigest: key.historyDigest,
          matcher: c.mode === "semantic" ? `semantic:${c.model}` : "exact",
          knowledgeVersion: header === undefined ? c.knowledgeVersion : `${c.knowledgeVersion}\u0000${header}`,
          scope: c.scope,
          // A key or token charged to no team or project shares the tenant's own partition.
          project: input.principal.chargeTo ?? "",
          key: input.principal.keyId,
        });
        const signature = lexicalSignature(key.prompt);
        let vector: Float32Array | undefined;
        if (c.mode === "semantic" && input.models !== undefined) {
          try {
            // The similarity signals' embedding of the same text by the same model, when they made one.
            [vector] = await input.models.embed(c.model!, [key.prompt], input.signal);
          } catch (err) {
            log({ kind: "cache_embedding_failed", plugin: name, error: String(err) });
          }
        }
        const digest = await promptDigest(key.prompt);
        if (facts.cache.lookup) {
          try {
            const hit = await cacheOf(partition.tenant).lookup({
              scopeKey: partition.scopeKey,
              promptDigest: digest,
              semantic: vector === undefined ? undefined : { vector, threshold: c.threshold, signature },
            });
            if (hit !== undefined) {
              input.report({ plugin: name, action: "cache_hit", detail: hit.match, similarity: hit.similarity, ageMs: hit.ageMs });
              return { kind: "answer", response: JSON.parse(hit.response) as NeutralResponse };
            }
          } catch (err) {
            log({ kind: "cache_lookup_failed", plugin: name, error: String(err) });
          }
          input.report({ plugin: name, action: "cache_miss", detail: c.mode });
        } else skip("no-cache");
        if (facts.cache.store) pending = { partition, promptDigest: digest, signature, vector, temperature: request.temperature };
        return undefined;
      };
      const record: StreamEventFilter = {
        event(ev) {
          const a = (assembled ??= { text: "", reasoning: [], toolCalls: false, stop: undefined, usage: undefined, failed: false });
          switch (ev.type) {
            case "text":
              a.text += ev.text;
              break;
            case "reasoning":
              if (a.reasoning.length === 0) a.reasoning.push({ text: "" });
              a.reasoning[a.reasoning.length - 1]!.text += ev.text;
              break;
            case "reasoning_signature":
              if (a.reasoning.length > 0) a.reasoning[a.reasoning.length - 1]!.signature = ev.signature;
              break;
            case "tool_call_start":
            case "tool_call_args":
              a.toolCalls = true;
              break;
            case "stop":
              a.stop = { reason: ev.reason, stopSequence: ev.stopSequence };
              break;
            case "usage":
              a.usage = ev.usage;
              break;
            case "error":
              a.failed = true;
              break;
            default:
              break;
          }
          return [ev];
        },
        end: () => [],
      };
      return [
        { name, class: "request_safe", apply: lookup },
        { name, class: "stream_event_safe", maxHoldBack: 0, open: () => (pending === undefined ? PASS : record) },
        {
          name,
          class: "terminal_observer",
          observe(view) {
            const p = pending;
            const a = assembled;
            if (p === undefined || a === undefined || deps.cacheOf === undefined) return;
            const last = view.attempts.at(-1);
            // A Looper run sends nothing itself: its answer is its accepted step's, each step a
            // buffered sub-call that succeeded (a run that accepted none ended in an error).
            const looper = view.record.looper;
            const answered = looper === undefined ? last?.outcome === "success" : looper.accepted !== undefined;
            const usage = looper === undefined ? last?.usage : a.usage;
            const response: NeutralResponse = {
              text: a.text,
              reasoning: a.reasoning.length === 0 ? undefined : a.reasoning,
              toolCalls: [],
              stopReason: a.stop?.reason ?? "other",
              stopSequence: a.stop?.stopSequence,
              usage,
            };
            const body = JSON.stringify(response);
            const why = notStoredReason({
              directives: { lookup: true, store: true },
              temperature: p.temperature,
              maxTemperature: c.maxTemperature,
              succeeded: view.record.outcome === "success" && answered && !a.failed,
              toolCalls: a.toolCalls,
              refusal: a.stop?.reason === "content_filter",
              complete: a.stop !== undefined && COMPLETE.has(a.stop.reason),
              usageKnown: usage !== undefined && usage.source === "provider",
              bytes: new TextEncoder().encode(body).byteLength,
              maxBytes: c.maxResponseBytes,
            });
            if (why !== undefined) {
              // The record is already written: the reason goes to the log, so an operator can see why a prompt keeps missing.
              if (why !== "directive") log({ kind: "cache_not_stored", plugin: name, requestId: view.record.requestId, reason: why });
              return;
            }
            view.waitUntil(
              deps
                .cacheOf(p.partition.tenant)
                .put({ scope: p.partition, promptDigest: p.promptDigest, signature: p.signature, vector: p.vector, response: body, ttlMs: c.ttlMs, maxEntries: c.maxEntries })
                .catch((err: unknown) => log({ kind: "cache_store_failed", plugin: name, error: String(err) })),
            );
          },
        },
      ];
    },
  };
}

const PASS: StreamEventFilter = { event: (ev) => [ev], end: () => [] };
