/**
 * The three wire formats over one core: the same conversation gets the same text and the
 * same token figures whichever format carries it, and knobs, stats and `times` counting
 * work across formats (a retry may switch protocol, as a failover does).
 */

import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import type { Simulator } from "../../simulator/server.ts";
import { anthropicClient, client, requests, reset, start, stats } from "./helpers.ts";

let sim: Simulator;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  sim = await start();
  openai = client(sim);
  anthropic = anthropicClient(sim);
});
afterAll(() => sim.close());
beforeEach(() => reset(sim));

interface Answer {
  readonly text: string;
  readonly prompt: number;
  readonly output: number;
}

/** The same system + user text through each format, buffered or streamed. */
async function viaChat(system: string, text: string, stream: boolean): Promise<Answer> {
  const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
    { role: "system", content: system },
    { role: "user", content: text },
  ];
  if (!stream) {
    const res = await openai.chat.completions.create({ model: "m", messages });
    return { text: res.choices[0]?.message.content ?? "", prompt: res.usage?.prompt_tokens ?? -1, output: res.usage?.completion_tokens ?? -1 };
  }
  let out = "";
  let usage: OpenAI.CompletionUsage | undefined;
  for await (const chunk of await openai.chat.completions.create({ model: "m", messages, stream: true, stream_options: { include_usage: true } })) {
    out += chunk.choices[0]?.delta.content ?? "";
    if (chunk.usage) usage = chunk.usage;
  }
  return { text: out, prompt: usage?.prompt_tokens ?? -1, output: usage?.completion_tokens ?? -1 };
}

async function viaResponses(system: string, text: string, stream: boolean): Promise<Answer> {
  const res = stream
    ? await openai.responses.stream({ model: "m", instructions: system, input: text }).finalResponse()
    : await openai.responses.create({ model: "m", instructions: system, input: text });
  return { text: res.output_text, prompt: res.usage?.input_tokens ?? -1, output: res.usage?.output_tokens ?? -1 };
}

async function viaAnthropic(system: string, text: string, stream: boolean): Promise<Answer> {
  const params = { model: "m", max_tokens: 1000, system, messages: [{ role: "user" as const, content: text }] };
  const msg = stream ? await anthropic.messages.stream(params).finalMessage() : await anthropic.messages.create(params);
  const prompt = msg.usage.input_tokens + (msg.usage.cache_read_input_tokens ?? 0) + (msg.usage.cache_creation_input_tokens ?? 0);
  return { text: msg.content.map((b) => (b.type === "text" ? b.text : "")).join(""), prompt, output: msg.usage.output_tokens };
}

describe("one core, three formats", () => {
  for (const stream of [false, true]) {
    it(`gives the same text and token figures in Chat, Responses and Anthropic (${stream ? "streamed" : "buffered"})`, async () => {
      for (const text of ["Hello there", "Tell me about rivers [[sim tokens=7 reasoning-tokens=3 cached-tokens=5]]"]) {
        const chat = await viaChat("You are terse.", text, stream);
        const responses = await viaResponses("You are terse.", text, stream);
        const messages = await viaAnthropic("You are terse.", text, stream);
        expect(chat.text.length).toBeGreaterThan(0);
        expect(responses).toEqual(chat);
        expect(messages).toEqual(chat);
      }
    });
  }

  it("varies the text with the conversation in every format alike", async () => {
    const a = await viaAnthropic("s", "first", false);
    const b = await viaAnthropic("s", "second", false);
    expect(a.text).not.toBe(b.text);
    expect((await viaResponses("s", "second", false)).text).toBe(b.text);
  });

  it("shares `times` counts across formats: a retry in another protocol is the same conversation", async () => {
    const text = "retry me [[sim status=503 times=1]]";
    const first = await anthropic.messages.create({ model: "m", max_tokens: 100, messages: [{ role: "user", content: text }] }).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(Anthropic.ServiceUnavailableError);
    const second = await openai.chat.completions.create({ model: "m", messages: [{ role: "user", content: text }] });
    expect(second.choices[0]?.finish_reason).toBe("stop");
    const third = await openai.responses.create({ model: "m", input: text });
    expect(third.status).toBe("completed");
  });

  it("applies only-model in every format", async () => {
    const text = "x [[sim status=500 only-model=bad]]";
    expect(await openai.responses.create({ model: "bad", input: text }).catch((e: unknown) => e)).toBeInstanceOf(OpenAI.InternalServerError);
    expect((await openai.responses.create({ model: "good", input: text })).status).toBe("completed");
    expect(await anthropic.messages.create({ model: "bad", max_tokens: 10, messages: [{ role: "user", content: text }] }).catch((e: unknown) => e)).toBeInstanceOf(
      Anthropic.InternalServerError,
    );
  });

  it("counts every path and model in /__sim/stats and records them in /__sim/requests", async () => {
    await viaChat("s", "a", false);
    await viaResponses("s", "b", true);
    await viaAnthropic("s", "c", false);
    await anthropic.messages.create({ model: "m", max_tokens: 10, messages: [{ role: "user", content: "d [[sim status=429]]" }] }).catch(() => {});
    expect(await stats(sim)).toEqual({
      total: 4,
      inFlight: 0,
      paths: { "/v1/chat/completions": 1, "/v1/responses": 1, "/v1/messages": 2 },
      models: { m: 4 },
      outcomes: { completed: 3, rejected: 0, faulted: 1, cut: 0, aborted: 0 },
    });
    expect((await requests(sim)).map((r) => r.path)).toEqual(["/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/messages"]);
  });
});

describe("envelopes outside the generation routes", () => {
  it("answers auth errors in each format's envelope", async () => {
    const keyed = await start({ apiKey: "sim-secret-key" });
    try {
      const responses = await client(keyed, "wrong-key-value").responses.create({ model: "m", input: "x" }).catch((e: unknown) => e);
      expect(responses).toBeInstanceOf(OpenAI.AuthenticationError);
      expect((responses as InstanceType<typeof OpenAI.APIError>).code).toBe("invalid_api_key");
      const models = await anthropicClient(keyed, "wrong").models.list().catch((e: unknown) => e);
      expect(models).toBeInstanceOf(Anthropic.AuthenticationError);
      expect((models as InstanceType<typeof Anthropic.APIError>).type).toBe("authentication_error");
    } finally {
      await keyed.close();
    }
  });

  it("answers an unknown path in Anthropic's envelope when the request carries anthropic-version", async () => {
    const res = await fetch(`${sim.url}/v1/nothing`, { headers: { "anthropic-version": "2023-06-01" } });
    expect(res.status).toBe(404);
    expect(res.headers.get("request-id")).toMatch(/^req_/);
    expect(await res.json()).toMatchObject({ type: "error", error: { type: "not_found_error" }, request_id: expect.stringMatching(/^req_/) });
  });
});

