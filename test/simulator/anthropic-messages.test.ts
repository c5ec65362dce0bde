/**
 * Anthropic Messages fidelity, proven with the official `@anthropic-ai/sdk` client (which
 * sends `anthropic-version` and Bearer auth, and whose MessageStream accumulates events).
 */

import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import type { Simulator } from "../../simulator/server.ts";
import { ANTHROPIC_HEADERS, anthropicClient, client, post, rawPost, requests, reset, sseEvents, start, stats } from "./helpers.ts";

type Event = Anthropic.Messages.RawMessageStreamEvent;

let sim: Simulator;
let anthropic: Anthropic;

beforeAll(async () => {
  sim = await start();
  anthropic = anthropicClient(sim);
});
afterAll(() => sim.close());
beforeEach(() => reset(sim));

const weather: Anthropic.Messages.Tool = {
  name: "get_weather",
  description: "Weather for a city",
  input_schema: {
    type: "object",
    properties: { city: { type: "string" }, days: { type: "integer", minimum: 1 }, unit: { type: "string", enum: ["c", "f"] } },
    required: ["city", "days", "unit"],
  },
};

function say(text: string): Anthropic.Messages.MessageParam[] {
  return [{ role: "user", content: text }];
}

function textOf(message: Anthropic.Messages.Message): string {
  return message.content.map((b) => (b.type === "text" ? b.text : "")).join("");
}

async function collect(stream: AsyncIterable<Event>): Promise<Event[]> {
  const events: Event[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

describe("buffered message", () => {
  it("is a message object with the Chat text, end_turn and usage", async () => {
    const msg = await anthropic.messages.create({ model: "claude-test", max_tokens: 1024, messages: say("Hello there") });
    const chat = await client(sim).chat.completions.create({ model: "m", messages: [{ role: "user", content: "Hello there" }] });

    expect(msg.id).toMatch(/^msg_/);
    expect(msg).toMatchObject({ type: "message", role: "assistant", model: "claude-test", stop_reason: "end_turn", stop_sequence: null });
    expect(msg.content).toEqual([{ type: "text", text: chat.choices[0]?.message.content }]);
    expect(msg.usage).toMatchObject({
      input_tokens: 10,
      output_tokens: 12,
      cache_read_input_tokens: 0,
      cache_creation_input_tokens: 0,
    });
    expect(msg._request_id).toMatch(/^req_/);
  });

  it("counts the system prompt and blocks like the equivalent Chat conversation", async () => {
    const msg = await anthropic.messages.create({
      model: "m",
      max_tokens: 100,
      system: [{ type: "text", text: "Be brief." }],
      messages: [
        { role: "user", content: [{ type: "text", text: "What is this?" }, { type: "image", source: { type: "url", url: "https://x/y.png" } }] },
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "lookup", input: { q: "x" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "a cat" }, { type: "text", text: "thanks" }] },
      ],
    });
    const chat = await client(sim).chat.completions.create({
      model: "m",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: [{ type: "text", text: "What is this?" }, { type: "image_url", image_url: { url: "https://x/y.png" } }] },
        { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "lookup", arguments: '{"q":"x"}' } }] },
        { role: "tool", tool_call_id: "call_1", content: "a cat" },
        { role: "user", content: "thanks" },
      ],
    });
    expect(textOf(msg)).toBe(chat.choices[0]?.message.content);
    expect(msg.usage.input_tokens).toBe(chat.usage?.prompt_tokens);
  });

  it("excludes cache reads from input_tokens: input = total − cached, cache_read = cached", async () => {
    const text = "cache me [[sim cached-tokens=6]]";
    const total = 3 + 4 + Math.ceil(text.length / 4);
    const msg = await anthropic.messages.create({ model: "m", max_tokens: 100, messages: say(text) });
    expect(msg.usage.input_tokens).toBe(total - 6);
    expect(msg.usage.cache_read_input_tokens).toBe(6);
    expect(msg.usage.cache_creation_input_tokens).toBe(0);
    expect(msg.usage.input_tokens + (msg.usage.cache_read_input_tokens ?? 0)).toBe(total);
    // Clamped to the prompt, as in the other formats.
    const all = await anthropic.messages.create({ model: "m", max_tokens: 100, messages: say("x [[sim cached-tokens=100000]]") });
    expect(all.usage.input_tokens).toBe(0);
  });

  it("stops at max_tokens with stop_reason max_tokens", async () => {
    const full = await anthropic.messages.create({ model: "m", max_tokens: 100, messages: say("long") });
    const cut = await anthropic.messages.create({ model: "m", max_tokens: 4, messages: say("long") });
    expect(cut.stop_reason).toBe("max_tokens");
    expect(cut.usage.output_tokens).toBe(4);
    expect(textOf(full).startsWith(textOf(cut))).toBe(true);
    expect(textOf(cut).split(" ")).toHaveLength(4);
  });

  it("stops at a stop sequence, which is reported and left out of the text", async () => {
    const full = textOf(await anthropic.messages.create({ model: "m", max_tokens: 100, messages: say("stop me") }));
    const word = full.split(" ")[3] ?? "";
    const msg = await anthropic.messages.create({ model: "m", max_tokens: 100, messages: say("stop me"), stop_sequences: ["zzz", ` ${word}`] });
    expect(msg.stop_reason).toBe("stop_sequence");
    expect(msg.stop_sequence).toBe(` ${word}`);
    expect(textOf(msg)).toBe(full.slice(0, full.indexOf(` ${word}`)));
    expect(msg.usage.output_tokens).toBe(4);
  });

  it("shows reasoning as a thinking block when thinking is on, counted in output_tokens", async () => {
    const msg = await anthropic.messages.create({
      model: "m",
      max_tokens: 2048,
      thinking: { type: "enabled", budget_tokens: 1024 },
      messages: say("think [[sim reasoning-tokens=5 tokens=3]]"),
    });
    expect(msg.content.map((b) => b.type)).toEqual(["thinking", "text"]);
    const thinking = msg.content[0];
    if (thinking?.type !== "thinking") throw new Error("expected thinking");
    expect(thinking.thinking.split(" ")).toHaveLength(5);
    expect(thinking.signature.length).toBeGreaterThan(0);
    expect(msg.usage.output_tokens).toBe(8);
    // Without thinking the reasoning tokens are billed but not shown.
    const hidden = await anthropic.messages.create({ model: "m", max_tokens: 100, messages: say("think [[sim reasoning-tokens=5 tokens=3]]") });
    expect(hidden.content.map((b) => b.type)).toEqual(["text"]);
    expect(hidden.usage.output_tokens).toBe(8);
  });
});

describe("streamed message", () => {
  it("sends message_start, one content block with a delta per token, message_delta and message_stop", async () => {
    const buffered = await anthropic.messages.create({ model: "m", max_tokens: 100, messages: say("stream this") });
    const events = await collect(await anthropic.messages.create({ model: "m", max_tokens: 100, messages: say("stream this"), stream: true }));

    expect(events.map((e) => e.type)).toEqual([
      "message_start",
      "content_block_start",
      ...Array.from({ length: 12 }, () => "content_block_delta"),
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    const start = events[0];
    if (start?.type !== "message_start") throw new Error("unreachable");
    expect(start.message).toMatchObject({ id: expect.stringMatching(/^msg_/), role: "assistant", content: [], stop_reason: null, model: "m" });
    expect(start.message.usage).toMatchObject({ input_tokens: buffered.usage.input_tokens, output_tokens: 1 });
    expect(events[1]).toEqual({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } });
    const text = events.map((e) => (e.type === "content_block_delta" && e.delta.type === "text_delta" ? e.delta.text : "")).join("");
    expect(text).toBe(textOf(buffered));
    const delta = events.at(-2);
    if (delta?.type !== "message_delta") throw new Error("unreachable");
    expect(delta.delta).toMatchObject({ stop_reason: "end_turn", stop_sequence: null });
    expect(delta.usage.output_tokens).toBe(12);
  });

  it("sends a ping after the first content_block_start and names each event after its type", async () => {
    const res = await post(sim, "/v1/messages", { model: "m", max_tokens: 100, messages: say("raw"), stream: true }, ANTHROPIC_HEADERS);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(res.headers.get("request-id")).toMatch(/^req_/);
    const body = await res.text();
    expect(body).toContain('event: ping\ndata: {"type": "ping"}\n\n');
    const events = sseEvents(body);
    expect(events.map((e) => e.event).slice(0, 3)).toEqual(["message_start", "content_block_start", "ping"]);
    expect(events.every((e) => e.event === e.data["type"])).toBe(true);
  });

  it("accumulates with messages.stream().finalMessage() to the buffered message", async () => {
    const buffered = await anthropic.messages.create({ model: "m", max_tokens: 100, messages: say("helper") });
    let streamed = "";
    const stream = anthropic.messages.stream({ model: "m", max_tokens: 100, messages: say("helper") });
    stream.on("text", (t) => (streamed += t));
    const final = await stream.finalMessage();
    expect(final.content).toEqual(buffered.content);
    expect(final.usage).toEqual(buffered.usage);
    expect(final.stop_reason).toBe("end_turn");
    expect(streamed).toBe(textOf(buffered));
  });

  it("streams thinking before the text when thinking is on", async () => {
    const final = await anthropic.messages
      .stream({ model: "m", max_tokens: 2048, thinking: { type: "enabled", budget_tokens: 1024 }, messages: say("x [[sim reasoning-tokens=4]]") })
      .finalMessage();
    expect(final.content.map((b) => b.type)).toEqual(["thinking", "text"]);
    expect(final.content[0]?.type === "thinking" && final.content[0].signature.length).toBeGreaterThan(0);
    expect(final.usage.output_tokens).toBe(16);
  });

  it("ends with stop_reason max_tokens when the cap cuts the stream", async () => {
    const final = await anthropic.messages.stream({ model: "m", max_tokens: 3, messages: say("cap") }).finalMessage();
    expect(final.stop_reason).toBe("max_tokens");
    expect(final.usage.output_tokens).toBe(3);
  });
});

describe("tool use", () => {
  it("answers tool_choice any with a tool_use block whose input follows input_schema", async () => {
    const msg = await anthropic.messages.create({ model: "m", max_tokens: 200, messages: say("weather?"), tools: [weather], tool_choice: { type: "any" } });
    expect(msg.stop_reason).toBe("tool_use");
    expect(msg.content).toHaveLength(1);
    const use = msg.content[0];
    if (use?.type !== "tool_use") throw new Error("expected tool_use");
    expect(use.id).toMatch(/^toolu_/);
    expect(use.name).toBe("get_weather");
    expect(use.input).toEqual({ city: "sample", days: 1, unit: "c" });
    expect(msg.usage.output_tokens).toBe(Math.ceil(JSON.stringify(use.input).length / 4));
  });

  it("streams input_json_delta pieces that the SDK parses, for tool_choice tool", async () => {
    const events = await collect(
      await anthropic.messages.create({
        model: "m",
        max_tokens: 200,
        messages: say("weather?"),
        tools: [weather],
        tool_choice: { type: "tool", name: "get_weather" },
        stream: true,
      }),
    );
    const start = events.find((e) => e.type === "content_block_start");
    expect(start?.type === "content_block_start" && start.content_block).toMatchObject({ type: "tool_use", name: "get_weather", input: {} });
    const pieces = events.flatMap((e) => (e.type === "content_block_delta" && e.delta.type === "input_json_delta" ? [e.delta.partial_json] : []));
    expect(pieces[0]).toBe("");
    expect(pieces.length).toBeGreaterThan(3);
    expect(JSON.parse(pieces.join(""))).toEqual({ city: "sample", days: 1, unit: "c" });
    const delta = events.find((e) => e.type === "message_delta");
    expect(delta?.type === "message_delta" && delta.delta.stop_reason).toBe("tool_use");

    const final = await anthropic.messages
      .stream({ model: "m", max_tokens: 200, messages: say("weather?"), tools: [weather], tool_choice: { type: "tool", name: "get_weather" } })
      .finalMessage();
    const use = final.content[0];
    expect(use?.type === "tool_use" && use.input).toEqual({ city: "sample", days: 1, unit: "c" });
  });

  it("calls the tool named by the tool directive, and answers text for auto and none", async () => {
    const called = await anthropic.messages.create({ model: "m", max_tokens: 200, messages: say("go [[sim tool=get_weather]]"), tools: [weather] });
    expect(called.content[0]?.type).toBe("tool_use");
    for (const choice of [{ type: "auto" }, { type: "none" }] as const) {
      const plain = await anthropic.messages.create({ model: "m", max_tokens: 200, messages: say("go"), tools: [weather], tool_choice: choice });
      expect(plain.stop_reason).toBe("end_turn");
    }
  });
});

describe("validation and auth", () => {
  async function apiError(promise: Promise<unknown>): Promise<InstanceType<typeof Anthropic.APIError>> {
    const error = await caught(promise);
    if (error instanceof Anthropic.APIError) return error;
    throw error;
  }

  it("rejects a missing max_tokens with a BadRequestError", async () => {
    const error = await apiError(
      anthropic.messages.create({ model: "m", messages: say("x") } as unknown as Anthropic.Messages.MessageCreateParamsNonStreaming),
    );
    expect(error).toBeInstanceOf(Anthropic.BadRequestError);
    expect(error.type).toBe("invalid_request_error");
    expect(error.apiMessage).toBe("max_tokens: Field required");
    expect(error.error).toMatchObject({ type: "error", request_id: expect.stringMatching(/^req_/) });
  });

  it("rejects a system role, empty messages and tool_choice without tools", async () => {
    const system = await apiError(
      anthropic.messages.create({ model: "m", max_tokens: 10, messages: [{ role: "system", content: "x" }] as unknown as Anthropic.Messages.MessageParam[] }),
    );
    expect(system.apiMessage).toContain('Unexpected role "system"');
    const empty = await apiError(anthropic.messages.create({ model: "m", max_tokens: 10, messages: [] }));
    expect(empty.apiMessage).toBe("messages: at least one message is required");
    const choice = await apiError(anthropic.messages.create({ model: "m", max_tokens: 10, messages: say("x"), tool_choice: { type: "any" } }));
    expect(choice).toBeInstanceOf(Anthropic.BadRequestError);
  });

  it("requires the anthropic-version header, and rejects bad JSON in Anthropic's envelope", async () => {
    const noVersion = await post(sim, "/v1/messages", { model: "m", max_tokens: 10, messages: say("x") });
    expect(noVersion.status).toBe(400);
    expect(await noVersion.json()).toMatchObject({
      type: "error",
      error: { type: "invalid_request_error", message: "anthropic-version: header is required" },
    });
    const bad = await post(sim, "/v1/messages", "{nope", ANTHROPIC_HEADERS);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { type: string } }).error.type).toBe("invalid_request_error");
  });

  it("validates a thinking budget against max_tokens", async () => {
    const small = await apiError(anthropic.messages.create({ model: "m", max_tokens: 4000, messages: say("x"), thinking: { type: "enabled", budget_tokens: 100 } }));
    expect(small.apiMessage).toContain("greater than or equal to 1024");
    const over = await apiError(anthropic.messages.create({ model: "m", max_tokens: 1024, messages: say("x"), thinking: { type: "enabled", budget_tokens: 1024 } }));
    expect(over.apiMessage).toContain("`max_tokens` must be greater than `thinking.budget_tokens`");
  });

  it("takes the key from x-api-key or Bearer, and answers 401 authentication_error otherwise", async () => {
    const keyed = await start({ apiKey: "sim-secret-key" });
    try {
      const ok = await anthropicClient(keyed, "sim-secret-key").messages.create({ model: "m", max_tokens: 10, messages: say("x") });
      expect(ok.type).toBe("message");
      const viaHeader = await post(keyed, "/v1/messages", { model: "m", max_tokens: 10, messages: say("x") }, { ...ANTHROPIC_HEADERS, "x-api-key": "sim-secret-key" });
      expect(viaHeader.status).toBe(200);
      const wrong = await apiError(anthropicClient(keyed, "wrong").messages.create({ model: "m", max_tokens: 10, messages: say("x") }));
      expect(wrong).toBeInstanceOf(Anthropic.AuthenticationError);
      expect(wrong.type).toBe("authentication_error");
      expect(wrong.apiMessage).toBe("invalid x-api-key");
      const none = await post(keyed, "/v1/messages", { model: "m", max_tokens: 10, messages: say("x") }, ANTHROPIC_HEADERS);
      expect(((await none.json()) as { error: { message: string } }).error.message).toBe("x-api-key header is required");
    } finally {
      await keyed.close();
    }
  });
});

describe("faults and knobs", () => {
  const cases = [
    { status: 429, cls: Anthropic.RateLimitError, type: "rate_limit_error", retryAfter: "1" },
    { status: 500, cls: Anthropic.InternalServerError, type: "api_error", retryAfter: null },
    { status: 529, cls: Anthropic.OverloadedError, type: "overloaded_error", retryAfter: null },
    { status: 503, cls: Anthropic.ServiceUnavailableError, type: "overloaded_error", retryAfter: "1" },
    { status: 400, cls: Anthropic.BadRequestError, type: "invalid_request_error", retryAfter: null },
    { status: 403, cls: Anthropic.PermissionDeniedError, type: "permission_error", retryAfter: null },
    { status: 404, cls: Anthropic.NotFoundError, type: "not_found_error", retryAfter: null },
    { status: 413, cls: Anthropic.ContentTooLargeError, type: "request_too_large", retryAfter: null },
    { status: 504, cls: Anthropic.GatewayTimeoutError, type: "timeout_error", retryAfter: null },
  ] as const;
  for (const c of cases) {
    it(`surfaces status ${c.status} as ${c.cls.name} with type ${c.type} (buffered and stream)`, async () => {
      for (const stream of [false, true]) {
        const error = await caught(anthropic.messages.create({ model: "m", max_tokens: 10, messages: say(`x [[sim status=${c.status}]]`), stream }));
        expect(error).toBeInstanceOf(c.cls);
        const apiError = error as InstanceType<typeof Anthropic.APIError>;
        expect(apiError.status).toBe(c.status);
        expect(apiError.type).toBe(c.type);
        expect(apiError.headers?.get("retry-after") ?? null).toBe(c.retryAfter);
        expect(apiError.requestID).toMatch(/^req_/);
      }
      expect((await stats(sim)).outcomes.faulted).toBe(2);
    });
  }

  it("529 carries Anthropic's 'Overloaded' message", async () => {
    const res = await post(sim, "/v1/messages", { model: "m", max_tokens: 10, messages: say("x [[sim status=529]]") }, ANTHROPIC_HEADERS);
    expect(await res.json()).toMatchObject({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } });
  });

  it("cut-mid-stream drops the stream after cut-after deltas: no message_delta, no message_stop", async () => {
    const seen: Event[] = [];
    const failure = await caught(
      (async () => {
        const stream = await anthropic.messages.create({ model: "m", max_tokens: 100, messages: say("x [[sim fault=cut-mid-stream cut-after=2]]"), stream: true });
        for await (const e of stream) seen.push(e);
      })(),
    );
    expect(failure).toBeInstanceOf(Error);
    expect(seen.filter((e) => e.type === "content_block_delta")).toHaveLength(2);
    expect(seen.some((e) => e.type === "message_delta" || e.type === "message_stop")).toBe(false);
    expect(await caught(anthropic.messages.stream({ model: "m", max_tokens: 100, messages: say("x [[sim fault=cut-mid-stream]]") }).finalMessage())).toBeInstanceOf(Error);
    expect((await stats(sim)).outcomes.cut).toBe(2);
  });

  it("error-mid-stream sends an error event that the SDK raises with its type", async () => {
    const seen: Event[] = [];
    const error = await caught(
      (async () => {
        const stream = await anthropic.messages.create({ model: "m", max_tokens: 100, messages: say("x [[sim fault=error-mid-stream status=529 cut-after=1]]"), stream: true });
        for await (const e of stream) seen.push(e);
      })(),
    );
    expect(error).toBeInstanceOf(Anthropic.APIError);
    expect((error as InstanceType<typeof Anthropic.APIError>).type).toBe("overloaded_error");
    expect(seen.filter((e) => e.type === "content_block_delta")).toHaveLength(1);
    const raw = await rawPost(`${sim.url}/v1/messages`, { model: "m", max_tokens: 100, stream: true, messages: say("x [[sim fault=error-mid-stream]]") }, ANTHROPIC_HEADERS);
    expect(raw.complete).toBe(true);
    expect(raw.text.endsWith('event: error\ndata: {"type":"error","error":{"type":"api_error","message":"Internal server error"}}\n\n')).toBe(true);
  });

  it("omit-usage leaves usage out of the message, message_start and message_delta", async () => {
    const msg = await anthropic.messages.create({ model: "m", max_tokens: 100, messages: say("x [[sim fault=omit-usage]]") });
    expect(msg.usage).toBeUndefined();
    expect(msg.stop_reason).toBe("end_turn");
    const events = await collect(await anthropic.messages.create({ model: "m", max_tokens: 100, messages: say("x [[sim fault=omit-usage]]"), stream: true }));
    const start = events[0];
    expect(start?.type === "message_start" && start.message.usage).toBeUndefined();
    const delta = events.find((e) => e.type === "message_delta");
    expect(delta).toBeDefined();
    expect(delta).not.toHaveProperty("usage");
    expect(events.at(-1)?.type).toBe("message_stop");
  });

  it("heartbeat-only sends ping events and nothing else, which the SDK skips", async () => {
    const raw = await rawPost(
      `${sim.url}/v1/messages`,
      { model: "m", max_tokens: 100, stream: true, messages: say("x [[sim fault=heartbeat-only heartbeat-ms=5 duration-ms=40]]") },
      ANTHROPIC_HEADERS,
    );
    expect(raw.status).toBe(200);
    expect(raw.complete).toBe(false);
    expect(raw.text).toMatch(/^(event: ping\ndata: \{"type": "ping"\}\n\n)+$/);
    const seen: Event[] = [];
    await caught(
      (async () => {
        const stream = await anthropic.messages.create({ model: "m", max_tokens: 100, messages: say("x [[sim fault=heartbeat-only heartbeat-ms=5 duration-ms=30]]"), stream: true });
        for await (const e of stream) seen.push(e);
        throw new Error("stream ended");
      })(),
    );
    expect(seen).toEqual([]);
  });

  it("reset-before-headers is a connection error", async () => {
    expect(await caught(anthropic.messages.create({ model: "m", max_tokens: 10, messages: say("x [[sim fault=reset-before-headers]]") }))).toBeInstanceOf(
      Anthropic.APIConnectionError,
    );
  });

  it("is counted and recorded under its path, the version header included", async () => {
    await anthropic.messages.create({ model: "claude-x", max_tokens: 10, messages: say("count") });
    const s = await stats(sim);
    expect(s.paths["/v1/messages"]).toBe(1);
    expect(s.models["claude-x"]).toBe(1);
    const [recorded] = await requests(sim);
    expect(recorded?.headers["anthropic-version"]).toBeDefined();
    expect(recorded?.body).toMatchObject({ model: "claude-x", max_tokens: 10 });
  });
});

describe("models", () => {
  it("lists models in Anthropic's shape for Anthropic clients, OpenAI's otherwise", async () => {
    const page = await anthropic.models.list();
    expect(page.data.map((m) => m.id)).toEqual(["sim-small", "sim-large", "sim-reasoning"]);
    expect(page.data[0]).toEqual({ type: "model", id: "sim-small", display_name: "sim-small", created_at: "2023-11-14T22:13:20Z" });
    const raw = (await (await fetch(`${sim.url}/v1/models?limit=2`, { headers: ANTHROPIC_HEADERS })).json()) as Record<string, unknown>;
    expect(raw).toMatchObject({ has_more: true, first_id: "sim-small", last_id: "sim-large" });
    const next = (await (await fetch(`${sim.url}/v1/models?after_id=sim-large`, { headers: ANTHROPIC_HEADERS })).json()) as Record<string, unknown>;
    expect(next).toMatchObject({ has_more: false, first_id: "sim-reasoning", last_id: "sim-reasoning" });
    expect((await anthropic.models.retrieve("sim-large")).id).toBe("sim-large");
    const missing = await caught(anthropic.models.retrieve("nope"));
    expect(missing).toBeInstanceOf(Anthropic.NotFoundError);
    expect((missing as InstanceType<typeof Anthropic.APIError>).type).toBe("not_found_error");

    const openaiList = await client(sim).models.list();
    expect(openaiList.data[0]).toMatchObject({ id: "sim-small", object: "model" });
    expect(await caught(client(sim).models.retrieve("nope"))).toBeInstanceOf(OpenAI.NotFoundError);
  });
});

describe("token counting", () => {
  const conversation = {
    system: "Be brief.",
    messages: [
      { role: "user", content: "What is the weather in Paris?" },
      { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris", days: 1, unit: "c" } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "Sunny" }] },
    ] satisfies Anthropic.Messages.MessageParam[],
    tools: [weather],
  };

  it("counts what the same conversation's message reports as input_tokens, without max_tokens", async () => {
    const counted = await anthropic.messages.countTokens({ model: "claude-count", ...conversation });
    const message = await anthropic.messages.create({ model: "claude-count", max_tokens: 10, tool_choice: { type: "none" }, ...conversation });
    expect(counted).toEqual({ input_tokens: message.usage.input_tokens });
    expect(counted.input_tokens).toBeGreaterThan(0);
    // Output-only parameters are accepted and change nothing.
    expect(await anthropic.messages.countTokens({ model: "claude-count", ...conversation, max_tokens: 5 } as Anthropic.Messages.MessageCountTokensParams)).toEqual(counted);
    const s = await stats(sim);
    expect(s.paths["/v1/messages/count_tokens"]).toBe(2);
    expect(s.models["claude-count"]).toBe(3);
    const [recorded] = await requests(sim);
    expect(recorded?.path).toBe("/v1/messages/count_tokens");
    expect(recorded?.headers["anthropic-version"]).toBeDefined();
  });

  it("refuses in Anthropic's envelope: no messages, no version header, a wrong key, a status knob on its path", async () => {
    const noMessages = await caught(anthropic.messages.countTokens({ model: "m" } as Anthropic.Messages.MessageCountTokensParams));
    expect(noMessages).toBeInstanceOf(Anthropic.BadRequestError);
    expect((noMessages as InstanceType<typeof Anthropic.APIError>).type).toBe("invalid_request_error");
    const noVersion = await post(sim, "/v1/messages/count_tokens", { model: "m", messages: say("x") });
    expect(noVersion.status).toBe(400);
    expect(await noVersion.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error", message: "anthropic-version: header is required" } });
    const keyed = await start({ apiKey: "right" });
    try {
      expect(await caught(anthropicClient(keyed, "wrong").messages.countTokens({ model: "m", messages: say("x") }))).toBeInstanceOf(Anthropic.AuthenticationError);
    } finally {
      await keyed.close();
    }
    const down = await caught(anthropic.messages.countTokens({ model: "m", messages: say("x [[sim status=503 only-path=/v1/messages/count_tokens]]") }));
    expect(down).toBeInstanceOf(Anthropic.InternalServerError);
    expect((down as InstanceType<typeof Anthropic.APIError>).type).toBe("overloaded_error");
    // The same directive leaves the message endpoint alone.
    expect((await anthropic.messages.create({ model: "m", max_tokens: 5, messages: say("x [[sim status=503 only-path=/v1/messages/count_tokens]]") })).type).toBe("message");
  });
});
