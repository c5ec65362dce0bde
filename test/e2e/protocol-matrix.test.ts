import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY } from "../../local-stack/stack.ts";
import { stringify } from "yaml";
import { ADMIN_TOKEN, allowingSimulators, BACKEND_PROTOCOLS, bundledConfig, DEMO_KEY, expectNothingLeft, perProtocolConfig, type Simulator } from "./support/stack.ts";
import type { RunningGateway } from "../../local-stack/stack.ts";

const BACKENDS = BACKEND_PROTOCOLS;
type Backend = (typeof BACKENDS)[number];
const entry = (b: Backend) => `via-${b}`;

let sim: Simulator;
let gateway: RunningGateway;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  sim = await startSimulatorProcess({ apiKey: SIMULATOR_API_KEY });
  const { backends, publication: pub } = perProtocolConfig(sim.url, ["chat", "streaming", "stream-usage", "tools", "images", "json-schema"], {
    version: "e2e",
    currency: "USD",
    inputPerMTok: 1,
    outputPerMTok: 2,
  });
  pub.tenants[0].apiKeys = pub.tenants[0].apiKeys.filter((k: any) => k.id === "demo");
  // Breakers off: the fault tests below must not trip one and change later answers.
  const gw = allowingSimulators(bundledConfig("gateway"), sim.url);
  gw.breaker = { enabled: false };
  gateway = await startGateway({ adminToken: ADMIN_TOKEN, config: { backends: stringify(backends), publication: stringify(pub), gateway: stringify(gw) } });
  openai = new OpenAI({ apiKey: DEMO_KEY, baseURL: `${gateway.publicUrl}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: DEMO_KEY, baseURL: gateway.publicUrl, maxRetries: 0 });
});
afterAll(async () => {
  try {
    if (gateway) await expectNothingLeft(gateway.adminUrl);
  } finally {
    await Promise.all([gateway?.stop(), sim?.stop()]);
  }
});

const weather = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
const prompt = "Tell me something";

describe.each(BACKENDS.map((b) => ({ backend: b })))("backend speaking $backend", ({ backend }) => {
  const model = entry(backend);

  it("OpenAI Chat client: buffered and streamed text agree, usage present", async () => {
    const res = await openai.chat.completions.create({ model, messages: [{ role: "user", content: prompt }] });
    const text = res.choices[0]?.message.content ?? "";
    expect(text.length).toBeGreaterThan(0);
    expect(res.model).toBe(model);
    expect(res.usage?.completion_tokens).toBeGreaterThan(0);
    let streamed = "";
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of await openai.chat.completions.create({ model, messages: [{ role: "user", content: prompt }], stream: true, stream_options: { include_usage: true } })) {
      streamed += chunk.choices[0]?.delta.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    expect(streamed).toBe(text);
    expect(usage?.completion_tokens).toBe(res.usage?.completion_tokens);
  });

  it("OpenAI Chat client: tool call with streamed argument deltas", async () => {
    const final = await openai.chat.completions
      .stream({ model, messages: [{ role: "user", content: "Weather in Paris?" }], tools: [{ type: "function", function: { name: "get_weather", parameters: weather } }], tool_choice: "required" })
      .finalChatCompletion();
    const call = final.choices[0]?.message.tool_calls?.[0];
    expect(final.choices[0]?.finish_reason).toBe("tool_calls");
    expect(call?.type === "function" && call.function.name).toBe("get_weather");
    expect(call?.type === "function" && Object.keys(JSON.parse(call.function.arguments))).toContain("city");
  });

  it("OpenAI Responses client: buffered, streamed, and a function call", async () => {
    const res = await openai.responses.create({ model, input: prompt, store: false });
    expect(res.output_text.length).toBeGreaterThan(0);
    expect(res.status).toBe("completed");
    expect(res.usage?.output_tokens).toBeGreaterThan(0);
    let streamed = "";
    let completed = false;
    for await (const ev of await openai.responses.create({ model, input: prompt, store: false, stream: true })) {
      if (ev.type === "response.output_text.delta") streamed += ev.delta;
      if (ev.type === "response.completed") completed = true;
    }
    expect(completed).toBe(true);
    expect(streamed).toBe(res.output_text);
    const tool = await openai.responses.create({
      model,
      input: "Weather in Paris?",
      store: false,
      tools: [{ type: "function", name: "get_weather", parameters: weather, strict: false }],
      tool_choice: "required",
    });
    const fc = tool.output.find((o) => o.type === "function_call");
    expect(fc?.type === "function_call" && fc.name).toBe("get_weather");
  });

  it("Anthropic client: buffered, streamed with finalMessage, and tool use", async () => {
    const msg = await anthropic.messages.create({ model, max_tokens: 256, messages: [{ role: "user", content: prompt }] });
    const text = msg.content.map((b) => (b.type === "text" ? b.text : "")).join("");
    expect(text.length).toBeGreaterThan(0);
    expect(msg.stop_reason).toBe("end_turn");
    expect(msg.usage.output_tokens).toBeGreaterThan(0);
    const final = await anthropic.messages.stream({ model, max_tokens: 256, messages: [{ role: "user", content: prompt }] }).finalMessage();
    expect(final.content.map((b) => (b.type === "text" ? b.text : "")).join("")).toBe(text);
    expect(final.usage.output_tokens).toBe(msg.usage.output_tokens);
    const tool = await anthropic.messages
      .stream({
        model,
        max_tokens: 256,
        messages: [{ role: "user", content: "Weather in Paris?" }],
        tools: [{ name: "get_weather", input_schema: weather as Anthropic.Tool.InputSchema }],
        tool_choice: { type: "any" },
      })
      .finalMessage();
    const use = tool.content.find((b) => b.type === "tool_use");
    expect(tool.stop_reason).toBe("tool_use");
    expect(use?.type === "tool_use" && use.name).toBe("get_weather");
    expect(use?.type === "tool_use" && Object.keys(use.input as object)).toContain("city");
  });

  it("a cut stream reaches each client as an error in its protocol", async () => {
    const cut = "cut please [[sim fault=cut-mid-stream cut-after=2]]";
    const drain = async (it: AsyncIterable<unknown>) => {
      for await (const _ of it) {
        // drain
      }
    };
    await expect(drain(await openai.chat.completions.create({ model, stream: true, messages: [{ role: "user", content: cut }] }))).rejects.toThrow();
    await expect(drain(await openai.responses.create({ model, stream: true, store: false, input: cut }))).rejects.toThrow();
    await expect(anthropic.messages.stream({ model, max_tokens: 64, messages: [{ role: "user", content: cut }] }).finalMessage()).rejects.toThrow();
  });
});

const withTopK = (p: Anthropic.MessageCreateParamsNonStreaming) => ({ ...p, top_k: 5 }) as Anthropic.MessageCreateParamsNonStreaming;

describe("capability errors across protocols", () => {
  it("top_k from an Anthropic client to an OpenAI backend is refused, naming top_k", async () => {
    // top_k is no longer in the SDK's types, but older clients still send it; the cast sends it anyway.
    const err = await anthropic.messages.create(withTopK({ model: entry("openai-chat"), max_tokens: 64, messages: [{ role: "user", content: "hi" }] })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect(String((err as Error).message)).toContain("top_k");
  });

  it("the same request reaches an Anthropic backend", async () => {
    const msg = await anthropic.messages.create(withTopK({ model: entry("anthropic-messages"), max_tokens: 64, messages: [{ role: "user", content: "hi" }] }));
    expect(msg.content.length).toBeGreaterThan(0);
  });

  it("Anthropic clients list their models in Anthropic's shape", async () => {
    const page = await anthropic.models.list();
    expect(page.data.map((m) => m.id).sort()).toEqual(BACKENDS.map(entry).sort());
  });
});

describe("bad input gets each protocol's own error envelope", () => {
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${gateway.publicUrl}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

  it("Anthropic: missing max_tokens, bad key, unknown model — Anthropic envelope and SDK error classes", async () => {
    const res = await post("/v1/messages", { model: entry("anthropic-messages"), messages: [{ role: "user", content: "hi" }] }, { "x-api-key": DEMO_KEY, "anthropic-version": "2023-06-01" });
    expect(res.status).toBe(400);
    const body = (await res.json()) as any;
    expect(body.type).toBe("error");
    expect(body.error.type).toBe("invalid_request_error");
    expect(body.error.message).toContain("max_tokens");
    expect(res.headers.get("x-sluice-error-code")).toBe("invalid_request");

    const badKey = new Anthropic({ apiKey: "sk-wrong", baseURL: gateway.publicUrl, maxRetries: 0 });
    expect(await badKey.messages.create({ model: entry("anthropic-messages"), max_tokens: 8, messages: [{ role: "user", content: "hi" }] }).catch((e: unknown) => e)).toBeInstanceOf(
      Anthropic.AuthenticationError,
    );
    const unknown = await anthropic.messages.create({ model: "nope", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(Anthropic.NotFoundError);
  });

  it("Responses: stored-state parameters are refused by name in OpenAI's envelope", async () => {
    const err = await openai.responses.create({ model: entry("openai-chat"), input: "hi", previous_response_id: "resp_123" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("previous_response_id");
    const stored = await openai.responses.create({ model: entry("openai-chat"), input: "hi", store: true }).catch((e: unknown) => e);
    expect((stored as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("store");
  });

  it("malformed JSON on every route answers in that route's envelope", async () => {
    for (const [path, anthropicShape] of [["/v1/chat/completions", false], ["/v1/responses", false], ["/v1/messages", true]] as const) {
      const res = await fetch(`${gateway.publicUrl}${path}`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${DEMO_KEY}` }, body: "{oops" });
      expect(res.status).toBe(400);
      const body = (await res.json()) as any;
      if (anthropicShape) expect(body).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
      else expect(body).toMatchObject({ error: { type: "invalid_request_error", code: "invalid_json" } });
    }
  });

  it("provider errors map to each client's status and envelope", async () => {
    const overloaded = "hi [[sim status=529]]";
    const a = await anthropic.messages.create({ model: entry("anthropic-messages"), max_tokens: 8, messages: [{ role: "user", content: overloaded }] }).catch((e: unknown) => e);
    expect((a as InstanceType<typeof Anthropic.APIError>).status).toBe(503);
    const o = await openai.responses.create({ model: entry("anthropic-messages"), input: overloaded }).catch((e: unknown) => e);
    expect((o as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    const limited = await openai.chat.completions.create({ model: entry("openai-responses"), messages: [{ role: "user", content: "hi [[sim status=429]]" }] }).catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
  });
});
