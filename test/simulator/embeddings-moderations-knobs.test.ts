/**
 * Knobs, faults and stats on the endpoints that generate no text (embeddings, moderations):
 * the same ones a buffered chat request honours, so a gateway's embedding or moderation
 * backend can be made slow, failing or silent.
 */

import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import OpenAI from "openai";
import type { Simulator } from "../../simulator/server.ts";
import { client, eventually, post, rawPost, reset, start, stats, user } from "./helpers.ts";

let sim: Simulator;
let openai: OpenAI;

beforeAll(async () => {
  sim = await start();
  openai = client(sim);
});
afterAll(() => sim.close());
beforeEach(() => reset(sim));

const MODEL = "text-embedding-3-small";

const embedding = (input: string, headers?: Record<string, string>) =>
  openai.embeddings.create({ model: MODEL, input, encoding_format: "float" }, { headers });

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

describe("status and faults", () => {
  const cases = [
    { status: 429, cls: OpenAI.RateLimitError, retryAfter: "1" },
    { status: 500, cls: OpenAI.InternalServerError, retryAfter: null },
    { status: 503, cls: OpenAI.InternalServerError, retryAfter: "1" },
  ] as const;
  for (const c of cases) {
    it(`answers status=${c.status} on both endpoints, from a directive in the input`, async () => {
      for (const call of [embedding(`x [[sim status=${c.status}]]`), openai.moderations.create({ input: `x [[sim status=${c.status}]]` })]) {
        const error = await caught(call);
        expect(error).toBeInstanceOf(c.cls);
        expect((error as InstanceType<typeof OpenAI.APIError>).headers?.get("retry-after") ?? null).toBe(c.retryAfter);
      }
      expect((await stats(sim)).outcomes.faulted).toBe(2);
    });
  }

  it("takes knobs from headers too, with retry-after", async () => {
    const res = await post(sim, "/v1/embeddings", { model: MODEL, input: "x" }, { "x-sim-status": "429", "x-sim-retry-after": "7" });
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("7");
    expect(((await res.json()) as { error: { type: string; code: string } }).error).toMatchObject({ type: "rate_limit_error", code: "rate_limit_exceeded" });
  });

  it("fails only the first `times` attempts of the same input, so a retry gets through", async () => {
    const input = "retry me [[sim status=503 times=1]]";
    expect(await caught(embedding(input))).toBeInstanceOf(OpenAI.InternalServerError);
    expect((await embedding(input)).data).toHaveLength(1);
    // A chat request with the same text has a count of its own.
    expect((await post(sim, "/v1/chat/completions", { model: "m", messages: user(input) })).status).toBe(503);
  });

  it("applies only-model to the embedding model", async () => {
    expect(await caught(embedding("x [[sim status=500 only-model=text-embedding-3-small]]"))).toBeInstanceOf(OpenAI.InternalServerError);
    const other = await openai.embeddings.create({ model: "other", input: "x [[sim status=500 only-model=text-embedding-3-small]]" });
    expect(other.data).toHaveLength(1);
  });

  it("resets the connection before headers", async () => {
    expect(await caught(embedding("x [[sim fault=reset-before-headers]]"))).toBeInstanceOf(OpenAI.APIConnectionError);
    expect(await caught(openai.moderations.create({ input: "x [[sim fault=reset-before-headers]]" }))).toBeInstanceOf(OpenAI.APIConnectionError);
    expect((await stats(sim)).outcomes.faulted).toBe(2);
  });

  it("cuts the body half-way under cut-mid-stream", async () => {
    const res = await rawPost(`${sim.url}/v1/embeddings`, { model: MODEL, input: "x [[sim fault=cut-mid-stream]]" });
    expect(res.status).toBe(200);
    expect(res.complete).toBe(false);
    expect(res.text.startsWith('{"object":"list"')).toBe(true);
    expect((await stats(sim)).outcomes.cut).toBe(1);
  });

  it("answers error-mid-stream as its status, there being no stream", async () => {
    const res = await post(sim, "/v1/moderations", { input: "x" }, { "x-sim-fault": "error-mid-stream", "x-sim-status": "502" });
    expect(res.status).toBe(502);
  });

  it("rejects a bad knob with a 400", async () => {
    const error = await caught(embedding("x [[sim latency=5]]"));
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.APIError>).code).toBe("invalid_sim_knob");
  });
});

describe("timing and hangs", () => {
  it("holds the answer for latency-ms without changing it", async () => {
    const fast = await embedding("same text");
    const began = Date.now();
    const slow = await embedding("same text", { "x-sim-latency-ms": "150" });
    expect(Date.now() - began).toBeGreaterThanOrEqual(145);
    expect(slow.data[0]?.embedding).toEqual(fast.data[0]?.embedding);
    const moderated = Date.now();
    await openai.moderations.create({ input: "x [[sim latency-ms=150]]" });
    expect(Date.now() - moderated).toBeGreaterThanOrEqual(145);
  });

  it("hangs with headers and no body under heartbeat-only, until duration-ms", async () => {
    const res = await rawPost(`${sim.url}/v1/embeddings`, { model: MODEL, input: "x [[sim fault=heartbeat-only duration-ms=30]]" });
    expect(res).toEqual({ status: 200, text: "", complete: false });
    expect((await stats(sim)).outcomes.faulted).toBe(1);
  });

  it("hangs without headers under a long latency, and lets go when the client leaves", async () => {
    const controller = new AbortController();
    let settled = false;
    const pending = openai.embeddings
      .create({ model: MODEL, input: "x" }, { headers: { "x-sim-latency-ms": "60000" }, signal: controller.signal })
      .finally(() => (settled = true));
    await eventually(async () => (await stats(sim)).inFlight === 1);
    expect(settled).toBe(false);
    controller.abort();
    expect(await caught(pending)).toBeInstanceOf(OpenAI.APIUserAbortError);
    await eventually(async () => {
      const s = await stats(sim);
      return s.outcomes.aborted === 1 && s.inFlight === 0;
    });
  });
});

describe("only-path", () => {
  const configure = (settings: Record<string, string | number>) =>
    fetch(`${sim.url}/__sim/config`, { method: "PUT", body: JSON.stringify(settings) });

  it("takes one endpoint down while the others answer", async () => {
    expect((await configure({ status: 503, "only-path": "/v1/embeddings" })).status).toBe(200);
    try {
      expect(await caught(embedding("x"))).toBeInstanceOf(OpenAI.InternalServerError);
      expect((await post(sim, "/v1/chat/completions", { model: "m", messages: user("x") })).status).toBe(200);
      expect((await openai.moderations.create({ input: "x" })).results).toHaveLength(1);
    } finally {
      await configure({});
    }
  });

  it("slows one endpoint while the others answer at once", async () => {
    await configure({ "latency-ms": 60000, "only-path": "/v1/embeddings" });
    const controller = new AbortController();
    try {
      const slow = openai.embeddings.create({ model: MODEL, input: "x" }, { signal: controller.signal });
      await eventually(async () => (await stats(sim)).inFlight === 1);
      expect((await post(sim, "/v1/chat/completions", { model: "m", messages: user("x") })).status).toBe(200);
      expect((await stats(sim)).outcomes.completed).toBe(1);
      controller.abort();
      await caught(slow);
    } finally {
      await configure({});
    }
  });

  it("works as a directive, and must name a path", async () => {
    const text = "x [[sim status=500 only-path=/v1/moderations]]";
    expect((await embedding(text)).data).toHaveLength(1);
    expect(await caught(openai.moderations.create({ input: text }))).toBeInstanceOf(OpenAI.InternalServerError);
    expect((await configure({ "only-path": "v1/embeddings" })).status).toBe(400);
  });
});

describe("stats", () => {
  it("counts each endpoint under its path, so a test can assert no embedding call was made", async () => {
    await post(sim, "/v1/chat/completions", { model: "m", messages: user("hi") });
    expect((await stats(sim)).paths["/v1/embeddings"]).toBeUndefined();
    await embedding("a");
    await embedding("b [[sim status=500]]").catch(() => {});
    await openai.moderations.create({ input: "c" });
    await post(sim, "/v1/embeddings", { model: MODEL, input: "" });
    const s = await stats(sim);
    expect(s.paths).toEqual({ "/v1/chat/completions": 1, "/v1/embeddings": 3, "/v1/moderations": 1 });
    expect(s.models).toEqual({ m: 1, [MODEL]: 3 });
    expect(s.outcomes).toMatchObject({ completed: 3, faulted: 1, rejected: 1 });
    expect(s.inFlight).toBe(0);
  });
});
