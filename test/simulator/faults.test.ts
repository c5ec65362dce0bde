/**
 * Fault, timing and knob-source behaviour. Timing is checked by order of events, never
 * by wall-clock bounds.
 */

import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import OpenAI from "openai";
import type { Simulator } from "../../simulator/server.ts";
import { client, eventually, postChat, rawPost, reset, sseData, start, stats, user } from "./helpers.ts";

let sim: Simulator;
let openai: OpenAI;

beforeAll(async () => {
  sim = await start();
  openai = client(sim);
});
afterAll(() => sim.close());
beforeEach(() => reset(sim));

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

describe("status knob", () => {
  const cases = [
    { status: 400, cls: OpenAI.BadRequestError, type: "invalid_request_error", retryAfter: null },
    { status: 401, cls: OpenAI.AuthenticationError, type: "invalid_request_error", retryAfter: null },
    { status: 403, cls: OpenAI.PermissionDeniedError, type: "permission_error", retryAfter: null },
    { status: 404, cls: OpenAI.NotFoundError, type: "invalid_request_error", retryAfter: null },
    { status: 429, cls: OpenAI.RateLimitError, type: "rate_limit_error", retryAfter: "1" },
    { status: 500, cls: OpenAI.InternalServerError, type: "server_error", retryAfter: null },
    { status: 502, cls: OpenAI.InternalServerError, type: "server_error", retryAfter: null },
    { status: 503, cls: OpenAI.InternalServerError, type: "server_error", retryAfter: "1" },
    { status: 529, cls: OpenAI.InternalServerError, type: "server_error", retryAfter: null },
  ] as const;

  for (const c of cases) {
    it(`surfaces ${c.status} as ${c.cls.name} (buffered and stream)`, async () => {
      for (const stream of [false, true]) {
        const error = await caught(
          openai.chat.completions.create({ model: "m", messages: user(`hi [[sim status=${c.status}]]`), stream }),
        );
        expect(error).toBeInstanceOf(c.cls);
        const apiError = error as InstanceType<typeof OpenAI.APIError>;
        expect(apiError.status).toBe(c.status);
        expect(apiError.type).toBe(c.type);
        expect(apiError.headers?.get("retry-after") ?? null).toBe(c.retryAfter);
      }
      expect((await stats(sim)).outcomes.faulted).toBe(2);
    });
  }

  it("uses the retry-after knob", async () => {
    const res = await postChat(sim, { model: "m", messages: user("x") }, { "x-sim-status": "429", "x-sim-retry-after": "7" });
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("7");
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("rate_limit_exceeded");
  });

  it("applies only to the first `times` requests per key, then serves normally", async () => {
    const messages = user("retry me [[sim status=503 times=2]]");
    const first = await postChat(sim, { model: "a", messages });
    const second = await postChat(sim, { model: "b", messages });
    const third = await openai.chat.completions.create({ model: "a", messages });
    expect([first.status, second.status]).toEqual([503, 503]);
    expect(third.choices[0]?.finish_reason).toBe("stop");
    // A different conversation has its own count.
    expect((await postChat(sim, { model: "a", messages: user("other [[sim status=503 times=1]]") })).status).toBe(503);
    // An explicit key shares a count across conversations.
    expect((await postChat(sim, { model: "a", messages: user("k1 [[sim status=500 times=1 key=k]]") })).status).toBe(500);
    expect((await postChat(sim, { model: "a", messages: user("k2 [[sim status=500 times=1 key=k]]") })).status).toBe(200);
    const s = await stats(sim);
    expect(s.outcomes).toMatchObject({ faulted: 4, completed: 2 });
    expect(s.paths["/v1/chat/completions"]).toBe(6);
  });

  it("applies only to the model named by only-model", async () => {
    const messages = user("x [[sim status=500 only-model=bad]]");
    expect((await postChat(sim, { model: "bad", messages })).status).toBe(500);
    expect((await postChat(sim, { model: "good", messages })).status).toBe(200);
  });
});

describe("connection faults", () => {
  it("reset-before-headers is a connection error after the body was read", async () => {
    const error = await caught(
      openai.chat.completions.create({ model: "m", messages: user("x [[sim fault=reset-before-headers]]") }),
    );
    expect(error).toBeInstanceOf(OpenAI.APIConnectionError);
    const s = await stats(sim);
    expect(s.total).toBe(1);
    expect(s.outcomes.faulted).toBe(1);
  });

  it("cut-mid-stream sends cut-after tokens then drops the stream: no finish_reason, no usage", async () => {
    const seen: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    let failure: unknown;
    try {
      const stream = await openai.chat.completions.create({
        model: "m",
        messages: user("x [[sim fault=cut-mid-stream cut-after=2]]"),
        stream: true,
        stream_options: { include_usage: true },
      });
      for await (const chunk of stream) seen.push(chunk);
    } catch (error) {
      failure = error;
    }
    expect(failure).toBeDefined();
    expect(seen.filter((c) => c.choices[0]?.delta.content)).toHaveLength(2);
    expect(seen.some((c) => c.choices[0]?.finish_reason)).toBe(false);
    expect(seen.some((c) => c.usage)).toBe(false);
    expect((await stats(sim)).outcomes.cut).toBe(1);
  });

  it("cut-mid-stream with pacing cuts at the same place", async () => {
    const res = await rawPost(`${sim.url}/v1/chat/completions`, {
      model: "m",
      stream: true,
      messages: user("x [[sim fault=cut-mid-stream cut-after=3 token-interval-ms=1 ttft-ms=1]]"),
    });
    expect(res.status).toBe(200);
    expect(res.complete).toBe(false);
    const data = sseData(res.text);
    expect(data).toHaveLength(1 + 3);
    expect(data[0]).toContain('"role":"assistant"');
    expect(data.slice(1).every((d) => d.includes('"delta":{"content":'))).toBe(true);
    expect((await stats(sim)).outcomes.cut).toBe(1);
  });

  it("cut-bytes puts the cut inside the next frame, paced or not", async () => {
    for (const pacing of ["", " token-interval-ms=1 ttft-ms=1"]) {
      await reset(sim);
      const res = await rawPost(`${sim.url}/v1/chat/completions`, { model: "m", stream: true, messages: user(`x [[sim fault=cut-mid-stream cut-after=2 cut-bytes=9${pacing}]]`) });
      expect(res.complete).toBe(false);
      // The role frame, two whole content frames, then the first 9 bytes of the third.
      const frames = res.text.split("\n\n");
      expect(frames.slice(0, -1)).toHaveLength(3);
      expect(frames.at(-1)).toBe('data: {"i');
      expect((await stats(sim)).outcomes.cut).toBe(1);
    }
  });

  it("cut-mid-stream on a buffered request drops the body half-way", async () => {
    const error = await caught(openai.chat.completions.create({ model: "m", messages: user("x [[sim fault=cut-mid-stream]]") }));
    expect(error).toBeInstanceOf(Error);
    expect((await stats(sim)).outcomes.cut).toBe(1);
  });

  it("error-mid-stream sends an error data line after cut-after tokens and ends without [DONE]", async () => {
    const seen: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    const error = await caught(
      (async () => {
        const stream = await openai.chat.completions.create({ model: "m", messages: user("x [[sim fault=error-mid-stream cut-after=2]]"), stream: true });
        for await (const chunk of stream) seen.push(chunk);
      })(),
    );
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as InstanceType<typeof OpenAI.APIError>).type).toBe("server_error");
    expect(seen.filter((c) => c.choices[0]?.delta.content)).toHaveLength(2);

    const raw = await rawPost(`${sim.url}/v1/chat/completions`, { model: "m", stream: true, messages: user("x [[sim fault=error-mid-stream status=429]]") });
    expect(raw.complete).toBe(true);
    const data = sseData(raw.text);
    expect(data).not.toContain("[DONE]");
    expect(JSON.parse(data.at(-1) ?? "{}")).toMatchObject({ error: { type: "rate_limit_error", code: "rate_limit_exceeded" } });

    // A buffered request has no "mid-stream": it gets the status as an HTTP error.
    const buffered = await caught(openai.chat.completions.create({ model: "m", messages: user("x [[sim fault=error-mid-stream status=503]]") }));
    expect(buffered).toBeInstanceOf(OpenAI.InternalServerError);
    expect((buffered as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    expect((await stats(sim)).outcomes).toMatchObject({ faulted: 3, completed: 0 });
  });

  it("omit-usage leaves usage out of buffered and streamed responses", async () => {
    const buffered = await openai.chat.completions.create({ model: "m", messages: user("x [[sim fault=omit-usage]]") });
    expect(buffered.usage).toBeUndefined();
    expect(buffered.choices[0]?.finish_reason).toBe("stop");
    const stream = await openai.chat.completions.create({
      model: "m",
      messages: user("x [[sim fault=omit-usage]]"),
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.some((c) => c.usage)).toBe(false);
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe("stop");
  });

  it("heartbeat-only sends comments and no data, then drops the stream without [DONE]", async () => {
    const res = await rawPost(`${sim.url}/v1/chat/completions`, {
      model: "m",
      stream: true,
      messages: user("x [[sim fault=heartbeat-only heartbeat-ms=5 duration-ms=40]]"),
    });
    expect(res.status).toBe(200);
    expect(res.complete).toBe(false);
    expect(res.text).toMatch(/^(: keep-alive\n\n)+$/);
    expect((await stats(sim)).outcomes).toMatchObject({ faulted: 1, completed: 0 });
  });

  it("heartbeat-only on a buffered request sends headers, then nothing", async () => {
    const res = await rawPost(`${sim.url}/v1/chat/completions`, {
      model: "m",
      messages: user("x [[sim fault=heartbeat-only duration-ms=20]]"),
    });
    expect(res).toEqual({ status: 200, text: "", complete: false });
  });

  it("heartbeat-only yields no chunks to the official client", async () => {
    const chunks: unknown[] = [];
    await caught(
      (async () => {
        const stream = await openai.chat.completions.create({
          model: "m",
          stream: true,
          messages: user("x [[sim fault=heartbeat-only heartbeat-ms=5 duration-ms=30]]"),
        });
        for await (const chunk of stream) chunks.push(chunk);
        throw new Error("stream ended");
      })(),
    );
    expect(chunks).toEqual([]);
  });
});

describe("timing and disconnects", () => {
  it("paces a stream: role chunk, then tokens in order", async () => {
    const stream = await openai.chat.completions.create({
      model: "m",
      messages: user("x [[sim tokens=4 ttft-ms=5 token-interval-ms=2 latency-ms=2]]"),
      stream: true,
    });
    const kinds: string[] = [];
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      kinds.push(c?.delta.role ? "role" : c?.finish_reason ? "finish" : "token");
    }
    expect(kinds).toEqual(["role", "token", "token", "token", "token", "finish"]);
  });

  it("sends headers and the role chunk before ttft elapses", async () => {
    const events: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest(
        `${sim.url}/v1/chat/completions`,
        { method: "POST", headers: { "content-type": "application/json", "x-sim-ttft-ms": "60000" } },
        (res) => {
          events.push(`status ${res.statusCode}`);
          res.once("data", (chunk: Buffer) => {
            events.push(chunk.toString().includes('"role":"assistant"') ? "role" : "other");
            req.destroy();
            resolve();
          });
        },
      );
      req.on("error", reject);
      req.end(JSON.stringify({ model: "m", stream: true, messages: user("x") }));
    });
    expect(events).toEqual(["status 200", "role"]);
    await eventually(async () => (await stats(sim)).outcomes.aborted === 1);
  });

  it("stops a paced stream when the client disconnects", async () => {
    const controller = new AbortController();
    const stream = await openai.chat.completions.create(
      { model: "m", messages: user("x [[sim tokens=1000 token-interval-ms=20]]"), stream: true },
      { signal: controller.signal },
    );
    let tokens = 0;
    await caught(
      (async () => {
        for await (const chunk of stream) {
          if (chunk.choices[0]?.delta.content && ++tokens === 2) controller.abort();
        }
        throw new Error("ended");
      })(),
    );
    expect(tokens).toBe(2);
    await eventually(async () => {
      const s = await stats(sim);
      return s.outcomes.aborted === 1 && s.inFlight === 0;
    });
    expect((await stats(sim)).outcomes.completed).toBe(0);
  });

  it("delays a buffered response by latency-ms without changing it", async () => {
    const fast = await openai.chat.completions.create({ model: "m", messages: user("same") });
    const slow = await openai.chat.completions.create({ model: "m", messages: user("same") }, { headers: { "x-sim-latency-ms": "5" } });
    expect(slow.choices[0]?.message.content).toBe(fast.choices[0]?.message.content);
  });
});

describe("knob sources", () => {
  it("headers override directives, directives override instance defaults", async () => {
    const config = await fetch(`${sim.url}/__sim/config`, { method: "PUT", body: JSON.stringify({ tokens: 2 }) });
    expect(config.status).toBe(200);
    try {
      const words = async (text: string, headers?: Record<string, string>) => {
        const res = await openai.chat.completions.create({ model: "m", messages: user(text) }, { headers });
        return res.choices[0]?.message.content?.split(" ").length;
      };
      expect(await words("plain")).toBe(2);
      expect(await words("d [[sim tokens=3]]")).toBe(3);
      expect(await words("d [[sim tokens=3]]", { "x-sim-tokens": "5" })).toBe(5);
      expect(await words("plain", { "x-sim-tokens": "4" })).toBe(4);
    } finally {
      await fetch(`${sim.url}/__sim/config`, { method: "PUT", body: "{}" });
    }
  });

  it("reads directives only from the last user message, several of them merged", async () => {
    const res = await openai.chat.completions.create({
      model: "m",
      messages: [
        { role: "user", content: "[[sim tokens=9]]" },
        { role: "assistant", content: "ok" },
        { role: "user", content: [{ type: "text", text: "[[sim tokens=1]] and [[sim tokens=2 reasoning-tokens=1]]" }] },
      ],
    });
    expect(res.usage?.completion_tokens).toBe(3);
  });

  it("rejects unknown knobs and bad values with a 400", async () => {
    const bad = await openai.chat.completions.create({ model: "m", messages: user("[[sim colour=red]]") }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect((bad as InstanceType<typeof OpenAI.APIError>).code).toBe("invalid_sim_knob");
    const badHeader = await postChat(sim, { model: "m", messages: user("x") }, { "x-sim-tokens": "lots" });
    expect(badHeader.status).toBe(400);
    expect((await stats(sim)).outcomes.rejected).toBe(2);
  });
});
