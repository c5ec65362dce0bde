/**
 * The response cache end to end with the official SDKs: a hit is answered without a provider
 * attempt, buffered or streamed, in each client protocol; isolation by tenant, by project and by
 * key; a changed system prompt or knowledge version misses; a paraphrase hits above the threshold
 * and a near-miss never does; tool-call answers are never stored; concurrent identical misses store
 * one entry; entries expire; the client can bypass it and the operator can empty it.
 */
import { createHash } from "node:crypto";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { bundledConfig, DEMO_KEY, startStack, type Stack } from "./support/stack.ts";

const SAME_PROJECT_KEY = "sk-e2e-cache-same-project";
const OTHER_PROJECT_KEY = "sk-e2e-cache-other-project";
const OTHER_TENANT_KEY = "sk-e2e-cache-other-tenant";
const RACE_KEY = "sk-e2e-cache-race";
const sha = (k: string) => createHash("sha256").update(k).digest("hex");

let stack: Stack;
const client = (key = DEMO_KEY) => new OpenAI({ apiKey: key, baseURL: `${stack.gateway.publicUrl}/v1`, maxRetries: 0 });

beforeAll(async () => {
  const gateway = bundledConfig("gateway");
  gateway.security.trustedHeaders = [...(gateway.security.trustedHeaders ?? []), "x-kb-version"];
  const p = bundledConfig("publication");
  const demo = p.tenants.find((t: any) => t.id === "demo");
  demo.teams.push({ id: "research", projects: [{ id: "lab" }] });
  demo.apiKeys.push(
    { id: "same-project", sha256: sha(SAME_PROJECT_KEY), entrypoints: ["*"], chargeTo: "platform/playground" },
    { id: "other-project", sha256: sha(OTHER_PROJECT_KEY), entrypoints: ["*"], chargeTo: "research/lab" },
    { id: "race", sha256: sha(RACE_KEY), entrypoints: ["*"], chargeTo: "research" },
  );
  p.tenants.push({ id: "other", apiKeys: [{ id: "other", sha256: sha(OTHER_TENANT_KEY), entrypoints: ["*"] }] });
  p.plugins.push(
    { name: "faq-cache", kind: "cache", mode: "semantic", model: "sluice-embed", ttlMs: 600_000, maxEntries: 50, knowledgeVersion: "kb-1", knowledgeVersionHeader: "x-kb-version" },
    { name: "key-cache", kind: "cache", mode: "exact", scope: "key" },
    { name: "short-cache", kind: "cache", mode: "exact", ttlMs: 1_000 },
  );
  p.entrypoints.push(
    { name: "cached", plugins: ["faq-cache"], default: [["chat-small"]] },
    { name: "cached-by-key", plugins: ["key-cache"], default: [["chat-small"]] },
    { name: "cached-briefly", plugins: ["short-cache"], default: [["chat-small"]] },
  );
  stack = await startStack({ gateway, publication: p });
});

afterAll(async () => {
  await stack?.stop();
});

const sim = () => stack.sims[0]!;
/** Chat requests the provider has received so far. */
const upstreamChats = async () => ((await stack.simStats(sim())) as { paths: Record<string, number> }).paths["/v1/chat/completions"] ?? 0;
const accessLines = () =>
  stack.gateway
    .output()
    .split("\n")
    .filter((l) => l.startsWith('{"kind":"request"'))
    .map((l) => JSON.parse(l));

interface Asked {
  readonly text: string;
  readonly cache: string | null;
  readonly requestId: string | null;
}

/** One buffered Chat request; `headers` adds client headers. */
async function ask(model: string, content: string, o: { key?: string; system?: string; headers?: Record<string, string>; extra?: Record<string, unknown> } = {}): Promise<Asked> {
  const messages: any[] = o.system === undefined ? [] : [{ role: "system", content: o.system }];
  messages.push({ role: "user", content });
  const { data, response } = await client(o.key)
    .chat.completions.create({ model, messages, max_tokens: 60, ...o.extra } as any, { headers: o.headers })
    .withResponse();
  return { text: (data as any).choices[0].message.content ?? "", cache: response.headers.get("x-sluice-cache"), requestId: response.headers.get("x-request-id") };
}

/** Asks until the answer comes from the cache (the store runs after the first answer is sent), without storing anything itself. */
async function untilHit(model: string, content: string, o: { key?: string; system?: string; headers?: Record<string, string> } = {}): Promise<Asked> {
  let last!: Asked;
  await vi.waitFor(
    async () => {
      last = await ask(model, content, { ...o, headers: { ...o.headers, "cache-control": "no-store" } });
      expect(last.cache).toBe("hit");
    },
    { timeout: 10_000, interval: 50 },
  );
  return last;
}

describe("the response cache", () => {
  it("answers a repeated prompt from the cache with no provider attempt, and records the hit", async () => {
    const prompt = "What is the refund policy for annual plans?";
    const first = await ask("cached", prompt);
    expect(first.cache).toBeNull();
    await untilHit("cached", prompt);
    const before = await upstreamChats();
    const hit = await ask("cached", prompt);
    expect(hit).toMatchObject({ cache: "hit", text: first.text });
    expect(await upstreamChats()).toBe(before);
    expect(hit.requestId).toMatch(/\S/);
    const line = await vi.waitFor(() => {
      const found = accessLines().find((l) => l.requestId === hit.requestId);
      expect(found).toBeDefined();
      return found;
    });
    const report = line.plugins.find((r: any) => r.plugin === "faq-cache");
    expect(report).toMatchObject({ action: "cache_hit", detail: "exact", similarity: 1 });
    expect(report.ageMs).toBeGreaterThanOrEqual(0);
    // No provider attempt: the request's only cost is its embedding, a sub-request of its own.
    expect(line.attempts).toEqual([]);
    expect(line.outcome).toBe("success");
  });

  it("puts a hit in the call ledger with no attempt and no cost, and counts it in the metrics", async () => {
    const prompt = "What is the support email address?";
    const task = { "x-sluice-task-id": "task-cache-e2e" };
    await ask("cached", prompt, { headers: task });
    await untilHit("cached", prompt, { headers: task });
    const calls = await vi.waitFor(
      async () => {
        const body = (await (await stack.admin("/admin/tasks/task-cache-e2e?tenant=demo")).json()) as any;
        const hits = (body.calls ?? []).filter((c: any) => c.cache !== undefined);
        expect(hits.length).toBeGreaterThan(0);
        return body.calls as any[];
      },
      { timeout: 10_000, interval: 100 },
    );
    const hit = calls.find((c) => c.cache !== undefined);
    expect(hit).toMatchObject({ kind: "model", outcome: "success", costMicros: 0, attempts: [], cache: { hit: "exact", similarity: 1 } });
    expect(hit.cache.ageMs).toBeGreaterThanOrEqual(0);
    // The miss that stored it was charged for its generation.
    expect(calls.find((c) => c.cache === undefined && c.target === "chat-small").costMicros).toBeGreaterThan(0);
    const metrics = await (await stack.admin("/admin/metrics")).text();
    expect(metrics).toMatch(/sluice_cache_lookups_total\{[^}]*sluice_cache_outcome="hit_exact"[^}]*\} [1-9]/);
    expect(metrics).toMatch(/sluice_cache_lookups_total\{[^}]*sluice_cache_outcome="miss"[^}]*\} [1-9]/);
  });

  it("serves a paraphrase above the threshold and misses one below it or a near-miss", async () => {
    const original = await ask("cached", "Transfer $100 to Alice's savings account");
    await untilHit("cached", "Transfer $100 to Alice's savings account");
    // Fillers and politeness only: the cosine passes the threshold and the lexical gate agrees.
    const paraphrase = await ask("cached", "Please transfer $100 to Alice's savings accounts, thanks!");
    expect(paraphrase).toMatchObject({ cache: "hit", text: original.text });
    const line = await vi.waitFor(() => {
      const found = accessLines().find((l) => l.requestId === paraphrase.requestId);
      expect(found).toBeDefined();
      return found;
    });
    const report = line.plugins.find((r: any) => r.plugin === "faq-cache");
    expect(report).toMatchObject({ action: "cache_hit", detail: "semantic" });
    expect(report.similarity).toBeGreaterThanOrEqual(0.85);
    expect(report.similarity).toBeLessThan(1);
    // Another name, another amount, another direction: never the stored answer.
    for (const nearMiss of ["Transfer $100 to Bob's savings account", "Transfer $1000 to Alice's savings account", "Transfer $100 from Alice's savings account"]) {
      expect((await ask("cached", nearMiss)).cache, nearMiss).toBeNull();
    }
    // Below the threshold: other words for the same request.
    expect((await ask("cached", "Move a hundred dollars into the savings of Alice")).cache).toBeNull();
  });

  it("keeps tenants, projects and (under key scope) keys apart, and shares within a project", async () => {
    const prompt = "Which regions does the enterprise plan cover?";
    await ask("cached", prompt);
    await untilHit("cached", prompt);
    expect((await ask("cached", prompt, { key: SAME_PROJECT_KEY })).cache).toBe("hit");
    expect((await ask("cached", prompt, { key: OTHER_PROJECT_KEY, headers: { "cache-control": "no-store" } })).cache).toBeNull();
    expect((await ask("cached", prompt, { key: OTHER_TENANT_KEY, headers: { "cache-control": "no-store" } })).cache).toBeNull();
    // Key scope: the same project's other key misses.
    await ask("cached-by-key", prompt);
    await untilHit("cached-by-key", prompt);
    expect((await ask("cached-by-key", prompt, { key: SAME_PROJECT_KEY, headers: { "cache-control": "no-store" } })).cache).toBeNull();
  });

  it("misses on a changed system prompt or knowledge version", async () => {
    const prompt = "Summarize the onboarding checklist";
    await ask("cached", prompt, { system: "You are terse." });
    await untilHit("cached", prompt, { system: "You are terse." });
    expect((await ask("cached", prompt, { system: "You are verbose.", headers: { "cache-control": "no-store" } })).cache).toBeNull();
    expect((await ask("cached", prompt, { headers: { "cache-control": "no-store" } })).cache).toBeNull();
    await ask("cached", prompt, { system: "You are terse.", headers: { "x-kb-version": "7" } });
    await untilHit("cached", prompt, { system: "You are terse.", headers: { "x-kb-version": "7" } });
    expect((await ask("cached", prompt, { system: "You are terse.", headers: { "x-kb-version": "8", "cache-control": "no-store" } })).cache).toBeNull();
  });

  it("never serves a tool-call answer from the cache", async () => {
    const tools = [{ type: "function", function: { name: "lookup_order", description: "Find an order", parameters: { type: "object", properties: { id: { type: "string" } }, required: ["id"] } } }];
    const prompt = "Where is order 4711?";
    const extra = { tools, tool_choice: "required" };
    const first = await client().chat.completions.create({ model: "cached", messages: [{ role: "user", content: prompt }], max_tokens: 60, ...extra } as any);
    expect(first.choices[0]!.message.tool_calls).toHaveLength(1);
    // A storable answer asked after it is stored and served: by then the tool call's store would have run.
    await ask("cached", "Is order tracking available on weekends?");
    await untilHit("cached", "Is order tracking available on weekends?");
    const before = await upstreamChats();
    const again = await client().chat.completions.create({ model: "cached", messages: [{ role: "user", content: prompt }], max_tokens: 60, ...extra } as any).withResponse();
    expect(again.response.headers.get("x-sluice-cache")).toBeNull();
    expect(await upstreamChats()).toBe(before + 1);
  });

  it("stores one entry for concurrent identical misses", async () => {
    const prompt = "Explain the quarterly audit timeline [[sim latency-ms=200]]";
    const answers = await Promise.all(Array.from({ length: 5 }, () => ask("cached", prompt, { key: RACE_KEY })));
    expect(answers.every((a) => a.cache === null)).toBe(true);
    await untilHit("cached", prompt, { key: RACE_KEY });
    const purge = await stack.admin("/admin/cache/demo?project=research", { method: "DELETE" });
    expect(purge.status).toBe(200);
    expect(await purge.json()).toEqual({ tenant: "demo", project: "research", deleted: 1 });
  });

  it("expires an entry after its TTL", async () => {
    const prompt = "How long is the trial period?";
    await ask("cached-briefly", prompt);
    const hit = await untilHit("cached-briefly", prompt);
    expect(hit.cache).toBe("hit");
    await vi.waitFor(async () => expect((await ask("cached-briefly", prompt, { headers: { "cache-control": "no-store" } })).cache).toBeNull(), { timeout: 10_000, interval: 100 });
  });

  it("streams a hit that the OpenAI and Anthropic SDKs read like a live stream", async () => {
    const prompt = "Which payment methods are accepted?";
    const first = await ask("cached", prompt);
    await untilHit("cached", prompt);
    const before = await upstreamChats();
    const stream = await client().chat.completions.create({ model: "cached", messages: [{ role: "user", content: prompt }], max_tokens: 60, stream: true, stream_options: { include_usage: true } }).withResponse();
    expect(stream.response.headers.get("x-sluice-cache")).toBe("hit");
    let text = "";
    let finish: string | null | undefined;
    let usage: unknown;
    for await (const chunk of stream.data) {
      text += chunk.choices[0]?.delta?.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
      usage = chunk.usage ?? usage;
    }
    expect(text).toBe(first.text);
    expect(finish).toBe("stop");
    expect(usage).toMatchObject({ completion_tokens: expect.any(Number) });
    const anthropic = new Anthropic({ apiKey: DEMO_KEY, baseURL: stack.gateway.publicUrl, maxRetries: 0 });
    const messages = anthropic.messages.stream({ model: "cached", max_tokens: 60, messages: [{ role: "user", content: prompt }] });
    const final = await messages.finalMessage();
    expect(final.content).toEqual([expect.objectContaining({ type: "text", text: first.text })]);
    expect(final.stop_reason).toBe("end_turn");
    const buffered = await anthropic.messages.create({ model: "cached", max_tokens: 60, messages: [{ role: "user", content: prompt }] }).withResponse();
    expect(buffered.response.headers.get("x-sluice-cache")).toBe("hit");
    expect(buffered.data.content).toEqual([expect.objectContaining({ type: "text", text: first.text })]);
    expect(await upstreamChats()).toBe(before);
  });

  it("stores a streamed miss, whose prompt is let go while it streams, and books it once", async () => {
    // A long prompt, so that the request the gateway releases once the stream is handed on is a
    // real one: the cache key, the settlement's estimate and the call ledger all still need its facts.
    const prompt = `Summarise the shipping terms for parcels over ${"twenty kilograms and a bit, ".repeat(120)}`;
    const task = { "x-sluice-task-id": "task-cache-streamed-miss" };
    const stream = await client()
      .chat.completions.create({ model: "cached", messages: [{ role: "user", content: prompt }], max_tokens: 60, stream: true, stream_options: { include_usage: true } }, { headers: task })
      .withResponse();
    expect(stream.response.headers.get("x-sluice-cache")).toBeNull();
    let text = "";
    let usage: { completion_tokens?: number } | undefined;
    for await (const chunk of stream.data) {
      text += chunk.choices[0]?.delta?.content ?? "";
      usage = chunk.usage ?? usage;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(usage?.completion_tokens).toBeGreaterThan(0);
    const hit = await untilHit("cached", prompt);
    expect(hit.text).toBe(text);
    const requestId = stream.response.headers.get("x-request-id");
    const calls = await vi.waitFor(
      async () => {
        const body = (await (await stack.admin("/admin/tasks/task-cache-streamed-miss?tenant=demo")).json()) as any;
        // The request itself, not the embedding sub-call its semantic key took.
        const own = ((body.calls ?? []) as any[]).filter((c) => c.parentCallId === undefined);
        expect(own).toHaveLength(1);
        return own;
      },
      { timeout: 10_000, interval: 100 },
    );
    expect(calls[0]).toMatchObject({ callId: requestId, kind: "model", outcome: "success", target: "chat-small" });
    expect(calls[0].costMicros).toBeGreaterThan(0);
    expect(calls[0].attempts).toHaveLength(1);
    // One terminal: one access line for the streamed request.
    await vi.waitFor(() => expect(accessLines().filter((l) => l.requestId === requestId)).toHaveLength(1), { timeout: 10_000, interval: 50 });
  });

  it("lets the client bypass it, and the operator empty a tenant's partition", async () => {
    const prompt = "Do you offer a nonprofit discount?";
    await ask("cached", prompt);
    await untilHit("cached", prompt);
    expect((await ask("cached", prompt, { headers: { "x-sluice-cache": "bypass" } })).cache).toBeNull();
    expect((await ask("cached", prompt, { headers: { "cache-control": "no-cache" } })).cache).toBeNull();
    const purge = await stack.admin("/admin/cache/demo", { method: "DELETE" });
    expect(purge.status).toBe(200);
    expect(((await purge.json()) as { deleted: number }).deleted).toBeGreaterThan(0);
    expect((await ask("cached", prompt, { headers: { "cache-control": "no-store" } })).cache).toBeNull();
    const bad = await stack.admin("/admin/cache/demo?project=Not%20An%20Id", { method: "DELETE" });
    expect(bad.status).toBe(400);
  });
});
