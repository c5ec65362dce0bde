/**
 * Workers AI backends through a fake binding, on the real engine: every client protocol reaches
 * the binding through the neutral codec, buffered and streamed, chat and embeddings; what the
 * binding answers or throws becomes the attempt's evidence, the client's error and the records.
 * The fake records each `run(model, inputs, options)` and answers as the real binding does with
 * `returnRawResponse` (a `Response` of any status), or with its plain outputs (an object, an SSE
 * `ReadableStream`), or throws.
 */
import { describe, expect, it } from "vitest";
import type { Reply } from "../../../src/kinds/model/model-api.ts";
import type { WorkersAiBinding, WorkersAiRunOptions } from "../../../src/invoker/workers-ai-binding.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { normalizeSnapshot } from "../../../src/snapshot/normalize.ts";
import { pinSnapshot, type PinnedSnapshot } from "../../../src/snapshot/pinned-snapshot.ts";
import { chat, engineHarness } from "../support/engine-harness.ts";
import { LOOPBACK_EGRESS, publication } from "../support/executor-harness.ts";
import { parseClientSse } from "../protocol/sse-helpers.ts";

const SMALL = "@cf/meta/llama-3.1-8b-instruct";
const LARGE = "@cf/meta/llama-3.3-70b-instruct-fp8-fast";
const EMBED = "@cf/baai/bge-base-en-v1.5";

interface Call {
  readonly model: string;
  readonly inputs: Record<string, any>;
  readonly options: WorkersAiRunOptions;
}

/** A binding that records every call and answers with what `answer` returns (or throws). */
function fakeAi(answer: (call: Call, n: number) => unknown) {
  const calls: Call[] = [];
  const binding: WorkersAiBinding = {
    run: async (model, inputs, options) => {
      const call = { model, inputs: structuredClone(inputs), options };
      calls.push(call);
      return answer(call, calls.length);
    },
  };
  return { binding, calls };
}

/**
 * The bundled pools on one Workers AI backend reached through binding `AI` (moderations, which
 * Workers AI does not serve, on an HTTP backend these tests never call).
 */
async function workersAiSnapshot(): Promise<PinnedSnapshot> {
  const src = {
    version: 1,
    backends: [
      { name: "workers-ai", protocol: "workers-ai", binding: "AI", capabilities: ["chat", "streaming", "stream-usage", "tools", "images", "json-schema", "embeddings"] },
      { name: "moderation", protocol: "openai-chat", baseUrl: "http://127.0.0.1:9/v1", capabilities: ["chat", "streaming", "stream-usage", "logprobs", "moderations"] },
    ],
    pools: [
      { name: "sim-small", members: [{ backend: "workers-ai", model: SMALL }] },
      { name: "sim-large", members: [{ backend: "workers-ai", model: LARGE }] },
      { name: "sim-embed", members: [{ backend: "workers-ai", model: EMBED }] },
      { name: "sim-moderate", members: [{ backend: "moderation", model: "moderate-upstream" }] },
      // The bundled cascade's pools, whose models require logprobs (Workers AI has none): never called here.
      { name: "sim-small-scored", members: [{ backend: "moderation", model: "s" }] },
      { name: "sim-large-scored", members: [{ backend: "moderation", model: "l" }] },
    ],
  };
  const r = await normalizeSnapshot(src, { supportedProtocols: builtinCodecs.ids(), logprobsProtocols: builtinCodecs.logprobsIds(), requirements: publication.poolRequirements, egress: LOOPBACK_EGRESS });
  if (!r.ok) throw new Error(JSON.stringify(r.reasons));
  return pinSnapshot({ revision: 1, digest: r.digest, snapshot: r.snapshot });
}

function harness(answer: (call: Call, n: number) => unknown, executor: Record<string, unknown> = {}) {
  const ai = fakeAi(answer);
  const h = engineHarness({ snapshot: workersAiSnapshot, executor: { bindings: (name) => (name === "AI" ? ai.binding : undefined), ...executor } });
  return { ...h, ai };
}

type Harness = ReturnType<typeof harness>;

async function send(h: Harness, body: unknown, over: Parameters<Harness["ingress"]>[1] = {}): Promise<Reply> {
  const s = h.engine.begin(h.ingress(body, over));
  const prepared = await s.prepare();
  if (prepared.kind !== "dispatch") throw new Error(`expected dispatch, got ${prepared.error.code}`);
  return s.dispatch();
}

async function readAll(body: ReadableStream<Uint8Array>): Promise<string> {
  let text = "";
  const utf8 = new TextDecoder();
  for await (const chunk of body) text += utf8.decode(chunk, { stream: true });
  return text + utf8.decode();
}

/** Polls (one macrotask at a time) until the condition holds. */
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !cond(); i++) await new Promise((r) => setTimeout(r, 0));
  expect(cond()).toBe(true);
}

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
/** The service's error answer as the binding hands it back raw: a status and `{internalCode, …}`. */
const serviceError = (status: number, internalCode: number, description: string) => json({ internalCode, name: "AiError", message: description, description }, status);

/** SSE bytes cut into pieces at the given byte lengths (inside characters and `data:` lines). */
function chunked(text: string, sizes: readonly number[]): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  const pieces: Uint8Array[] = [];
  let i = 0;
  for (let k = 0; i < bytes.length; k++) {
    const n = sizes[k % sizes.length]!;
    pieces.push(bytes.slice(i, i + n));
    i += n;
  }
  return new ReadableStream({
    pull(c) {
      const next = pieces.shift();
      if (next === undefined) c.close();
      else c.enqueue(next);
    },
  });
}
const sse = (...events: readonly unknown[]) => events.map((e) => `data: ${typeof e === "string" ? e : JSON.stringify(e)}\n\n`).join("");

describe("chat through a Workers AI binding", () => {
  it("runs the member's model with scoped-prompt inputs and the raw-response option, and answers an OpenAI client with the provider's usage", async () => {
    const h = harness(() => json({ response: "Hello from the edge!", usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 } }));
    const reply = await send(h, chat("Hello", { max_tokens: 64, temperature: 0.2, messages: [{ role: "system", content: "Be kind." }, { role: "user", content: "Hello" }] }));
    expect(reply.kind).toBe("buffered");
    expect(reply.kind === "buffered" && reply.body).toMatchObject({
      object: "chat.completion",
      model: "sluice-chat",
      choices: [{ message: { role: "assistant", content: "Hello from the edge!" }, finish_reason: "stop" }],
      usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 },
    });
    expect(h.ai.calls).toHaveLength(1);
    const call = h.ai.calls[0]!;
    expect(call.model).toBe(SMALL);
    expect(call.inputs).toEqual({ messages: [{ role: "system", content: "Be kind." }, { role: "user", content: "Hello" }], max_tokens: 64, temperature: 0.2 });
    expect(call.options.returnRawResponse).toBe(true);
    expect(call.options.signal).toBeInstanceOf(AbortSignal);
    expect(h.seen).toEqual([]);
    await h.settled();
    expect(h.attempts[0]).toMatchObject({ backendProtocol: "workers-ai", upstreamModel: SMALL, outcome: "success", status: 200, usage: { inputTokens: 12, outputTokens: 5, source: "provider" }, evidence: { class: "success" } });
    expect(h.requests[0]).toMatchObject({ outcome: "success" });
  });

  it("answers an Anthropic client, with the older tool call shape, from a binding that returns plain outputs", async () => {
    const h = harness(() => ({ response: "", tool_calls: [{ name: "weather", arguments: { city: "Paris" } }], usage: { prompt_tokens: 30, completion_tokens: 9, total_tokens: 39 } }));
    const body = {
      model: "sluice-chat",
      max_tokens: 100,
      messages: [{ role: "user", content: "Weather in Paris?" }],
      tools: [{ name: "weather", description: "Current weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }],
    };
    const reply = await send(h, body, { protocol: "anthropic-messages" });
    expect(reply.kind === "buffered" && reply.body).toMatchObject({
      type: "message",
      role: "assistant",
      stop_reason: "tool_use",
      content: [{ type: "tool_use", name: "weather", input: { city: "Paris" } }],
      usage: { input_tokens: 30, output_tokens: 9 },
    });
    // The tools went as OpenAI functions.
    expect(h.ai.calls[0]!.model).toBe(SMALL);
    expect(h.ai.calls[0]!.inputs.tools).toEqual([{ type: "function", function: { name: "weather", description: "Current weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }]);
  });

  it("streams to an OpenAI client however the binding's bytes are cut, with the usage of the last piece", async () => {
    const text = sse({ response: "héllo " }, { response: "日本 🙂" }, { response: "", usage: { prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 } }, "[DONE]");
    // 1, 2 and 3 bytes at a time: every multi-byte character and every `data:` line is cut somewhere.
    const h = harness(() => new Response(chunked(text, [1, 2, 3, 5]), { headers: { "content-type": "text/event-stream" } }));
    const reply = await send(h, chat("hi", { stream: true, stream_options: { include_usage: true } }));
    if (reply.kind !== "stream") throw new Error(`expected a stream, got ${reply.kind}`);
    const events = parseClientSse(await readAll(reply.body));
    const chunks = events.flatMap((e) => (e.kind === "json" ? [e.value as any] : []));
    expect(chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("")).toBe("héllo 日本 🙂");
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 4 } });
    expect(events.at(-1)).toEqual({ kind: "done" });
    expect(h.ai.calls[0]!.inputs.stream).toBe(true);
    await h.settled();
    expect(h.attempts[0]).toMatchObject({ outcome: "success", usage: { inputTokens: 9, outputTokens: 4, source: "provider" } });
  });

  it("streams to an Anthropic client from a binding that returns the bare SSE stream", async () => {
    const h = harness(() => chunked(sse({ response: "Bonjour" }, { response: "", usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } }, "[DONE]"), [7]));
    const reply = await send(h, { model: "sluice-chat", max_tokens: 50, stream: true, messages: [{ role: "user", content: "hi" }] }, { protocol: "anthropic-messages" });
    if (reply.kind !== "stream") throw new Error(`expected a stream, got ${reply.kind}`);
    const text = await readAll(reply.body);
    expect(text).toContain('"text":"Bonjour"');
    expect(text).toContain("event: message_stop");
    expect(text).toMatch(/"output_tokens":1/);
  });

  it("ends a stream the binding cut with an error event and no [DONE], and records the cut", async () => {
    const h = harness(() => new Response(chunked(sse({ response: "half an ans" }), [4]), { headers: { "content-type": "text/event-stream" } }));
    const reply = await send(h, chat("hi", { stream: true }));
    if (reply.kind !== "stream") throw new Error(`expected a stream, got ${reply.kind}`);
    const events = parseClientSse(await readAll(reply.body));
    expect(events.at(-1)).toMatchObject({ kind: "json", value: { error: { code: "upstream_stream_cut" } } });
    expect(events.some((e) => e.kind === "done")).toBe(false);
    await h.settled();
    expect(h.attempts[0]).toMatchObject({ outcome: "stream_cut" });
  });

  it("streams tool calls to an OpenAI client", async () => {
    const h = harness(() =>
      chunked(
        sse(
          { response: "", tool_calls: [{ index: 0, id: "call_w", type: "function", function: { name: "weather" } }] },
          { tool_calls: [{ index: 0, function: { arguments: '{"city":"Paris"}' } }] },
          { response: "", usage: { prompt_tokens: 20, completion_tokens: 8, total_tokens: 28 } },
          "[DONE]",
        ),
        [11],
      ),
    );
    const tools = [{ type: "function", function: { name: "weather", parameters: { type: "object" } } }];
    const reply = await send(h, chat("weather?", { stream: true, tools }));
    if (reply.kind !== "stream") throw new Error(`expected a stream, got ${reply.kind}`);
    const chunks = parseClientSse(await readAll(reply.body)).flatMap((e) => (e.kind === "json" ? [e.value as any] : []));
    const calls = chunks.flatMap((c) => c.choices?.[0]?.delta?.tool_calls ?? []);
    expect(calls[0]).toMatchObject({ index: 0, id: "call_w", function: { name: "weather" } });
    expect(calls.map((c: any) => c.function?.arguments ?? "").join("")).toBe('{"city":"Paris"}');
    expect(chunks.find((c) => c.choices?.[0]?.finish_reason)?.choices[0].finish_reason).toBe("tool_calls");
  });

  it("refuses, naming the client's field, a feature the inputs have no field for, before anything is sent", async () => {
    const h = harness(() => json({ response: "never" }));
    const reply = await send(h, chat("hi", { stop: ["END"] }));
    expect(reply).toMatchObject({ kind: "error", error: { code: "invalid_request", param: "stop" } });
    expect(h.ai.calls).toEqual([]);
  });
});

describe("embeddings through a Workers AI binding", () => {
  const embed = (input: unknown, extra: Record<string, unknown> = {}) => ({ model: "sluice-embed", input, ...extra });

  it("embeds one input: text as a string, the vector back as the client asked", async () => {
    const h = harness(() => json({ shape: [1, 3], data: [[0.5, -0.25, 1]], pooling: "mean" }));
    const reply = await send(h, embed("The quick brown fox", { encoding_format: "float" }), { operation: "embeddings" });
    expect(reply.kind === "buffered" && reply.body).toMatchObject({ object: "list", model: "sluice-embed", data: [{ object: "embedding", index: 0, embedding: [0.5, -0.25, 1] }] });
    expect(h.ai.calls[0]).toMatchObject({ model: EMBED, inputs: { text: "The quick brown fox" }, options: { returnRawResponse: true } });
    await h.settled();
    // Workers AI's embedding models report no usage: unknown, never zero.
    expect(h.attempts[0]).toMatchObject({ outcome: "success", backendProtocol: "workers-ai" });
    expect(h.attempts[0]!.usage).toBeUndefined();
  });

  it("embeds a batch in one call, vectors in input order", async () => {
    const h = harness((call) => {
      const texts = call.inputs.text as string[];
      return { shape: [texts.length, 2], data: texts.map((t, i) => [t.length, i]) };
    });
    const reply = await send(h, embed(["a", "bb", "ccc"], { encoding_format: "float" }), { operation: "embeddings" });
    expect(h.ai.calls).toHaveLength(1);
    expect(h.ai.calls[0]!.inputs).toEqual({ text: ["a", "bb", "ccc"] });
    expect(reply.kind === "buffered" && (reply.body as any).data.map((d: any) => d.embedding)).toEqual([[1, 0], [2, 1], [3, 2]]);
  });

  it("refuses a shortened size before anything is sent, and a wrong count of vectors as unreadable", async () => {
    const h = harness(() => json({ shape: [1, 2], data: [[1, 2]] }));
    expect(await send(h, embed("x", { dimensions: 64 }), { operation: "embeddings" })).toMatchObject({ kind: "error", error: { code: "invalid_request", param: "dimensions" } });
    expect(h.ai.calls).toEqual([]);
    expect(await send(h, embed(["x", "y"]), { operation: "embeddings" })).toMatchObject({ kind: "error", error: { code: "upstream_protocol_error" } });
    await h.settled();
    expect(h.attempts.at(-1)).toMatchObject({ outcome: "protocol_error", evidence: { class: "unknown", reason: "protocol_error" } });
  });
});

describe("what a Workers AI binding's failure means", () => {
  it("a 429 out-of-capacity (3040) is a refusal before any work: the next tier's model is tried", async () => {
    const h = harness((call) => (call.model === SMALL ? serviceError(429, 3040, "Capacity temporarily exceeded, please try again.") : json({ response: "from the large model" })));
    const reply = await send(h, chat("hi"));
    expect(reply.kind === "buffered" && (reply.body as any).choices[0].message.content).toBe("from the large model");
    expect(h.ai.calls.map((c) => c.model)).toEqual([SMALL, LARGE]);
    await h.settled();
    expect(h.attempts[0]).toMatchObject({ outcome: "upstream_status", status: 429, errorCode: "upstream_rate_limited", evidence: { class: "known_zero", reason: "rejected_before_processing", status: 429 } });
    expect(h.attempts[1]).toMatchObject({ outcome: "success" });
  });

  it("a 429 every time (3036, the daily allocation) reaches the client as upstream_rate_limited after the attempts allowed", async () => {
    const h = harness(() => serviceError(429, 3036, "You have used up your daily free allocation of 10,000 neurons."));
    const reply = await send(h, chat("hi"));
    expect(reply).toMatchObject({ kind: "error", error: { code: "upstream_rate_limited", status: 429, retryAfterSeconds: 1 } });
    // sluice-chat allows 3 attempts in all.
    expect(h.ai.calls).toHaveLength(3);
  });

  it("a 408 (3007, the service's own inference timeout) is a timeout after acceptance: unknown, not retried, a failure for the breaker", async () => {
    const h = harness(() => serviceError(408, 3007, "Request timeout"));
    const reply = await send(h, chat("hi"));
    expect(reply).toMatchObject({ kind: "error", error: { code: "upstream_timeout", status: 504 } });
    expect(h.ai.calls).toHaveLength(1);
    await h.settled();
    expect(h.attempts[0]).toMatchObject({ outcome: "timeout", status: 408, errorCode: "upstream_timeout", evidence: { class: "unknown", reason: "status_after_acceptance", status: 408 } });
  });

  it.each([
    [400, 5007, "invalid_request", "client_error"],
    [413, 3006, "request_too_large", "client_error"],
    [403, 3023, "upstream_auth_failed", "client_error"],
    [500, 0, "upstream_error", "unknown"],
    [503, 0, "upstream_overloaded", "unknown"],
  ])("a %i (%i) is %s with %s evidence, never retried", async (status, internal, code, evidence) => {
    const h = harness(() => serviceError(status, internal, "failed"));
    const reply = await send(h, chat("hi"));
    expect(reply).toMatchObject({ kind: "error", error: { code } });
    expect(h.ai.calls).toHaveLength(1);
    await h.settled();
    expect(h.attempts[0]).toMatchObject({ outcome: "upstream_status", status, evidence: { class: evidence, status } });
  });

  it("a binding that throws may have reached the service: unknown evidence, never retried, upstream_unreachable", async () => {
    const h = harness(() => {
      throw Object.assign(new Error("3040: Capacity temporarily exceeded"), { name: "InferenceUpstreamError" });
    });
    const reply = await send(h, chat("hi"));
    expect(reply).toMatchObject({ kind: "error", error: { code: "upstream_unreachable", status: 502 } });
    expect(h.ai.calls).toHaveLength(1);
    await h.settled();
    expect(h.attempts[0]).toMatchObject({ outcome: "network_error", evidence: { class: "unknown", reason: "network_error" } });
  });

  it("a binding the Worker lacks is a configuration fault: nothing sent (known-zero), 500 once no candidate is left", async () => {
    const h = harness(() => json({ response: "never" }), { bindings: () => undefined });
    const reply = await send(h, chat("hi"));
    expect(reply).toMatchObject({ kind: "error", error: { code: "internal_error", status: 500 } });
    await h.settled();
    expect(h.attempts.length).toBeGreaterThan(0);
    for (const a of h.attempts) expect(a).toMatchObject({ outcome: "connect_failed", evidence: { class: "known_zero", reason: "not_attempted" } });
  });

  it("a binding that never answers is cut by the first-byte limit, its signal aborted, and not waited for", async () => {
    const h = harness(() => new Promise(() => {}), { firstByteTimeoutMs: 1_000 });
    const s = h.engine.begin(h.ingress(chat("hi")));
    await s.prepare();
    const reply = s.dispatch();
    await until(() => h.ai.calls.length === 1);
    h.timers.advance(1_000);
    expect(await reply).toMatchObject({ kind: "error", error: { code: "upstream_timeout", status: 504 } });
    expect(h.ai.calls[0]!.options.signal.aborted).toBe(true);
    await h.settled();
    expect(h.attempts[0]).toMatchObject({ outcome: "timeout", evidence: { class: "unknown", reason: "timeout" } });
  });

  it("a client that leaves aborts the binding's call and the request ends", async () => {
    const h = harness(() => new Promise(() => {}));
    const s = h.engine.begin(h.ingress(chat("hi")));
    await s.prepare();
    const reply = s.dispatch();
    await until(() => h.ai.calls.length === 1);
    s.abort("client_disconnected");
    expect(await reply).toMatchObject({ kind: "error", error: { code: "client_closed" } });
    expect(h.ai.calls[0]!.options.signal.aborted).toBe(true);
    await h.settled();
    expect(h.requests[0]).toMatchObject({ outcome: "cancelled" });
    expect(h.admission.stats().inFlight.global).toBe(0);
  });
});
