/**
 * OpenAI Responses fidelity, proven with the official `openai` client (its stream helper
 * validates event order, indices and item identities strictly).
 */

import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import OpenAI from "openai";
import type { Simulator } from "../../simulator/server.ts";
import { client, post, rawPost, reset, sseEvents, start, stats, user } from "./helpers.ts";

type Event = OpenAI.Responses.ResponseStreamEvent;

let sim: Simulator;
let openai: OpenAI;

beforeAll(async () => {
  sim = await start();
  openai = client(sim);
});
afterAll(() => sim.close());
beforeEach(() => reset(sim));

const weather: OpenAI.Responses.FunctionTool = {
  type: "function",
  name: "get_weather",
  description: "Weather for a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
    required: ["city", "unit"],
    additionalProperties: false,
  },
  strict: true,
};

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

function ofType<T extends Event["type"]>(events: Event[], type: T): Extract<Event, { type: T }>[] {
  return events.filter((e): e is Extract<Event, { type: T }> => e.type === type);
}

describe("buffered response", () => {
  it("is a full Response object with the Chat text and usage arithmetic", async () => {
    const res = await openai.responses.create({ model: "gpt-test", input: "Hello there", store: false, metadata: { run: "1" } });
    const chat = await openai.chat.completions.create({ model: "gpt-test", messages: user("Hello there") });

    expect(res.id).toMatch(/^resp_/);
    expect(res).toMatchObject({
      object: "response",
      status: "completed",
      model: "gpt-test",
      error: null,
      incomplete_details: null,
      instructions: null,
      store: false,
      metadata: { run: "1" },
      parallel_tool_calls: true,
      temperature: 1,
      top_p: 1,
      tool_choice: "auto",
      tools: [],
      text: { format: { type: "text" } },
      truncation: "disabled",
    });
    expect(typeof res.created_at).toBe("number");
    expect(res.output).toHaveLength(1);
    const item = res.output[0];
    if (item?.type !== "message") throw new Error("expected a message item");
    expect(item.id).toMatch(/^msg_/);
    expect(item).toMatchObject({ role: "assistant", status: "completed" });
    expect(item.content).toEqual([{ type: "output_text", text: res.output_text, annotations: [], logprobs: [] }]);

    expect(res.output_text).toBe(chat.choices[0]?.message.content);
    expect(res.output_text.split(" ")).toHaveLength(12);
    expect(res.usage).toEqual({
      input_tokens: 10, // 3 + (4 + ceil(11 / 4))
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 12,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 22,
    });
  });

  it("counts instructions as a system turn and input items like the equivalent Chat conversation", async () => {
    const input: OpenAI.Responses.ResponseInput = [
      { role: "user", content: [{ type: "input_text", text: "What is this?" }, { type: "input_image", image_url: "https://x/y.png", detail: "auto" }] },
      { type: "message", role: "assistant", id: "msg_1", status: "completed", content: [{ type: "output_text", text: "Let me look.", annotations: [] }] },
      { type: "function_call", call_id: "call_1", name: "lookup", arguments: '{"q":"x"}' },
      { type: "function_call_output", call_id: "call_1", output: "a cat" },
      { role: "user", content: "thanks" },
    ];
    const res = await openai.responses.create({ model: "m", instructions: "Be brief.", input });
    const chat = await openai.chat.completions.create({
      model: "m",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: [{ type: "text", text: "What is this?" }, { type: "image_url", image_url: { url: "https://x/y.png" } }] },
        { role: "assistant", content: "Let me look.", tool_calls: [{ id: "call_1", type: "function", function: { name: "lookup", arguments: '{"q":"x"}' } }] },
        { role: "tool", tool_call_id: "call_1", content: "a cat" },
        { role: "user", content: "thanks" },
      ],
    });
    expect(res.instructions).toBe("Be brief.");
    expect(res.output_text).toBe(chat.choices[0]?.message.content);
    expect(res.usage?.input_tokens).toBe(chat.usage?.prompt_tokens);
  });

  it("reports cached and reasoning tokens, with a reasoning item before the message", async () => {
    const text = "think [[sim tokens=5 cached-tokens=4 reasoning-tokens=7]]";
    const res = await openai.responses.create({ model: "m", input: text, reasoning: { effort: "low" } });
    const prompt = 3 + 4 + Math.ceil(text.length / 4);
    expect(res.usage).toEqual({
      input_tokens: prompt,
      input_tokens_details: { cached_tokens: 4 },
      output_tokens: 12,
      output_tokens_details: { reasoning_tokens: 7 },
      total_tokens: prompt + 12,
    });
    expect(res.reasoning).toMatchObject({ effort: "low" });
    expect(res.output.map((o) => o.type)).toEqual(["reasoning", "message"]);
    expect(res.output[0]?.id).toMatch(/^rs_/);
    expect(res.output_text.split(" ")).toHaveLength(5);
  });

  it("is incomplete with reason max_output_tokens when the cap cuts it", async () => {
    const text = "long [[sim tokens=30]]";
    const full = await openai.responses.create({ model: "m", input: text });
    const cut = await openai.responses.create({ model: "m", input: text, max_output_tokens: 16 });
    expect(cut.status).toBe("incomplete");
    expect(cut.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(cut.max_output_tokens).toBe(16);
    expect(cut.output[0]?.type === "message" && cut.output[0].status).toBe("incomplete");
    expect(cut.usage?.output_tokens).toBe(16);
    expect(cut.output_text.split(" ")).toHaveLength(16);
    expect(full.output_text.startsWith(cut.output_text)).toBe(true);
  });

  it("echoes sampling and format parameters", async () => {
    const res = await openai.responses.create({
      model: "m",
      input: "x",
      temperature: 0.2,
      top_p: 0.5,
      parallel_tool_calls: false,
      text: { format: { type: "json_schema", name: "answer", schema: { type: "object" }, strict: true } },
    });
    expect(res).toMatchObject({ temperature: 0.2, top_p: 0.5, parallel_tool_calls: false });
    expect(res.text?.format).toMatchObject({ type: "json_schema", name: "answer" });
  });
});

describe("streamed response", () => {
  it("sends typed events numbered from 0, deltas adding up to the buffered text", async () => {
    const buffered = await openai.responses.create({ model: "m", input: "stream this" });
    const events = await collect(await openai.responses.create({ model: "m", input: "stream this", stream: true }));

    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const deltas = ofType(events, "response.output_text.delta");
    expect(deltas).toHaveLength(12);
    expect(events.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      ...deltas.map(() => "response.output_text.delta"),
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);

    const created = ofType(events, "response.created")[0]?.response;
    expect(created).toMatchObject({ status: "in_progress", output: [], usage: null });
    const added = ofType(events, "response.output_item.added")[0];
    expect(added?.item).toMatchObject({ type: "message", status: "in_progress", content: [], role: "assistant" });
    const itemId = added?.item.id;
    expect(deltas.every((d) => d.item_id === itemId && d.output_index === 0 && d.content_index === 0)).toBe(true);
    const text = deltas.map((d) => d.delta).join("");
    expect(text).toBe(buffered.output_text);
    expect(ofType(events, "response.output_text.done")[0]?.text).toBe(text);

    const completed = ofType(events, "response.completed")[0]?.response;
    expect(completed?.status).toBe("completed");
    expect(completed?.id).toBe(created?.id);
    expect(completed?.usage).toEqual(buffered.usage);
    expect(completed?.output[0]).toMatchObject({ id: itemId, status: "completed", content: [{ type: "output_text", text }] });
  });

  it("ends with response.incomplete when max_output_tokens cuts the stream", async () => {
    const events = await collect(
      await openai.responses.create({ model: "m", input: "x [[sim tokens=20]]", max_output_tokens: 16, stream: true }),
    );
    expect(ofType(events, "response.output_text.delta")).toHaveLength(16);
    const last = events.at(-1);
    expect(last?.type).toBe("response.incomplete");
    if (last?.type !== "response.incomplete") throw new Error("unreachable");
    expect(last.response.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(last.response.usage?.output_tokens).toBe(16);
  });

  it("adds obfuscation padding to deltas unless include_obfuscation is false", async () => {
    const padded = await post(sim, "/v1/responses", { model: "m", input: "x", stream: true });
    const plain = await post(sim, "/v1/responses", { model: "m", input: "x", stream: true, stream_options: { include_obfuscation: false } });
    const delta = (text: string) => sseEvents(text).find((e) => e.event === "response.output_text.delta")?.data;
    expect(typeof delta(await padded.text())?.["obfuscation"]).toBe("string");
    expect(delta(await plain.text())).not.toHaveProperty("obfuscation");
  });

  it("names every SSE event after its type and sends no [DONE]", async () => {
    const res = await post(sim, "/v1/responses", { model: "m", input: "x", stream: true });
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const text = await res.text();
    expect(text).not.toContain("[DONE]");
    const events = sseEvents(text);
    expect(events.every((e) => e.event === e.data["type"])).toBe(true);
  });

  it("works with the stream helper and finalResponse()", async () => {
    const buffered = await openai.responses.create({ model: "m", input: "helper" });
    const stream = openai.responses.stream({ model: "m", input: "helper" });
    let text = "";
    stream.on("response.output_text.delta", (e) => (text += e.delta));
    const final = await stream.finalResponse();
    expect(final.output_text).toBe(buffered.output_text);
    expect(text).toBe(buffered.output_text);
    expect(final.usage).toEqual(buffered.usage);
  });
});

describe("function calls", () => {
  it("answers tool_choice required with a function_call item (buffered)", async () => {
    const res = await openai.responses.create({ model: "m", input: "weather?", tools: [weather], tool_choice: "required" });
    expect(res.status).toBe("completed");
    expect(res.output).toHaveLength(1);
    const call = res.output[0];
    if (call?.type !== "function_call") throw new Error("expected a function_call item");
    expect(call.id).toMatch(/^fc_/);
    expect(call.call_id).toMatch(/^call_/);
    expect(call).toMatchObject({ name: "get_weather", status: "completed" });
    expect(JSON.parse(call.arguments)).toEqual({ city: "sample", unit: "celsius" });
    expect(res.output_text).toBe("");
    expect(res.usage?.output_tokens).toBe(Math.ceil(call.arguments.length / 4));
    expect(res.tools).toEqual([weather]);
  });

  it("streams the call: item added, argument deltas, arguments done, item done", async () => {
    const events = await collect(
      await openai.responses.create({
        model: "m",
        input: "weather?",
        tools: [weather],
        tool_choice: { type: "function", name: "get_weather" },
        stream: true,
      }),
    );
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const added = ofType(events, "response.output_item.added")[0]?.item;
    expect(added).toMatchObject({ type: "function_call", name: "get_weather", arguments: "", status: "in_progress" });
    const deltas = ofType(events, "response.function_call_arguments.delta");
    expect(deltas.length).toBeGreaterThan(3);
    expect(deltas.every((d) => d.item_id === added?.id && d.output_index === 0)).toBe(true);
    const args = deltas.map((d) => d.delta).join("");
    expect(ofType(events, "response.function_call_arguments.done")[0]?.arguments).toBe(args);
    expect(ofType(events, "response.output_item.done")[0]?.item).toMatchObject({ status: "completed", arguments: args });
    expect(JSON.parse(args)).toEqual({ city: "sample", unit: "celsius" });
    expect(events.at(-1)?.type).toBe("response.completed");
  });

  it("calls the tool named by the tool directive via the stream helper", async () => {
    const final = await openai.responses
      .stream({ model: "m", input: "go [[sim tool=get_weather]]", tools: [weather] })
      .finalResponse();
    const call = final.output.find((o) => o.type === "function_call");
    expect(call?.type === "function_call" && call.name).toBe("get_weather");
    const plain = await openai.responses.create({ model: "m", input: "go", tools: [weather] });
    expect(plain.output.map((o) => o.type)).toEqual(["message"]);
  });
});

describe("validation", () => {
  async function apiError(promise: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
    const error = await caught(promise);
    if (error instanceof OpenAI.APIError) return error;
    throw error;
  }

  it("rejects a missing model and a missing input with OpenAI's codes", async () => {
    const noModel = await apiError(openai.responses.create({ input: "x" }));
    expect(noModel).toBeInstanceOf(OpenAI.BadRequestError);
    expect(noModel).toMatchObject({ param: "model", code: "missing_required_parameter", type: "invalid_request_error" });
    const noInput = await apiError(openai.responses.create({ model: "m" }));
    expect(noInput).toMatchObject({ status: 400, param: "input", code: "missing_required_parameter" });
  });

  it("rejects max_output_tokens below 16, a bad role and an unknown previous_response_id", async () => {
    const cap = await apiError(openai.responses.create({ model: "m", input: "x", max_output_tokens: 15 }));
    expect(cap).toMatchObject({ status: 400, param: "max_output_tokens", code: "integer_below_min_value" });
    expect(cap.message).toContain("Expected a value >= 16, but got 15 instead.");
    const role = await post(sim, "/v1/responses", { model: "m", input: [{ role: "robot", content: "x" }] });
    expect(((await role.json()) as { error: { param: string; code: string } }).error).toMatchObject({
      param: "input[0].role",
      code: "invalid_value",
    });
    const previous = await apiError(openai.responses.create({ model: "m", input: "x", previous_response_id: "resp_gone" }));
    expect(previous).toMatchObject({ status: 400, code: "previous_response_not_found", param: "previous_response_id" });
  });

  it("rejects malformed JSON in the OpenAI envelope", async () => {
    const res = await post(sim, "/v1/responses", "{nope");
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: Record<string, unknown> };
    expect(Object.keys(body.error).sort()).toEqual(["code", "message", "param", "type"]);
    expect(res.headers.get("x-request-id")).toMatch(/^req_/);
  });
});

describe("faults and knobs", () => {
  const cases = [
    { status: 429, cls: OpenAI.RateLimitError, type: "rate_limit_error", retryAfter: "1" },
    { status: 500, cls: OpenAI.InternalServerError, type: "server_error", retryAfter: null },
    { status: 503, cls: OpenAI.InternalServerError, type: "server_error", retryAfter: "1" },
  ] as const;
  for (const c of cases) {
    it(`surfaces status ${c.status} as ${c.cls.name} (buffered and stream)`, async () => {
      for (const stream of [false, true]) {
        const error = await caught(openai.responses.create({ model: "m", input: `x [[sim status=${c.status}]]`, stream }));
        expect(error).toBeInstanceOf(c.cls);
        const apiError = error as InstanceType<typeof OpenAI.APIError>;
        expect(apiError.status).toBe(c.status);
        expect(apiError.type).toBe(c.type);
        expect(apiError.headers?.get("retry-after") ?? null).toBe(c.retryAfter);
      }
      expect((await stats(sim)).outcomes.faulted).toBe(2);
    });
  }

  it("cut-mid-stream drops the connection after cut-after deltas, with no terminal event", async () => {
    const seen: Event[] = [];
    const failure = await caught(
      (async () => {
        for await (const e of await openai.responses.create({ model: "m", input: "x [[sim fault=cut-mid-stream cut-after=2]]", stream: true })) {
          seen.push(e);
        }
      })(),
    );
    expect(failure).toBeInstanceOf(Error);
    expect(ofType(seen, "response.output_text.delta")).toHaveLength(2);
    expect(seen.some((e) => e.type === "response.completed" || e.type === "response.output_text.done")).toBe(false);
    expect((await stats(sim)).outcomes.cut).toBe(1);
  });

  it("cut-mid-stream makes the stream helper fail too", async () => {
    const error = await caught(openai.responses.stream({ model: "m", input: "x [[sim fault=cut-mid-stream]]" }).finalResponse());
    expect(error).toBeInstanceOf(Error);
  });

  it("omit-usage sends usage null in the buffered and the terminal streamed response", async () => {
    const buffered = await openai.responses.create({ model: "m", input: "x [[sim fault=omit-usage]]" });
    expect(buffered.usage).toBeNull();
    expect(buffered.status).toBe("completed");
    const events = await collect(await openai.responses.create({ model: "m", input: "x [[sim fault=omit-usage]]", stream: true }));
    const done = ofType(events, "response.completed")[0];
    expect(done?.response.usage).toBeNull();
    expect((await stats(sim)).outcomes.completed).toBe(2);
  });

  it("error-mid-stream ends the stream with response.failed after cut-after deltas", async () => {
    const events = await collect(
      await openai.responses.create({ model: "m", input: "x [[sim fault=error-mid-stream cut-after=3 status=429]]", stream: true }),
    );
    expect(ofType(events, "response.output_text.delta")).toHaveLength(3);
    const last = events.at(-1);
    expect(last?.type).toBe("response.failed");
    if (last?.type !== "response.failed") throw new Error("unreachable");
    expect(last.sequence_number).toBe(events.length - 1);
    expect(last.response.status).toBe("failed");
    expect(last.response.error).toMatchObject({ code: "rate_limit_exceeded" });
    const partial = ofType(events, "response.output_text.delta").map((d) => d.delta).join("");
    expect(last.response.output[0]).toMatchObject({ type: "message", status: "incomplete", content: [{ text: partial }] });
    expect((await stats(sim)).outcomes.faulted).toBe(1);
  });

  it("heartbeat-only sends SSE comments and nothing else", async () => {
    const res = await rawPost(`${sim.url}/v1/responses`, {
      model: "m",
      input: "x [[sim fault=heartbeat-only heartbeat-ms=5 duration-ms=40]]",
      stream: true,
    });
    expect(res.status).toBe(200);
    expect(res.complete).toBe(false);
    expect(res.text).toMatch(/^(: keep-alive\n\n)+$/);
  });

  it("reset-before-headers is a connection error", async () => {
    expect(await caught(openai.responses.create({ model: "m", input: "x [[sim fault=reset-before-headers]]" }))).toBeInstanceOf(
      OpenAI.APIConnectionError,
    );
  });

  it("paces the stream with ttft and token interval without changing it", async () => {
    const plain = await openai.responses.create({ model: "m", input: "paced" });
    const events = await collect(
      await openai.responses.create(
        { model: "m", input: "paced", stream: true },
        { headers: { "x-sim-ttft-ms": "5", "x-sim-token-interval-ms": "1", "x-sim-latency-ms": "1" } },
      ),
    );
    expect(ofType(events, "response.output_text.delta").map((d) => d.delta).join("")).toBe(plain.output_text);
  });

  it("is counted and recorded under its path", async () => {
    await openai.responses.create({ model: "sim-small", input: "count me" });
    await openai.responses.create({ model: "sim-small", input: "x [[sim status=500]]" }).catch(() => {});
    const s = await stats(sim);
    expect(s.paths["/v1/responses"]).toBe(2);
    expect(s.models["sim-small"]).toBe(2);
    expect(s.outcomes).toMatchObject({ completed: 1, faulted: 1 });
  });
});
