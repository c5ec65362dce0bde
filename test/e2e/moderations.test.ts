/**
 * `POST /v1/moderations` through the gateway with the official `openai` client: the same
 * authentication, budgets (input tokens, priced and reserved strictly), attempts and records as
 * chat and embeddings, against the simulator's deterministic moderations.
 */
import { createHash } from "node:crypto";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SIMULATOR_API_KEY } from "../../local-stack/stack.ts";
import { bundledConfig, DEMO_KEY, expectNothingLeft, startStack, type Stack } from "./support/stack.ts";

const sha = (k: string) => createHash("sha256").update(k).digest("hex");
const CAPPED_KEY = "sk-e2e-moderation-capped";
const CHAT_ONLY_KEY = "sk-sluice-limited";
/** The capped project's tokens fit exactly K moderations of INPUT (one token per UTF-8 byte at worst). */
const K = 4;
const INPUT = "capped moderation input [[sim latency-ms=800]]";

let stack: Stack;

beforeAll(async () => {
  const publication = bundledConfig("publication");
  publication.tenants.push({
    id: "modco",
    teams: [{ id: "t", projects: [{ id: "capped", limits: { tokens: { limit: K * Buffer.byteLength(INPUT), window: "1h" } } }] }],
    apiKeys: [{ id: "capped", sha256: sha(CAPPED_KEY), entrypoints: ["sluice-moderation"], chargeTo: "t/capped" }],
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

const client = () => new OpenAI({ apiKey: DEMO_KEY, baseURL: `${stack.gateway.publicUrl}/v1`, maxRetries: 0 });

/** The simulator's own results for the same input, asked directly. */
async function direct(input: string | string[]): Promise<unknown[]> {
  const res = await fetch(`${stack.sims[0]!.url}/v1/moderations`, {
    method: "POST",
    headers: { authorization: `Bearer ${SIMULATOR_API_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "sim-moderate", input }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { results: unknown[] }).results;
}

const moderationCalls = async () => (((await (await fetch(`${stack.sims[0]!.url}/__sim/stats`)).json()) as any).paths["/v1/moderations"] ?? 0) as number;

const post = (path: string, key: string, body: unknown) =>
  fetch(`${stack.gateway.publicUrl}${path}`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify(body) });

describe("POST /v1/moderations", () => {
  it("answers the official client for one input: flagged by a trigger word, with the simulator's verdict", async () => {
    const input = "I am going to kill the build server";
    const r = await client().moderations.create({ model: "sluice-moderation", input });
    expect(r.model).toBe("sluice-moderation");
    expect(r.id).toMatch(/^modr-[0-9a-f]+$/);
    expect(r.results).toHaveLength(1);
    const [v] = r.results;
    expect(v!.flagged).toBe(true);
    expect(v!.categories.violence).toBe(true);
    // One trigger word scores 1 − 0.3 (the simulator's recipe).
    expect(v!.category_scores.violence).toBeCloseTo(0.7, 10);
    expect(v!.categories.hate).toBe(false);
    expect(r.results).toEqual(await direct(input));
  });

  it("moderates a batch in input order: unflagged, flagged by a word, flagged by an exact score", async () => {
    const inputs = ["What a lovely day for a walk", "you pathetic idiot", "a quiet sentence [[mod:self-harm=0.5]]"];
    const r = await client().moderations.create({ model: "sluice-moderation", input: inputs });
    expect(r.results.map((v) => v.flagged)).toEqual([false, true, true]);
    expect(Object.values(r.results[0]!.categories).some(Boolean)).toBe(false);
    expect(r.results[1]!.categories.harassment).toBe(true);
    expect(r.results[1]!.category_scores.harassment).toBeCloseTo(0.91, 10);
    expect(r.results[2]!.categories["self-harm"]).toBe(true);
    expect(r.results[2]!.category_scores["self-harm"]).toBe(0.5);
    expect(r.results).toEqual(await direct(inputs));
  });

  it("reserves the input bound and, with no usage reported, holds it for reconciliation with the estimate beside it", async () => {
    const input = "settle me, I have no usage";
    const res = await post("/v1/moderations", DEMO_KEY, { model: "sluice-moderation", input });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
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
      .toBe("pending_reconciliation");
    const bound = Buffer.byteLength(input);
    expect(record.amount.tokens).toBe(bound);
    expect(record.settlement.actual).toBe("unknown");
    // 0.01 USD per million input tokens; the estimate is a quarter of the bound.
    const estimate = Math.ceil(bound / 4);
    expect(record.settlement.estimate).toEqual({ tokens: estimate, micros: Math.ceil(estimate * 0.01) });
    expect(record.meta).toMatchObject({ model: "moderate-small@1", priceVersion: "2026-11" });
  });

  it(`admits exactly ${K} of 40 concurrent moderations whose worst cases fit ${K} times; the refused never reach the backend`, async () => {
    const before = await moderationCalls();
    const answers = await Promise.all(Array.from({ length: 40 }, () => post("/v1/moderations", CAPPED_KEY, { model: "sluice-moderation", input: INPUT })));
    const ok = answers.filter((r) => r.status === 200);
    expect(ok).toHaveLength(K);
    for (const r of answers.filter((a) => a.status !== 200)) {
      expect(r.status).toBe(429);
      expect(r.headers.get("x-sluice-error-code")).toBe("token_limit_exceeded");
      await r.arrayBuffer();
    }
    for (const r of ok) expect(((await r.json()) as { results: unknown[] }).results).toHaveLength(1);
    expect((await moderationCalls()) - before).toBe(K);
  });

  it("refuses clearly: a chat model here, a moderation model for chat or embeddings, a key without the grant, bad input", async () => {
    const before = await moderationCalls();
    const chatHere = await post("/v1/moderations", DEMO_KEY, { model: "sluice-chat", input: "x" });
    expect(chatHere.status).toBe(400);
    expect(((await chatHere.json()) as any).error).toMatchObject({ type: "invalid_request_error", code: "invalid_request", param: "model", message: "The model 'sluice-chat' does not serve moderations." });
    const forChat = await client()
      .chat.completions.create({ model: "sluice-moderation", messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(forChat).toBeInstanceOf(OpenAI.BadRequestError);
    expect((forChat as InstanceType<typeof OpenAI.BadRequestError>).message).toContain("call POST /v1/moderations");
    const forEmbeddings = await post("/v1/embeddings", DEMO_KEY, { model: "sluice-moderation", input: "x" });
    expect(forEmbeddings.status).toBe(400);
    expect(((await forEmbeddings.json()) as any).error.message).toBe("The model 'sluice-moderation' serves moderations only: call POST /v1/moderations.");
    const notGranted = await post("/v1/moderations", CHAT_ONLY_KEY, { model: "sluice-moderation", input: "x" });
    expect(notGranted.status).toBe(403);
    expect(notGranted.headers.get("x-sluice-error-code")).toBe("model_not_allowed");
    await notGranted.arrayBuffer();
    const noInput = await post("/v1/moderations", DEMO_KEY, { model: "sluice-moderation" });
    expect(noInput.status).toBe(400);
    expect(((await noInput.json()) as any).error).toMatchObject({ type: "invalid_request_error", param: "input", message: "Missing required parameter: 'input'." });
    const image = await post("/v1/moderations", DEMO_KEY, { model: "sluice-moderation", input: [{ type: "image_url", image_url: { url: "https://example.com/cat.png" } }] });
    expect(image.status).toBe(400);
    expect(((await image.json()) as any).error).toMatchObject({ type: "invalid_request_error", param: "input" });
    const wrongMethod = await fetch(`${stack.gateway.publicUrl}/v1/moderations`, { headers: { authorization: `Bearer ${DEMO_KEY}` } });
    expect(wrongMethod.status).toBe(405);
    await wrongMethod.arrayBuffer();
    // None of them reached the backend.
    expect((await moderationCalls()) - before).toBe(0);
  });
});
