/**
 * `POST /v1/embeddings` through the gateway with the official `openai` client: the same
 * authentication, budgets (input tokens, priced and reserved strictly), attempts and records as
 * chat, against the simulator's deterministic embeddings.
 */
import { createHash } from "node:crypto";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SIMULATOR_API_KEY } from "../../local-stack/stack.ts";
import { bundledConfig, DEMO_KEY, expectNothingLeft, startStack, type Stack } from "./support/stack.ts";

const sha = (k: string) => createHash("sha256").update(k).digest("hex");
const CAPPED_KEY = "sk-e2e-embed-capped";
const CHAT_ONLY_KEY = "sk-sluice-limited";
/** The capped project's tokens fit exactly K embedding requests of INPUT (one token per UTF-8 byte at worst). */
const K = 5;
const INPUT = "capped embedding input [[sim latency-ms=800]]";

let stack: Stack;

beforeAll(async () => {
  const publication = bundledConfig("publication");
  publication.tenants.push({
    id: "embedco",
    teams: [{ id: "t", projects: [{ id: "capped", limits: { tokens: { limit: K * Buffer.byteLength(INPUT), window: "1h" } } }] }],
    apiKeys: [{ id: "capped", sha256: sha(CAPPED_KEY), entrypoints: ["sluice-embed"], chargeTo: "t/capped" }],
  });
  stack = await startStack({ publication });
});

afterAll(async () => {
  try {
    if (stack) await expectNothingLeft(stack.gateway.adminUrl);
  } finally {
    await stack?.stop();
  }
});

/** The simulator's own answer for the same input, asked directly (floats). */
async function direct(input: string | string[], dimensions?: number): Promise<number[][]> {
  const res = await fetch(`${stack.sims[0]!.url}/v1/embeddings`, {
    method: "POST",
    headers: { authorization: `Bearer ${SIMULATOR_API_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "sim-embed", input, encoding_format: "float", ...(dimensions ? { dimensions } : {}) }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { data: { embedding: number[] }[] }).data.map((d) => d.embedding);
}

const close = (a: readonly number[], b: readonly number[]) => {
  expect(a.length).toBe(b.length);
  for (let i = 0; i < a.length; i++) expect(Math.abs(a[i]! - b[i]!)).toBeLessThan(1e-6);
};

describe("POST /v1/embeddings", () => {
  it("answers the official client for one input (base64 by default), with the simulator's vector and usage", async () => {
    const client = new OpenAI({ apiKey: DEMO_KEY, baseURL: `${stack.gateway.publicUrl}/v1`, maxRetries: 0 });
    const r = await client.embeddings.create({ model: "sluice-embed", input: "The quick brown fox" });
    expect(r.model).toBe("sluice-embed");
    expect(r.data).toHaveLength(1);
    close(r.data[0]!.embedding, (await direct("The quick brown fox"))[0]!);
    expect(r.usage.prompt_tokens).toBeGreaterThan(0);
    expect(r.usage.total_tokens).toBe(r.usage.prompt_tokens);
  });

  it("embeds a batch in input order, as floats when asked, and shortened to the dimensions asked for", async () => {
    const client = new OpenAI({ apiKey: DEMO_KEY, baseURL: `${stack.gateway.publicUrl}/v1`, maxRetries: 0 });
    const inputs = ["billing question about an invoice", "a kubernetes pod keeps restarting", "what is the capital of France"];
    const floats = await client.embeddings.create({ model: "sluice-embed", input: inputs, encoding_format: "float" });
    const expected = await direct(inputs);
    expect(floats.data.map((d) => d.index)).toEqual([0, 1, 2]);
    floats.data.forEach((d, i) => close(d.embedding, expected[i]!));
    const short = await client.embeddings.create({ model: "sluice-embed", input: inputs[0]!, dimensions: 64, encoding_format: "float" });
    expect(short.data[0]!.embedding).toHaveLength(64);
    close(short.data[0]!.embedding, (await direct(inputs[0]!, 64))[0]!);
  });

  it("settles the attempt at the usage reported, priced by input tokens, and says so on the answer", async () => {
    const res = await fetch(`${stack.gateway.publicUrl}/v1/embeddings`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "sluice-embed", input: "settle me", encoding_format: "float" }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { usage: { prompt_tokens: number } };
    const attempt = (res.headers.get("x-sluice-attempts") ?? "").split(", ")[0]!;
    expect(attempt).toMatch(/^att_/);
    let record: any;
    await expect
      .poll(
        async () => {
          const r = await stack.admin(`/admin/budgets/demo/attempts/${attempt}`);
          record = ((await r.json()) as { attempt?: unknown }).attempt;
          return record?.state;
        },
        { timeout: 5000 },
      )
      .toBe("settled");
    // 0.02 USD per million input tokens: micro-USD = tokens × 0.02, rounded up.
    expect(record.settlement.actual).toEqual({ micros: Math.ceil(body.usage.prompt_tokens * 0.02), tokens: body.usage.prompt_tokens });
    expect(record.meta).toMatchObject({ model: "embed-small@1", priceVersion: "2026-11" });
  });

  it(`admits exactly ${K} of 40 concurrent embeddings whose worst cases fit ${K} times; the refused never reach the backend`, async () => {
    const embeddingCalls = async () => (((await (await fetch(`${stack.sims[0]!.url}/__sim/stats`)).json()) as any).paths["/v1/embeddings"] ?? 0) as number;
    const before = await embeddingCalls();
    const answers = await Promise.all(
      Array.from({ length: 40 }, () =>
        fetch(`${stack.gateway.publicUrl}/v1/embeddings`, {
          method: "POST",
          headers: { authorization: `Bearer ${CAPPED_KEY}`, "content-type": "application/json" },
          body: JSON.stringify({ model: "sluice-embed", input: INPUT }),
        }),
      ),
    );
    const ok = answers.filter((r) => r.status === 200);
    expect(ok).toHaveLength(K);
    for (const r of answers.filter((a) => a.status !== 200)) {
      expect(r.status).toBe(429);
      expect(r.headers.get("x-sluice-error-code")).toBe("token_limit_exceeded");
      await r.arrayBuffer();
    }
    for (const r of ok) await r.arrayBuffer();
    expect((await embeddingCalls()) - before).toBe(K);
  });

  it("refuses clearly: a chat model here, an embeddings model for chat, a key without the grant, bad input", async () => {
    const post = (path: string, key: string, body: unknown) =>
      fetch(`${stack.gateway.publicUrl}${path}`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify(body) });
    const chatHere = await post("/v1/embeddings", DEMO_KEY, { model: "sluice-chat", input: "x" });
    expect(chatHere.status).toBe(400);
    expect(((await chatHere.json()) as any).error).toMatchObject({ type: "invalid_request_error", code: "invalid_request", param: "model" });
    const embedForChat = await post("/v1/chat/completions", DEMO_KEY, { model: "sluice-embed", messages: [{ role: "user", content: "hi" }] });
    expect(embedForChat.status).toBe(400);
    expect(((await embedForChat.json()) as any).error.message).toContain("POST /v1/embeddings");
    const notGranted = await post("/v1/embeddings", CHAT_ONLY_KEY, { model: "sluice-embed", input: "x" });
    expect(notGranted.status).toBe(403);
    expect(notGranted.headers.get("x-sluice-error-code")).toBe("model_not_allowed");
    await notGranted.arrayBuffer();
    const empty = await post("/v1/embeddings", DEMO_KEY, { model: "sluice-embed", input: "" });
    expect(empty.status).toBe(400);
    expect(((await empty.json()) as any).error.param).toBe("input");
    const tooMany = await post("/v1/embeddings", DEMO_KEY, { model: "sluice-embed", input: Array.from({ length: 2049 }, () => "x") });
    expect(tooMany.status).toBe(400);
    await tooMany.arrayBuffer();
  });
});
