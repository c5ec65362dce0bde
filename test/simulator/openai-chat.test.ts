/**
 * OpenAI Chat Completions fidelity, proven with the official `openai` client.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import OpenAI from "openai";
import type { Simulator } from "../../simulator/server.ts";
import { client, postChat, sseData, start, user } from "./helpers.ts";

let sim: Simulator;
let openai: OpenAI;

beforeAll(async () => {
  sim = await start();
  openai = client(sim);
});
afterAll(() => sim.close());

const weatherTool: OpenAI.Chat.Completions.ChatCompletionTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather for a city",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string" },
        unit: { type: "string", enum: ["celsius", "fahrenheit"] },
        days: { type: "integer", minimum: 1 },
        detailed: { type: "boolean" },
        note: { type: "string" },
      },
      required: ["city", "unit", "days", "detailed"],
    },
  },
};

async function collect(stream: AsyncIterable<OpenAI.Chat.Completions.ChatCompletionChunk>) {
  const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

describe("buffered completion", () => {
  it("returns deterministic text, echoes the model and does usage arithmetic", async () => {
    const messages = user("Hello there");
    const a = await openai.chat.completions.create({ model: "gpt-test", messages });
    const b = await openai.chat.completions.create({ model: "another-model", messages });

    expect(a.id).toMatch(/^chatcmpl-/);
    expect(a.id).not.toBe(b.id);
    expect(a.object).toBe("chat.completion");
    expect(a.model).toBe("gpt-test");
    expect(typeof a.created).toBe("number");
    const choice = a.choices[0];
    expect(choice?.finish_reason).toBe("stop");
    expect(choice?.message.role).toBe("assistant");
    const text = choice?.message.content ?? "";
    // Default 12 tokens: 12 words, the last ending the sentence.
    expect(text.split(" ")).toHaveLength(12);
    expect(text.endsWith(".")).toBe(true);
    // Same messages, same text, whatever the model.
    expect(b.choices[0]?.message.content).toBe(text);

    // 3 + (4 + ceil(11 / 4)) = 10.
    expect(a.usage).toMatchObject({
      prompt_tokens: 10,
      completion_tokens: 12,
      total_tokens: 22,
      prompt_tokens_details: { cached_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0 },
    });
  });

  it("varies the text with the conversation", async () => {
    const a = await openai.chat.completions.create({ model: "m", messages: user("first") });
    const b = await openai.chat.completions.create({ model: "m", messages: user("second") });
    expect(a.choices[0]?.message.content).not.toBe(b.choices[0]?.message.content);
  });

  it("counts every message, system included, and array content parts", async () => {
    const res = await openai.chat.completions.create({
      model: "m",
      messages: [
        { role: "system", content: "Be brief." }, // 4 + ceil(9/4)=3
        { role: "user", content: [{ type: "text", text: "abcdefgh" }] }, // 4 + 2
      ],
    });
    expect(res.usage?.prompt_tokens).toBe(3 + 7 + 6);
  });

  it("honours the tokens knob and reports cached and reasoning tokens", async () => {
    const res = await openai.chat.completions.create({
      model: "m",
      messages: user("count me [[sim tokens=5 cached-tokens=4 reasoning-tokens=7]]"),
    });
    expect(res.choices[0]?.message.content?.split(" ")).toHaveLength(5);
    const prompt = 3 + 4 + Math.ceil("count me [[sim tokens=5 cached-tokens=4 reasoning-tokens=7]]".length / 4);
    expect(res.usage).toMatchObject({
      prompt_tokens: prompt,
      completion_tokens: 5 + 7,
      total_tokens: prompt + 12,
      prompt_tokens_details: { cached_tokens: 4 },
      completion_tokens_details: { reasoning_tokens: 7 },
    });
  });

  it("stops at max_tokens / max_completion_tokens with finish_reason length", async () => {
    const messages = user("long answer please");
    const full = await openai.chat.completions.create({ model: "m", messages });
    const cut = await openai.chat.completions.create({ model: "m", messages, max_tokens: 4 });
    const cut2 = await openai.chat.completions.create({ model: "m", messages, max_completion_tokens: 4 });

    expect(cut.choices[0]?.finish_reason).toBe("length");
    expect(cut.usage?.completion_tokens).toBe(4);
    const cutText = cut.choices[0]?.message.content ?? "";
    expect(cutText.split(" ")).toHaveLength(4);
    expect(full.choices[0]?.message.content?.startsWith(cutText)).toBe(true);
    expect(cut2.choices[0]?.message.content).toBe(cutText);

    const exact = await openai.chat.completions.create({ model: "m", messages, max_tokens: 12 });
    expect(exact.choices[0]?.finish_reason).toBe("stop");
  });

  it("lists models", async () => {
    const list = await openai.models.list();
    expect(list.data.map((m) => m.id)).toEqual(["sim-small", "sim-large", "sim-reasoning"]);
    expect((await openai.models.retrieve("sim-large")).id).toBe("sim-large");
    await expect(openai.models.retrieve("nope")).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });
});

describe("streamed completion", () => {
  it("streams role, one chunk per token, finish, [DONE]; content equals the buffered text", async () => {
    const messages = user("stream this");
    const buffered = await openai.chat.completions.create({ model: "m", messages });
    const chunks = await collect(await openai.chat.completions.create({ model: "m", messages, stream: true }));

    expect(chunks.length).toBe(1 + 12 + 1);
    expect(chunks.every((c) => c.object === "chat.completion.chunk" && c.model === "m")).toBe(true);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks[0]?.choices[0]?.delta.role).toBe("assistant");
    expect(chunks.some((c) => "usage" in c)).toBe(false);
    const content = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    expect(content).toBe(buffered.choices[0]?.message.content);
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe("stop");
    expect(chunks.slice(0, -1).every((c) => c.choices[0]?.finish_reason === null)).toBe(true);
  });

  it("adds a usage chunk with empty choices, and usage:null elsewhere, when include_usage is on", async () => {
    const messages = user("stream this");
    const buffered = await openai.chat.completions.create({ model: "m", messages });
    const chunks = await collect(
      await openai.chat.completions.create({ model: "m", messages, stream: true, stream_options: { include_usage: true } }),
    );
    const last = chunks.at(-1);
    expect(last?.choices).toEqual([]);
    expect(last?.usage).toEqual(buffered.usage);
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    expect(chunks.at(-2)?.choices[0]?.finish_reason).toBe("stop");
  });

  it("ends with [DONE] on the wire", async () => {
    const res = await postChat(sim, { model: "m", messages: user("x"), stream: true });
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const data = sseData(await res.text());
    expect(data.at(-1)).toBe("[DONE]");
  });

  it("streams length when max_tokens cuts", async () => {
    const chunks = await collect(
      await openai.chat.completions.create({
        model: "m",
        messages: user("x"),
        max_tokens: 2,
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    expect(chunks.filter((c) => c.choices[0]?.delta.content)).toHaveLength(2);
    expect(chunks.at(-2)?.choices[0]?.finish_reason).toBe("length");
    expect(chunks.at(-1)?.usage?.completion_tokens).toBe(2);
  });
});

describe("tool calls", () => {
  function checkArguments(json: string): void {
    const args = JSON.parse(json) as Record<string, unknown>;
    expect(Object.keys(args).sort()).toEqual(["city", "days", "detailed", "unit"]);
    expect(args).toEqual({ city: "sample", unit: "celsius", days: 1, detailed: true });
  }

  it("answers tool_choice required with a schema-conforming call (buffered)", async () => {
    const res = await openai.chat.completions.create({
      model: "m",
      messages: user("weather?"),
      tools: [weatherTool],
      tool_choice: "required",
    });
    const choice = res.choices[0];
    expect(choice?.finish_reason).toBe("tool_calls");
    expect(choice?.message.content).toBeNull();
    const call = choice?.message.tool_calls?.[0];
    expect(call?.id).toMatch(/^call_/);
    expect(call?.type).toBe("function");
    if (call?.type !== "function") throw new Error("expected a function call");
    expect(call.function.name).toBe("get_weather");
    checkArguments(call.function.arguments);
    expect(res.usage?.completion_tokens).toBe(Math.ceil(call.function.arguments.length / 4));
  });

  it("streams the call: header delta with empty arguments, then argument pieces", async () => {
    const chunks = await collect(
      await openai.chat.completions.create({
        model: "m",
        messages: user("weather?"),
        tools: [weatherTool],
        tool_choice: { type: "function", function: { name: "get_weather" } },
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    const deltas = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    const first = deltas[0];
    expect(first).toMatchObject({ index: 0, type: "function", function: { name: "get_weather", arguments: "" } });
    expect(first?.id).toMatch(/^call_/);
    const pieces = deltas.slice(1).map((d) => d.function?.arguments ?? "");
    expect(pieces.length).toBeGreaterThan(3);
    expect(deltas.slice(1).every((d) => d.index === 0 && d.id === undefined)).toBe(true);
    checkArguments(pieces.join(""));
    expect(chunks.at(-2)?.choices[0]?.finish_reason).toBe("tool_calls");
    expect(chunks.at(-1)?.usage?.completion_tokens).toBe(pieces.length);
  });

  it("calls the tool named by the tool directive, and answers text without one", async () => {
    const tools = [weatherTool, { type: "function" as const, function: { name: "noop" } }];
    const called = await openai.chat.completions.create({ model: "m", messages: user("go [[sim tool=noop]]"), tools });
    const call = called.choices[0]?.message.tool_calls?.[0];
    expect(call?.type === "function" && call.function.name).toBe("noop");
    expect(call?.type === "function" && call.function.arguments).toBe("{}");

    const plain = await openai.chat.completions.create({ model: "m", messages: user("go"), tools });
    expect(plain.choices[0]?.finish_reason).toBe("stop");
    expect(plain.choices[0]?.message.tool_calls).toBeUndefined();
  });

  it("truncates arguments with finish_reason length when max_tokens cuts a call", async () => {
    const res = await openai.chat.completions.create({
      model: "m",
      messages: user("weather?"),
      tools: [weatherTool],
      tool_choice: "required",
      max_tokens: 2,
    });
    expect(res.choices[0]?.finish_reason).toBe("length");
    const call = res.choices[0]?.message.tool_calls?.[0];
    expect(call?.type === "function" && call.function.arguments.length).toBe(8);
  });
});

describe("request validation", () => {
  async function errorOf(promise: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
    try {
      await promise;
    } catch (error) {
      if (error instanceof OpenAI.APIError) return error;
      throw error;
    }
    throw new Error("expected an API error");
  }

  it("rejects malformed JSON", async () => {
    const res = await postChat(sim, "{not json");
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: Record<string, unknown> };
    expect(body.error).toMatchObject({ type: "invalid_request_error", param: null, code: null });
    expect(Object.keys(body.error).sort()).toEqual(["code", "message", "param", "type"]);
  });

  it("rejects a missing model", async () => {
    const error = await errorOf(
      openai.chat.completions.create({ messages: user("x") } as unknown as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming),
    );
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error.type).toBe("invalid_request_error");
    expect(error.message).toMatch(/model/);
  });

  it("rejects missing and empty messages with the right param and code", async () => {
    const missing = await errorOf(
      openai.chat.completions.create({ model: "m" } as unknown as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming),
    );
    expect(missing).toBeInstanceOf(OpenAI.BadRequestError);
    expect(missing).toMatchObject({ param: "messages", code: "missing_required_parameter" });

    const empty = await errorOf(openai.chat.completions.create({ model: "m", messages: [] }));
    expect(empty).toMatchObject({ status: 400, param: "messages", code: "empty_array", type: "invalid_request_error" });
  });

  it("rejects a bad role, a bad max_tokens, and stream_options without stream", async () => {
    const role = await postChat(sim, { model: "m", messages: [{ role: "robot", content: "x" }] });
    expect(((await role.json()) as { error: { param: string } }).error.param).toBe("messages[0].role");
    const cap = await postChat(sim, { model: "m", messages: user("x"), max_tokens: 0 });
    expect(((await cap.json()) as { error: { code: string } }).error.code).toBe("integer_below_min_value");
    const opts = await postChat(sim, { model: "m", messages: user("x"), stream_options: { include_usage: true } });
    expect(((await opts.json()) as { error: { param: string } }).error.param).toBe("stream_options");
  });

  it("rejects an unknown path in the OpenAI envelope", async () => {
    const res = await fetch(`${sim.url}/v1/nothing-here`, { method: "POST", body: "{}" });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { message: string } }).error.message).toBe("Invalid URL (POST /v1/nothing-here)");
  });
});

describe("log-probabilities and the quality knob", () => {
  it("answers logprobs per token at the quality asked, per model and per prompt, with top alternatives", async () => {
    const messages = user("How sure are you? [[sim quality=sim-small:0.2,sim-large:0.95 tokens=4]]");
    const small = await openai.chat.completions.create({ model: "sim-small", messages, logprobs: true, top_logprobs: 2 });
    const large = await openai.chat.completions.create({ model: "sim-large", messages, logprobs: true, top_logprobs: 2 });
    const other = await openai.chat.completions.create({ model: "sim-other", messages, logprobs: true });
    const content = (r: OpenAI.Chat.Completions.ChatCompletion) => r.choices[0]!.logprobs!.content!;
    expect(content(small)).toHaveLength(4);
    expect(content(small).map((t) => t.token).join("")).toBe(small.choices[0]!.message.content);
    for (const t of content(small)) expect(t.logprob).toBeCloseTo(Math.log(0.2), 9);
    for (const t of content(large)) expect(t.logprob).toBeCloseTo(Math.log(0.95), 9);
    // A model the knob does not name keeps the default quality (0.9); no alternatives unless asked.
    for (const t of content(other)) {
      expect(t.logprob).toBeCloseTo(Math.log(0.9), 9);
      expect(t.top_logprobs).toEqual([]);
    }
    // The best alternative has half of what the chosen token leaves: an unsure model's may outrank it.
    const [first] = content(small);
    expect(first!.top_logprobs.map((a) => a.logprob)).toEqual([Math.log(0.4), Math.log(0.2)]);
    expect(content(large)[0]!.top_logprobs[0]!.token).toBe(content(large)[0]!.token);
    // Not asked: no logprobs.
    const plain = await openai.chat.completions.create({ model: "sim-small", messages });
    expect(plain.choices[0]!.logprobs).toBeNull();
  });

  it("refuses top_logprobs without logprobs, and a bad quality, as 400s", async () => {
    await expect(openai.chat.completions.create({ model: "m", messages: user("x"), top_logprobs: 2 })).rejects.toMatchObject({ status: 400, param: "top_logprobs" });
    await expect(openai.chat.completions.create({ model: "m", messages: user("x [[sim quality=1.5]]") })).rejects.toMatchObject({ status: 400, code: "invalid_sim_knob" });
  });
});
