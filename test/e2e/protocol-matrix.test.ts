import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway } from "../../local-stack/stack.ts";
import { stringify } from "yaml";
import {
  ADMIN_TOKEN,
  allowingSimulators,
  BACKEND_PROTOCOLS,
  bundledConfig,
  DEMO_KEY,
  expectNothingLeft,
  generationCount,
  perProtocolConfig,
  SIM_VERTEX,
  startProtocolSimulator,
  upstreamModel,
  type ProtocolSimulator,
} from "./support/stack.ts";
import type { RunningGateway } from "../../local-stack/stack.ts";

const BACKENDS = BACKEND_PROTOCOLS;
type Backend = (typeof BACKENDS)[number];
const entry = (b: Backend) => `via-${b}`;

let sim: ProtocolSimulator;
let gateway: RunningGateway;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  sim = await startProtocolSimulator();
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
  gateway = await startGateway({ adminToken: ADMIN_TOKEN, secrets: sim.secrets, config: { backends: stringify(backends), publication: stringify(pub), gateway: stringify(gw) } });
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
/** A 1×1 PNG, as the data URL every backend takes, and the web address Bedrock and Gemini cannot. */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const PNG_URL = `data:image/png;base64,${PNG}`;
const WEB_IMAGE = "https://images.example.com/cat.png";
/**
 * Backends that take images only as bytes: a web address is refused with a 400 naming the
 * message. Bedrock has no URL source; Gemini's `fileData` takes only files uploaded to Google (or
 * Cloud Storage on Vertex), and the gateway fetches nothing for a client.
 */
const BYTES_ONLY_IMAGES: ReadonlySet<Backend> = new Set(["bedrock-converse", "gemini"]);
/** The PNG as the wires whose image part is not the client's own shape carry it. */
const IMAGE_PART: Partial<Record<Backend, unknown>> = {
  "bedrock-converse": { image: { format: "png", source: { bytes: PNG } } },
  gemini: { inlineData: { mimeType: "image/png", data: PNG } },
};

const collect = async <T>(it: AsyncIterable<T>): Promise<T[]> => {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
};

/** The last generation request the simulator received, in whatever wire it came. */
async function lastUpstream(): Promise<any> {
  const { requests } = (await (await fetch(`${sim.url}/__sim/requests?limit=20`)).json()) as { requests: any[] };
  return requests.filter((r) => upstreamModel(r) !== undefined).at(-1);
}

/**
 * Every Chat chunk of one answer: one id, the chunk object, the public model name; the role
 * first, exactly one finish reason after every content delta, and (with usage asked for) usage
 * only in a last chunk without choices. Returns the text and the finish reason.
 */
function checkChatFrames(chunks: OpenAI.ChatCompletionChunk[], model: string, withUsage: boolean): { text: string; finish: string } {
  expect(chunks.length).toBeGreaterThan(2);
  const id = chunks[0]!.id;
  expect(id).toMatch(/\S/);
  for (const c of chunks) expect(c).toMatchObject({ id, object: "chat.completion.chunk", model });
  expect(chunks[0]!.choices[0]?.delta.role).toBe("assistant");
  const body = withUsage ? chunks.slice(0, -1) : chunks;
  if (withUsage) {
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage?.total_tokens).toBe((last.usage?.prompt_tokens ?? NaN) + (last.usage?.completion_tokens ?? NaN));
  }
  for (const c of body) {
    expect(c.choices).toHaveLength(1);
    expect(c.choices[0]!.index).toBe(0);
    expect(c.usage ?? null).toBeNull();
  }
  const finishes = body.flatMap((c, i) => (c.choices[0]!.finish_reason ? [i] : []));
  expect(finishes).toEqual([body.length - 1]);
  return { text: body.map((c) => c.choices[0]!.delta.content ?? "").join(""), finish: body.at(-1)!.choices[0]!.finish_reason! };
}

/**
 * Every Responses event of one answer: sequence numbers 0, 1, 2… without a gap; created and
 * in_progress first, completed last; each item added before its deltas and done after them,
 * the done text equal to the deltas joined. Returns the streamed text.
 */
function checkResponsesEvents(events: OpenAI.Responses.ResponseStreamEvent[]): string {
  expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
  expect(events.slice(0, 2).map((e) => e.type)).toEqual(["response.created", "response.in_progress"]);
  expect(events.at(-1)!.type).toBe("response.completed");
  const open = new Set<string>();
  const closed = new Set<string>();
  const text = new Map<string, string>();
  for (const e of events) {
    if (e.type === "response.output_item.added") open.add(e.item.id!);
    if (e.type === "response.output_text.delta" || e.type === "response.function_call_arguments.delta") {
      expect(open.has(e.item_id) && !closed.has(e.item_id)).toBe(true);
      if (e.type === "response.output_text.delta") text.set(e.item_id, (text.get(e.item_id) ?? "") + e.delta);
    }
    if (e.type === "response.output_text.done") expect(e.text).toBe(text.get(e.item_id) ?? "");
    if (e.type === "response.output_item.done") {
      expect(open.has(e.item.id!)).toBe(true);
      closed.add(e.item.id!);
    }
  }
  expect([...open].sort()).toEqual([...closed].sort());
  return [...text.values()].join("");
}

/**
 * Every Anthropic event of one answer: message_start first, then content blocks one at a time
 * (start, deltas of its index, stop; indices 0, 1, 2…), message_delta with the stop reason and
 * message_stop last; pings anywhere between. Returns the text and the stop reason.
 */
function checkAnthropicEvents(events: Anthropic.RawMessageStreamEvent[]): { text: string; stop: string | null } {
  const real = events.filter((e) => (e.type as string) !== "ping");
  expect(real[0]!.type).toBe("message_start");
  expect(real.at(-1)!.type).toBe("message_stop");
  const delta = real.at(-2)!;
  expect(delta.type).toBe("message_delta");
  let current = -1;
  let next = 0;
  let text = "";
  for (const e of real.slice(1, -2)) {
    if (e.type === "content_block_start") {
      expect(current).toBe(-1);
      expect(e.index).toBe(next);
      current = next++;
    } else if (e.type === "content_block_delta") {
      expect(e.index).toBe(current);
      if (e.delta.type === "text_delta") text += e.delta.text;
    } else if (e.type === "content_block_stop") {
      expect(e.index).toBe(current);
      current = -1;
    } else throw new Error(`unexpected ${e.type} inside the message`);
  }
  expect(current).toBe(-1);
  expect(next).toBeGreaterThan(0);
  return { text, stop: delta.type === "message_delta" ? delta.delta.stop_reason : null };
}

describe.each(BACKENDS.map((b) => ({ backend: b })))("backend speaking $backend", ({ backend }) => {
  const model = entry(backend);

  it("OpenAI Chat client: buffered and streamed text agree, usage present, every chunk checked", async () => {
    const res = await openai.chat.completions.create({ model, messages: [{ role: "user", content: prompt }] });
    const text = res.choices[0]?.message.content ?? "";
    expect(text.length).toBeGreaterThan(0);
    expect(res.model).toBe(model);
    expect(res.choices[0]?.finish_reason).toBe("stop");
    expect(res.usage?.completion_tokens).toBeGreaterThan(0);
    const chunks = await collect(await openai.chat.completions.create({ model, messages: [{ role: "user", content: prompt }], stream: true, stream_options: { include_usage: true } }));
    const streamed = checkChatFrames(chunks, model, true);
    expect(streamed).toEqual({ text, finish: "stop" });
    expect(chunks.at(-1)!.usage).toMatchObject({ prompt_tokens: res.usage!.prompt_tokens, completion_tokens: res.usage!.completion_tokens });
  });

  it("OpenAI Chat client: tool call, buffered and with streamed argument deltas", async () => {
    const tools: OpenAI.ChatCompletionTool[] = [{ type: "function", function: { name: "get_weather", parameters: weather } }];
    const buffered = await openai.chat.completions.create({ model, messages: [{ role: "user", content: "Weather in Paris?" }], tools, tool_choice: "required" });
    expect(buffered.choices[0]?.finish_reason).toBe("tool_calls");
    const runner = openai.chat.completions.stream({ model, messages: [{ role: "user", content: "Weather in Paris?" }], tools, tool_choice: "required" });
    const chunks = await collect(runner);
    expect(checkChatFrames(chunks, model, false).finish).toBe("tool_calls");
    // The name comes once, in the first piece; the arguments in pieces after it.
    const pieces = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    expect(pieces[0]).toMatchObject({ index: 0, type: "function", function: { name: "get_weather" } });
    expect(pieces[0]!.id).toMatch(/\S/);
    for (const p of pieces.slice(1)) expect(p.function?.name).toBeUndefined();
    const final = await runner.finalChatCompletion();
    const call = final.choices[0]?.message.tool_calls?.[0];
    expect(call?.type === "function" && call.function.name).toBe("get_weather");
    expect(call?.type === "function" && JSON.parse(call.function.arguments)).toEqual(
      JSON.parse(buffered.choices[0]!.message.tool_calls![0]!.type === "function" ? buffered.choices[0]!.message.tool_calls![0]!.function.arguments : "null"),
    );
    expect(call?.type === "function" && Object.keys(JSON.parse(call.function.arguments))).toContain("city");
  });

  it("OpenAI Responses client: buffered, streamed (every event checked), and a function call", async () => {
    const res = await openai.responses.create({ model, input: prompt, store: false });
    expect(res.output_text.length).toBeGreaterThan(0);
    expect(res.status).toBe("completed");
    expect(res.usage?.output_tokens).toBeGreaterThan(0);
    const events = await collect(await openai.responses.create({ model, input: prompt, store: false, stream: true }));
    expect(checkResponsesEvents(events)).toBe(res.output_text);
    const completed = events.at(-1)!;
    expect(completed.type === "response.completed" && completed.response.usage?.output_tokens).toBe(res.usage!.output_tokens);
    const request = {
      model,
      input: "Weather in Paris?",
      store: false,
      tools: [{ type: "function" as const, name: "get_weather", parameters: weather, strict: false }],
      tool_choice: "required" as const,
    };
    const tool = await openai.responses.create(request);
    const fc = tool.output.find((o) => o.type === "function_call");
    expect(fc?.type === "function_call" && fc.name).toBe("get_weather");
    const toolEvents = await collect(await openai.responses.create({ ...request, stream: true }));
    checkResponsesEvents(toolEvents);
    const done = toolEvents.find((e) => e.type === "response.function_call_arguments.done");
    expect(done?.type === "response.function_call_arguments.done" && JSON.parse(done.arguments)).toEqual(fc?.type === "function_call" ? JSON.parse(fc.arguments) : null);
  });

  it("Anthropic client: buffered, streamed (every event checked) with finalMessage, and tool use", async () => {
    const msg = await anthropic.messages.create({ model, max_tokens: 256, messages: [{ role: "user", content: prompt }] });
    const text = msg.content.map((b) => (b.type === "text" ? b.text : "")).join("");
    expect(text.length).toBeGreaterThan(0);
    expect(msg.stop_reason).toBe("end_turn");
    expect(msg.usage.output_tokens).toBeGreaterThan(0);
    const events = await collect(await anthropic.messages.create({ model, max_tokens: 256, messages: [{ role: "user", content: prompt }], stream: true }));
    expect(checkAnthropicEvents(events)).toEqual({ text, stop: "end_turn" });
    const final = await anthropic.messages.stream({ model, max_tokens: 256, messages: [{ role: "user", content: prompt }] }).finalMessage();
    expect(final.content.map((b) => (b.type === "text" ? b.text : "")).join("")).toBe(text);
    expect(final.usage.output_tokens).toBe(msg.usage.output_tokens);
    const toolRequest = {
      model,
      max_tokens: 256,
      messages: [{ role: "user" as const, content: "Weather in Paris?" }],
      tools: [{ name: "get_weather", input_schema: weather as Anthropic.Tool.InputSchema }],
      tool_choice: { type: "any" as const },
    };
    const toolEvents = await collect(await anthropic.messages.create({ ...toolRequest, stream: true }));
    expect(checkAnthropicEvents(toolEvents).stop).toBe("tool_use");
    const tool = await anthropic.messages.stream(toolRequest).finalMessage();
    const use = tool.content.find((b) => b.type === "tool_use");
    expect(tool.stop_reason).toBe("tool_use");
    expect(use?.type === "tool_use" && use.name).toBe("get_weather");
    expect(use?.type === "tool_use" && Object.keys(use.input as object)).toContain("city");
  });

  it("an image as a data URL reaches the backend from every client, in its wire's own form", async () => {
    const chat = await openai.chat.completions.create({
      model,
      messages: [{ role: "user", content: [{ type: "text", text: "What is this?" }, { type: "image_url", image_url: { url: PNG_URL } }] }],
    });
    expect(chat.choices[0]!.message.content).toMatch(/\S/);
    const seen = JSON.stringify((await lastUpstream()).body);
    expect(seen).toContain(PNG);
    if (IMAGE_PART[backend] !== undefined) expect(seen).toContain(JSON.stringify(IMAGE_PART[backend]));
    // An image part counts 85 prompt tokens in the simulator, whichever wire carried it.
    const textOnly = await openai.chat.completions.create({ model, messages: [{ role: "user", content: [{ type: "text", text: "What is this?" }] }] });
    expect(chat.usage!.prompt_tokens - textOnly.usage!.prompt_tokens).toBe(85);

    const responses = await openai.responses.create({
      model,
      store: false,
      input: [{ role: "user", content: [{ type: "input_text", text: "What is this?" }, { type: "input_image", image_url: PNG_URL, detail: "auto" }] }],
    });
    expect(responses.output_text).toMatch(/\S/);
    expect(JSON.stringify((await lastUpstream()).body)).toContain(PNG);
    expect(responses.usage!.input_tokens).toBe(chat.usage!.prompt_tokens);

    const message = await anthropic.messages.create({
      model,
      max_tokens: 64,
      messages: [{ role: "user", content: [{ type: "text", text: "What is this?" }, { type: "image", source: { type: "base64", media_type: "image/png", data: PNG } }] }],
    });
    expect(message.content[0]).toMatchObject({ type: "text" });
    expect(JSON.stringify((await lastUpstream()).body)).toContain(PNG);
  });

  if (BYTES_ONLY_IMAGES.has(backend)) {
    it("an image at a web address is refused from every client with a 400 naming the message, and nothing is sent", async () => {
      const before = await generationCount(sim);
      const errors = [
        await openai.chat.completions.create({ model, messages: [{ role: "user", content: [{ type: "text", text: "What is this?" }, { type: "image_url", image_url: { url: WEB_IMAGE } }] }] }).catch((e: unknown) => e),
        await openai.responses.create({ model, store: false, input: [{ role: "user", content: [{ type: "input_text", text: "What is this?" }, { type: "input_image", image_url: WEB_IMAGE, detail: "auto" }] }] }).catch((e: unknown) => e),
        await anthropic.messages
          .create({ model, max_tokens: 64, messages: [{ role: "user", content: [{ type: "text", text: "What is this?" }, { type: "image", source: { type: "url", url: WEB_IMAGE } }] }] })
          .catch((e: unknown) => e),
      ];
      expect(errors[0]).toBeInstanceOf(OpenAI.BadRequestError);
      expect(errors[1]).toBeInstanceOf(OpenAI.BadRequestError);
      expect(errors[2]).toBeInstanceOf(Anthropic.BadRequestError);
      for (const e of errors as Error[]) {
        expect(e.message).toContain("messages[0]");
        expect(e.message).toContain("base64 data URLs");
      }
      expect((errors[0] as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("messages[0]");
      expect(await generationCount(sim)).toBe(before);
    });
  } else {
    it("an image at a web address reaches the backend by reference", async () => {
      const chat = await openai.chat.completions.create({ model, messages: [{ role: "user", content: [{ type: "text", text: "What is this?" }, { type: "image_url", image_url: { url: WEB_IMAGE } }] }] });
      expect(chat.choices[0]!.message.content).toMatch(/\S/);
      expect(JSON.stringify((await lastUpstream()).body)).toContain(WEB_IMAGE);
      const message = await anthropic.messages.create({ model, max_tokens: 64, messages: [{ role: "user", content: [{ type: "text", text: "What is this?" }, { type: "image", source: { type: "url", url: WEB_IMAGE } }] }] });
      expect(message.content[0]).toMatchObject({ type: "text" });
      expect(JSON.stringify((await lastUpstream()).body)).toContain(WEB_IMAGE);
    });
  }

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

describe("the Vertex backend's credential across the matrix", () => {
  it("every call above carried a bearer token the gateway minted from the service account, minted once", async () => {
    const { granted } = (await (await fetch(`${sim.url}/__sim/google-token`)).json()) as { granted: number };
    expect(granted).toBe(1);
    const { requests } = (await (await fetch(`${sim.url}/__sim/requests`)).json()) as { requests: { path: string; headers: Record<string, string>; body: unknown }[] };
    const vertex = requests.filter((r) => r.path.startsWith(`/v1/projects/${SIM_VERTEX.project}/locations/${SIM_VERTEX.location}/`));
    expect(vertex.length).toBeGreaterThan(0);
    expect(new Set(vertex.map((r) => r.headers.authorization)).size).toBe(1);
    expect(vertex[0]!.headers.authorization).toMatch(/^Bearer ya29\.sim-/);
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
