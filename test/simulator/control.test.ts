/**
 * Test-support endpoints (`/__sim/*`, `/health`), API-key enforcement and timer hygiene.
 */

import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import OpenAI from "openai";
import type { Simulator } from "../../simulator/server.ts";
import { client, nodeBinary, postChat, requests, reset, start, stats, user } from "./helpers.ts";

const execFileAsync = promisify(execFile);

describe("stats and request history", () => {
  let sim: Simulator;
  beforeAll(async () => {
    sim = await start({ history: 3, models: ["alpha", "beta"] });
  });
  afterAll(() => sim.close());
  beforeEach(() => reset(sim));

  it("counts requests per path, model and outcome, faulted ones included", async () => {
    const openai = client(sim);
    await openai.chat.completions.create({ model: "alpha", messages: user("a") });
    await openai.chat.completions.create({ model: "alpha", messages: user("b [[sim status=500]]") }).catch(() => {});
    await openai.chat.completions.create({ model: "beta", messages: user("c [[sim fault=reset-before-headers]]") }).catch(() => {});
    await openai.models.list();
    await postChat(sim, { messages: user("no model") });

    expect(await stats(sim)).toEqual({
      total: 5,
      inFlight: 0,
      paths: { "/v1/chat/completions": 4, "/v1/models": 1 },
      models: { alpha: 2, beta: 1 },
      outcomes: { completed: 2, rejected: 1, faulted: 2, cut: 0, aborted: 0 },
    });
    // Control endpoints are not counted.
    await fetch(`${sim.url}/health`);
    expect((await stats(sim)).total).toBe(5);
  });

  it("keeps the last N requests, oldest first, with lowercased headers and parsed bodies", async () => {
    for (const text of ["one", "two", "three", "four"]) {
      await postChat(sim, { model: "gpt-upstream", messages: user(text) }, { "Accept-Encoding": "identity", "X-Custom": "v" });
    }
    const all = await requests(sim);
    expect(all.map((r) => r.seq)).toEqual([2, 3, 4]); // history is bounded at 3
    const last = all.at(-1);
    expect(last).toMatchObject({ method: "POST", path: "/v1/chat/completions", query: "" });
    expect(last?.headers["accept-encoding"]).toBe("identity");
    expect(last?.headers["x-custom"]).toBe("v");
    expect(last?.headers.authorization).toBeUndefined();
    expect(last?.body).toEqual({ model: "gpt-upstream", messages: user("four") });

    const two = await requests(sim, 2);
    expect(two.map((r) => (r.body as { messages: [{ content: string }] }).messages[0].content)).toEqual(["three", "four"]);
    expect(await requests(sim, 0)).toEqual([]);
  });

  it("records a malformed body as text", async () => {
    await postChat(sim, "{oops");
    const [entry] = await requests(sim, 1);
    expect(entry?.body).toBe("{oops");
  });

  it("reset clears counters, history and times counters", async () => {
    const messages = user("r [[sim status=503 times=1]]");
    expect((await postChat(sim, { model: "alpha", messages })).status).toBe(503);
    await reset(sim);
    expect(await stats(sim)).toMatchObject({ total: 0, paths: {}, models: {} });
    expect(await requests(sim)).toEqual([]);
    expect((await postChat(sim, { model: "alpha", messages })).status).toBe(503);
  });

  it("serves /health and 404s unknown control endpoints", async () => {
    const health = await fetch(`${sim.url}/health`);
    expect(await health.json()).toEqual({ status: "ok" });
    expect((await fetch(`${sim.url}/__sim/nope`)).status).toBe(404);
  });

  it("lists the configured models", async () => {
    const list = await client(sim).models.list();
    expect(list.data.map((m) => m.id)).toEqual(["alpha", "beta"]);
  });
});

describe("instance config", () => {
  let sim: Simulator;
  beforeAll(async () => {
    sim = await start({ knobs: { tokens: 3, "latency-ms": 0 } });
  });
  afterAll(() => sim.close());

  it("starts from the startup knobs, PUT replaces the overlay, PUT {} restores", async () => {
    const get = async () => (await fetch(`${sim.url}/__sim/config`)).json();
    expect(await get()).toMatchObject({ tokens: 3, "latency-ms": 0, "cut-after": 3 });

    const put = await fetch(`${sim.url}/__sim/config`, { method: "PUT", body: JSON.stringify({ reasoningTokens: 2, "cached-tokens": 1 }) });
    expect(put.status).toBe(200);
    expect(await get()).toMatchObject({ tokens: 3, "reasoning-tokens": 2, "cached-tokens": 1 });
    const res = await client(sim).chat.completions.create({ model: "m", messages: user("x") });
    expect(res.usage?.completion_tokens).toBe(3 + 2);
    expect(res.usage?.prompt_tokens_details?.cached_tokens).toBe(1);

    await fetch(`${sim.url}/__sim/config`, { method: "PUT", body: "{}" });
    expect(await get()).toMatchObject({ tokens: 3, "reasoning-tokens": 0 });
  });

  it("rejects invalid config without changing it", async () => {
    const bad = await fetch(`${sim.url}/__sim/config`, { method: "PUT", body: JSON.stringify({ fault: "explode" }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/fault/);
    expect((await fetch(`${sim.url}/__sim/config`, { method: "PUT", body: "[1]" })).status).toBe(400);
    expect(await (await fetch(`${sim.url}/__sim/config`)).json()).toMatchObject({ tokens: 3 });
  });

  it("rejects invalid startup knobs", async () => {
    await expect(start({ knobs: { tokens: "many" } })).rejects.toThrow(/tokens/);
  });
});

describe("api key", () => {
  let sim: Simulator;
  beforeAll(async () => {
    sim = await start({ apiKey: "sim-secret" });
  });
  afterAll(() => sim.close());

  it("accepts Authorization: Bearer and x-api-key", async () => {
    const res = await client(sim, "sim-secret").chat.completions.create({ model: "m", messages: user("x") });
    expect(res.choices[0]?.finish_reason).toBe("stop");
    const viaHeader = await postChat(sim, { model: "m", messages: user("x") }, { "x-api-key": "sim-secret" });
    expect(viaHeader.status).toBe(200);
  });

  it("answers 401 in the OpenAI envelope for a wrong or missing key", async () => {
    const wrong = await client(sim, "nope-wrong-key").chat.completions.create({ model: "m", messages: user("x") }).catch((e: unknown) => e);
    expect(wrong).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(wrong).toMatchObject({ status: 401, code: "invalid_api_key", type: "invalid_request_error" });
    expect((wrong as Error).message).not.toContain("nope-wrong-key");

    const missing = await postChat(sim, { model: "m", messages: user("x") });
    expect(missing.status).toBe(401);
    const body = (await missing.json()) as { error: Record<string, unknown> };
    expect(Object.keys(body.error).sort()).toEqual(["code", "message", "param", "type"]);
    expect((await fetch(`${sim.url}/v1/models`)).status).toBe(401);
  });

  it("leaves control endpoints open", async () => {
    expect((await fetch(`${sim.url}/__sim/stats`)).status).toBe(200);
    expect((await fetch(`${sim.url}/health`)).status).toBe(200);
  });
});

describe("timers", { timeout: 30_000 }, () => {
  it("leaves no timer behind when clients drop paced, ttft-delayed and heartbeat streams", async () => {
    // In a process of its own: vitest's own timers would blur the count here.
    const probe = fileURLToPath(new URL("./fixtures/abort-probe.ts", import.meta.url));
    const { stdout } = await execFileAsync(nodeBinary(), [probe], { timeout: 20_000 });
    expect(JSON.parse(stdout)).toEqual({
      inFlight: 0,
      outcomes: { completed: 0, rejected: 0, faulted: 1, cut: 0, aborted: 2 },
      timeouts: 0,
    });
  });
});
