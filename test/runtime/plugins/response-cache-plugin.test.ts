/**
 * The response cache plugin on its own, over a recording fake of the tenant's partition: what it
 * looks up and stores, and every answer it must not store (tool calls, refusals, cut or failed
 * answers, unknown usage, a hot temperature, a client's no-store).
 */
import { describe, expect, it } from "vitest";
import type { CacheEntry, CacheHit, CacheLookup } from "../../../src/cache/cache-store.ts";
import { pluginSchema } from "../../../src/config/plugin-schema.ts";
import type { AttemptRecord } from "../../../src/context/attempt-record.ts";
import type { TerminalView } from "../../../src/context/request-context.ts";
import type { LooperRecord, PluginReport, RequestRecord } from "../../../src/context/request-record.ts";
import { compilePlugins } from "../../../src/plugins/compile-plugins.ts";
import { byClass, type RequestFacts } from "../../../src/plugins/plugin.ts";
import { StreamEventChain } from "../../../src/plugins/stream-event-chain.ts";
import type { NeutralEvent, NeutralRequest, Usage } from "../../../src/protocol/neutral.ts";
import { SignalSet } from "../../../src/signals/signal-set.ts";
import type { Subject } from "../../../src/signals/subject.ts";

const USAGE: Usage = { inputTokens: 10, outputTokens: 5, source: "provider" };

function fakeCache(hit?: CacheHit) {
  const lookups: CacheLookup[] = [];
  const puts: CacheEntry[] = [];
  const pending: Promise<unknown>[] = [];
  return {
    lookups,
    puts,
    pending,
    cacheOf: (_tenant: string) => ({
      lookup: async (q: CacheLookup) => (lookups.push(q), hit),
      put: async (e: CacheEntry) => (puts.push(e), true),
    }),
  };
}

const request = (text: string, extra: Partial<NeutralRequest> = {}): NeutralRequest => ({ model: "m", messages: [{ role: "user", content: [{ type: "text", text }] }], stream: true, streamUsage: false, ...extra });
const facts = (cache = { lookup: true, store: true }): RequestFacts => ({ entrypoint: "ep", models: "chat@1", trustedHeaders: new Map(), cache });

/** One request through the plugin: lookup, the answer's events through its filter, then the terminal. */
async function run(o: { config?: Record<string, unknown>; request?: NeutralRequest; facts?: RequestFacts; events?: NeutralEvent[]; usage?: Usage | undefined; outcome?: "success" | "error"; hit?: CacheHit; models?: boolean; looper?: LooperRecord }) {
  const cache = fakeCache(o.hit);
  const config = pluginSchema.parse({ name: "c", kind: "cache", mode: "exact", ...o.config });
  const logged: Readonly<Record<string, unknown>>[] = [];
  const factory = compilePlugins([config], { cacheOf: cache.cacheOf, log: (e) => void logged.push(e) }).get("c")!;
  const reports: PluginReport[] = [];
  const hooks = byClass(factory.instantiate((r) => void reports.push(r)));
  const subject: Subject = { kind: "model", request: o.request ?? request("What is the refund policy?") };
  const embedded: string[] = [];
  const answer = await hooks.requestSafe[0]!.apply({
    subject,
    principal: { tenantId: "t", keyId: "k", chargeTo: "team/proj" },
    signals: new SignalSet([], { input: () => ({ subject, principal: undefined, trustedHeaders: new Map(), models: undefined }), signal: new AbortController().signal, scheduler: { schedule: () => () => {} }, onFailure: () => {} }),
    report: (r) => void reports.push(r),
    signal: new AbortController().signal,
    facts: o.facts ?? facts(),
    models: o.models ? { embed: async (_m, texts) => (embedded.push(...texts), texts.map(() => Float32Array.of(1, 0))) } : undefined,
  });
  const chain = new StreamEventChain(hooks.streamEvent);
  for (const ev of o.events ?? [{ type: "start" }, { type: "text", text: "Thirty days." }, { type: "stop", reason: "end_turn" }]) chain.push(ev);
  chain.end();
  const attempt = { outcome: o.outcome ?? "success", usage: "usage" in o ? o.usage : USAGE } as unknown as AttemptRecord;
  // A Looper run's request sends nothing itself: its answer comes from its steps.
  const view: TerminalView = { record: { requestId: "req-1", outcome: o.outcome ?? "success", looper: o.looper } as RequestRecord, attempts: o.looper ? [] : [attempt], waitUntil: (p) => void cache.pending.push(p) };
  for (const obs of hooks.observers) obs.observe(view);
  await Promise.all(cache.pending);
  return { answer, reports, ...cache, embedded, logged };
}

describe("the response cache plugin", () => {
  it("looks a miss up in one scope key and stores its complete answer with known usage", async () => {
    const r = await run({});
    expect(r.answer).toBeUndefined();
    expect(r.reports).toEqual([{ plugin: "c", action: "cache_miss", detail: "exact" }]);
    expect(r.lookups).toHaveLength(1);
    expect(r.lookups[0]!.semantic).toBeUndefined();
    expect(r.puts).toHaveLength(1);
    const put = r.puts[0]!;
    expect(put.scope).toMatchObject({ scopeKey: r.lookups[0]!.scopeKey, project: "team/proj" });
    expect(put.scope.key).toBeUndefined();
    expect(JSON.parse(put.response)).toEqual({ text: "Thirty days.", toolCalls: [], stopReason: "end_turn", usage: USAGE });
    expect(put).toMatchObject({ ttlMs: 3_600_000, maxEntries: 100 });
  });

  it("answers a hit with the stored response and records how it matched", async () => {
    const stored = { text: "Thirty days.", toolCalls: [], stopReason: "end_turn", usage: USAGE };
    const r = await run({ hit: { response: JSON.stringify(stored), match: "semantic", similarity: 0.93, ageMs: 1200 } });
    expect(r.answer).toEqual({ kind: "answer", response: stored });
    expect(r.reports).toEqual([{ plugin: "c", action: "cache_hit", detail: "semantic", similarity: 0.93, ageMs: 1200 }]);
    expect(r.puts).toEqual([]);
  });

  it("embeds the last user turn for a semantic lookup, with the plugin's model", async () => {
    const r = await run({ config: { mode: "semantic", model: "embed", threshold: 0.9 }, models: true });
    expect(r.embedded).toEqual(["What is the refund policy?"]);
    expect(r.lookups[0]!.semantic).toMatchObject({ threshold: 0.9, signature: { terms: ["what", "refund", "policy"] } });
    expect(r.puts[0]!.vector).toEqual(Float32Array.of(1, 0));
  });

  it("never stores a tool call, a refusal, a cut or failed answer, or one without reported usage", async () => {
    const cases: [string, Parameters<typeof run>[0]][] = [
      ["tool call", { events: [{ type: "start" }, { type: "tool_call_start", index: 0, id: "c1", name: "refund" }, { type: "tool_call_args", index: 0, delta: "{}" }, { type: "stop", reason: "tool_use" }] }],
      ["refusal", { events: [{ type: "start" }, { type: "text", text: "I can't help." }, { type: "stop", reason: "content_filter" }] }],
      ["cut by the cap", { events: [{ type: "start" }, { type: "text", text: "Thirty" }, { type: "stop", reason: "max_tokens" }] }],
      ["stream cut", { events: [{ type: "start" }, { type: "text", text: "Thirty" }, { type: "error", code: "upstream_stream_cut", message: "cut" }] }],
      ["no stop", { events: [{ type: "start" }, { type: "text", text: "Thirty" }] }],
      ["failed request", { outcome: "error" }],
      ["unknown usage", { usage: undefined }],
      ["estimated usage", { usage: { ...USAGE, source: "estimated" } }],
    ];
    for (const [why, o] of cases) expect((await run(o)).puts, why).toEqual([]);
  });

  it("follows the client's directives and the temperature bound", async () => {
    const bypass = await run({ facts: facts({ lookup: false, store: false }) });
    expect(bypass.reports).toEqual([{ plugin: "c", action: "cache_skipped", detail: "bypass" }]);
    expect([bypass.lookups, bypass.puts]).toEqual([[], []]);
    const noStore = await run({ facts: facts({ lookup: true, store: false }) });
    expect([noStore.lookups.length, noStore.puts.length]).toEqual([1, 0]);
    const noCache = await run({ facts: facts({ lookup: false, store: true }) });
    expect([noCache.lookups.length, noCache.puts.length]).toEqual([0, 1]);
    const hot = await run({ request: request("What is the refund policy?", { temperature: 0.9 }) });
    expect(hot.reports).toEqual([{ plugin: "c", action: "cache_skipped", detail: "temperature" }]);
    expect([hot.lookups, hot.puts]).toEqual([[], []]);
  });

  it("does not cache a conversation whose last turn is not the user's, or one with images", async () => {
    const assistantLast = await run({ request: { ...request("hi"), messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }, { role: "assistant", content: [{ type: "text", text: "Hello" }] }] } });
    expect(assistantLast.reports).toEqual([{ plugin: "c", action: "cache_skipped", detail: "no_user_turn" }]);
    const image = await run({ request: { ...request("hi"), messages: [{ role: "user", content: [{ type: "text", text: "what is this?" }, { type: "image", url: "https://example.com/a.png" }] }] } });
    expect(image.reports).toEqual([{ plugin: "c", action: "cache_skipped", detail: "non_text" }]);
    expect([...assistantLast.puts, ...image.puts]).toEqual([]);
  });

  it("keys key-scoped entries by key, and different histories, params and system prompts apart", async () => {
    const keyed = await run({ config: { scope: "key" } });
    expect(keyed.puts[0]!.scope.key).toBe("k");
    const base = (await run({})).lookups[0]!.scopeKey;
    const variants = [
      request("What is the refund policy?", { maxOutputTokens: 50 }),
      request("What is the refund policy?", { stop: ["\n"] }),
      { ...request("x"), messages: [{ role: "system" as const, content: [{ type: "text" as const, text: "Be brief." }] }, { role: "user" as const, content: [{ type: "text" as const, text: "What is the refund policy?" }] }] },
      { ...request("x"), messages: [{ role: "user" as const, content: [{ type: "text" as const, text: "Hi" }] }, { role: "assistant" as const, content: [{ type: "text" as const, text: "Hello" }] }, { role: "user" as const, content: [{ type: "text" as const, text: "What is the refund policy?" }] }] },
    ];
    for (const v of variants) expect((await run({ request: v })).lookups[0]!.scopeKey).not.toBe(base);
    // Transport hints and caller metadata do not change the answer: same key.
    expect((await run({ request: request("What is the refund policy?", { user: "u1", metadata: { a: "b" }, stream: false }) })).lookups[0]!.scopeKey).toBe(base);
  });

  it("stores a Looper run's accepted answer with its step's usage, never a run that accepted none, and logs why it did not store", async () => {
    const accepted: LooperRecord = { algorithm: "cascade", steps: 2, accepted: "chat-large", calls: [] };
    // A Looper answer reaches the plugin as a buffered answer through the chain, usage after stop.
    const events: NeutralEvent[] = [{ type: "start" }, { type: "text", text: "Thirty days." }, { type: "stop", reason: "end_turn" }, { type: "usage", usage: USAGE }];
    const stored = await run({ looper: accepted, events });
    expect(stored.puts).toHaveLength(1);
    expect(JSON.parse(stored.puts[0]!.response)).toEqual({ text: "Thirty days.", toolCalls: [], stopReason: "end_turn", usage: USAGE });
    const none = await run({ looper: { ...accepted, accepted: undefined, bound: "maxCalls" }, events });
    expect(none.puts).toHaveLength(0);
    expect(none.logged).toEqual([{ kind: "cache_not_stored", plugin: "c", requestId: "req-1", reason: "error" }]);
    const estimated = await run({ looper: accepted, events: [...events.slice(0, 3), { type: "usage", usage: { ...USAGE, source: "estimated" } }] });
    expect(estimated.puts).toHaveLength(0);
    expect(estimated.logged).toEqual([{ kind: "cache_not_stored", plugin: "c", requestId: "req-1", reason: "unknown_usage" }]);
  });

  it("sees a buffered answer's usage through the chain, after its stop, as a stream would carry it", () => {
    const seen: NeutralEvent[] = [];
    const chain = new StreamEventChain([{ name: "spy", class: "stream_event_safe", maxHoldBack: 0, open: () => ({ event: (ev) => (seen.push(ev), [ev]), end: () => [] }) }]);
    const out = chain.filterResponse({ text: "hi", toolCalls: [], stopReason: "end_turn", usage: USAGE });
    expect(seen.slice(-2)).toEqual([{ type: "stop", reason: "end_turn", stopSequence: undefined }, { type: "usage", usage: USAGE }]);
    expect(out.usage).toEqual(USAGE);
  });
});
