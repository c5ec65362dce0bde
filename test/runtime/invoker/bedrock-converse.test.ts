/**
 * Bedrock backends on the real engine over a fake fetch: each request is signed over exactly the
 * bytes sent, the event stream reaches the client's protocol however its bytes are cut, and
 * Bedrock's errors (named in x-amzn-errortype) and a missing key give their evidence.
 */
import { describe, expect, it } from "vitest";
import type { Reply } from "../../../src/kinds/model/model-api.ts";
import { signSigV4 } from "../../../src/invoker/auth/aws-sigv4.ts";
import { encodeEventStreamMessage } from "../../../src/protocol/bedrock-converse/event-stream.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { normalizeSnapshot } from "../../../src/snapshot/normalize.ts";
import { pinSnapshot, type PinnedSnapshot } from "../../../src/snapshot/pinned-snapshot.ts";
import { chat, engineHarness } from "../support/engine-harness.ts";
import { LOOPBACK_EGRESS, publication } from "../support/executor-harness.ts";
import { parseClientSse } from "../protocol/sse-helpers.ts";

const SMALL = "anthropic.claude-3-5-haiku-20241022-v1:0";
const LARGE = "meta.llama3-70b-instruct-v1:0";
const SECRETS: Record<string, string> = { KEY_ID: "AKIAENGINETEST000001", SECRET: "engine/secret", TOKEN: "session-token" };

/** What the fake fetch saw: the URL, the headers and the exact body bytes. */
interface Sent {
  readonly url: string;
  readonly headers: Headers;
  readonly body: Uint8Array;
}

async function bedrockSnapshot(smallSecret = "SECRET"): Promise<PinnedSnapshot> {
  const bedrock = (name: string, secretAccessKey: string) => ({
    name,
    protocol: "bedrock-converse",
    baseUrl: `http://127.0.0.1:9/${name}`,
    region: "eu-west-1",
    awsCredential: { accessKeyId: "KEY_ID", secretAccessKey, sessionToken: "TOKEN" },
    capabilities: ["chat", "streaming", "stream-usage", "tools"],
  });
  const src = {
    version: 1,
    backends: [
      bedrock("small", smallSecret),
      bedrock("large", "SECRET"),
      { name: "other", protocol: "openai-chat", baseUrl: "http://127.0.0.1:9/v1", capabilities: ["chat", "streaming", "stream-usage", "logprobs", "embeddings", "moderations"] },
    ],
    pools: [
      { name: "sim-small", members: [{ backend: "small", model: SMALL }] },
      { name: "sim-large", members: [{ backend: "large", model: LARGE }] },
      { name: "sim-embed", members: [{ backend: "other", model: "e" }] },
      { name: "sim-moderate", members: [{ backend: "other", model: "m" }] },
      // The bundled cascade's pools, whose models require logprobs: never called here.
      { name: "sim-small-scored", members: [{ backend: "other", model: "s" }] },
      { name: "sim-large-scored", members: [{ backend: "other", model: "l" }] },
    ],
  };
  const r = await normalizeSnapshot(src, { supportedProtocols: builtinCodecs.ids(), logprobsProtocols: builtinCodecs.logprobsIds(), requirements: publication.poolRequirements, egress: LOOPBACK_EGRESS });
  if (!r.ok) throw new Error(JSON.stringify(r.reasons));
  return pinSnapshot({ revision: 1, digest: r.digest, snapshot: r.snapshot });
}

function harness(answer: (sent: Sent, n: number) => Response, smallSecret?: string) {
  const sent: Sent[] = [];
  const h = engineHarness({
    snapshot: () => bedrockSnapshot(smallSecret),
    executor: {
      credentials: { get: (name) => SECRETS[name] },
      fetch: async (input, init) => {
        const s = { url: String(input), headers: new Headers(init?.headers), body: new TextEncoder().encode(String(init?.body)) };
        sent.push(s);
        return answer(s, sent.length);
      },
    },
  });
  return { ...h, sent };
}

async function send(h: ReturnType<typeof harness>, body: unknown, over: Parameters<ReturnType<typeof harness>["ingress"]>[1] = {}): Promise<Reply> {
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

const enc = new TextEncoder();
/** `YYYYMMDDTHHMMSSZ` back to a date. */
const fromAmzDate = (d: string) => new Date(`${d.slice(0, 4)}-${d.slice(4, 6)}-${d.slice(6, 8)}T${d.slice(9, 11)}:${d.slice(11, 13)}:${d.slice(13, 15)}Z`);
const converse = (text: string) =>
  Response.json({ output: { message: { role: "assistant", content: [{ text }] } }, stopReason: "end_turn", usage: { inputTokens: 7, outputTokens: 2, totalTokens: 9 } });
const bedrockError = (status: number, type: string) => new Response(JSON.stringify({ message: "no" }), { status, headers: { "content-type": "application/json", "x-amzn-errortype": `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/` } });
const event = (type: string, body: unknown) => encodeEventStreamMessage({ ":event-type": type, ":content-type": "application/json", ":message-type": "event" }, enc.encode(JSON.stringify(body)));

/** The bytes cut into pieces of the given sizes, in turn. */
function chunked(bytes: Uint8Array, sizes: readonly number[]): ReadableStream<Uint8Array> {
  const pieces: Uint8Array[] = [];
  for (let i = 0, k = 0; i < bytes.length; k++) {
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

describe("Bedrock through the engine", () => {
  it("signs each request over the bytes it sends, for the backend's region, with the session token", async () => {
    const h = harness(() => converse("Hello from Bedrock"));
    const reply = await send(h, chat("Hello", { max_tokens: 20 }));
    expect(reply.kind === "buffered" && reply.body).toMatchObject({ choices: [{ message: { content: "Hello from Bedrock" } }], usage: { prompt_tokens: 7, completion_tokens: 2 } });
    const [s] = h.sent;
    expect(s!.url).toBe(`http://127.0.0.1:9/small/model/${encodeURIComponent(SMALL)}/converse`);
    expect(JSON.parse(new TextDecoder().decode(s!.body))).toMatchObject({ messages: [{ role: "user", content: [{ text: "Hello" }] }], inferenceConfig: { maxTokens: 20 } });
    expect(s!.headers.get("x-amz-security-token")).toBe("session-token");
    const auth = s!.headers.get("authorization")!;
    expect(auth).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIAENGINETEST000001\/\d{8}\/eu-west-1\/bedrock\/aws4_request, SignedHeaders=accept;content-type;host;x-amz-date;x-amz-security-token, Signature=/);
    // The signature is the one of the bytes and headers that went out: re-signing what was sent, at its date, gives it again.
    const signedNames = /SignedHeaders=([^,]+)/.exec(auth)![1]!.split(";").filter((n) => !["host", "x-amz-date", "x-amz-security-token"].includes(n));
    const again = await signSigV4({
      method: "POST",
      url: s!.url,
      headers: Object.fromEntries(signedNames.map((n) => [n, s!.headers.get(n)!])),
      body: s!.body,
      credentials: { accessKeyId: SECRETS.KEY_ID!, secretAccessKey: SECRETS.SECRET!, sessionToken: SECRETS.TOKEN },
      region: "eu-west-1",
      service: "bedrock",
      now: fromAmzDate(s!.headers.get("x-amz-date")!),
    });
    expect(again.authorization).toBe(auth);
  });

  it("streams the event stream to an OpenAI client however its bytes are cut, with the usage of the metadata event", async () => {
    const bytes = Buffer.concat([
      event("messageStart", { role: "assistant" }),
      event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "héllo " } }),
      event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "日本 🙂" } }),
      event("contentBlockStop", { contentBlockIndex: 0 }),
      event("messageStop", { stopReason: "end_turn" }),
      event("metadata", { usage: { inputTokens: 9, outputTokens: 4, totalTokens: 13 } }),
    ]);
    const h = harness(() => new Response(chunked(bytes, [1, 7, 3, 64]), { headers: { "content-type": "application/vnd.amazon.eventstream" } }));
    const reply = await send(h, chat("hi", { stream: true, stream_options: { include_usage: true } }));
    if (reply.kind !== "stream") throw new Error(`expected a stream, got ${reply.kind}`);
    const events = parseClientSse(await readAll(reply.body));
    const chunks = events.flatMap((e) => (e.kind === "json" ? [e.value as any] : []));
    expect(chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("")).toBe("héllo 日本 🙂");
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 4 } });
    expect(events.at(-1)).toEqual({ kind: "done" });
    expect(h.sent[0]!.url).toMatch(/\/converse-stream$/);
    expect(h.sent[0]!.headers.get("accept")).toBe("application/vnd.amazon.eventstream");
    await h.settled();
    expect(h.attempts[0]).toMatchObject({ backendProtocol: "bedrock-converse", outcome: "success", usage: { inputTokens: 9, outputTokens: 4, source: "provider" } });
  });

  it("ends a cut event stream with the client's error event and records the cut", async () => {
    const bytes = Buffer.concat([event("messageStart", { role: "assistant" }), event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "half" } })]);
    const h = harness(() => new Response(chunked(bytes.subarray(0, bytes.length - 5), [16]), { headers: { "content-type": "application/vnd.amazon.eventstream" } }));
    const reply = await send(h, chat("hi", { stream: true }));
    if (reply.kind !== "stream") throw new Error(`expected a stream, got ${reply.kind}`);
    const events = parseClientSse(await readAll(reply.body));
    expect(events.at(-1)).toMatchObject({ kind: "json", value: { error: { code: "upstream_stream_cut" } } });
    await h.settled();
    expect(h.attempts[0]).toMatchObject({ outcome: "stream_cut" });
  });

  it("falls back to the next tier after a ThrottlingException, and never after AccessDeniedException", async () => {
    const throttled = harness((_, n) => (n === 1 ? bedrockError(429, "ThrottlingException") : converse("from the large tier")));
    const ok = await send(throttled, chat("Hello"));
    expect(ok.kind === "buffered" && ok.body).toMatchObject({ choices: [{ message: { content: "from the large tier" } }] });
    expect(throttled.sent.map((s) => s.url)).toEqual([expect.stringContaining("/small/"), expect.stringContaining("/large/")]);
    await throttled.settled();
    expect(throttled.attempts[0]).toMatchObject({ evidence: { class: "known_zero", reason: "rejected_before_processing" } });

    const denied = harness(() => bedrockError(403, "AccessDeniedException"));
    const refused = await send(denied, chat("Hello"));
    expect(refused.kind).toBe("error");
    expect(refused.kind === "error" && refused.error.code).toBe("upstream_auth_failed");
    expect(denied.sent).toHaveLength(1);
  });

  it("sends nothing to a backend whose secret is missing, and the next tier answers", async () => {
    const h = harness(() => converse("large answers"), "MISSING_SECRET");
    const reply = await send(h, chat("Hello"));
    expect(reply.kind === "buffered" && reply.body).toMatchObject({ choices: [{ message: { content: "large answers" } }] });
    expect(h.sent.map((s) => s.url)).toEqual([expect.stringContaining("/large/")]);
    await h.settled();
    expect(h.attempts[0]).toMatchObject({ evidence: { class: "known_zero", reason: "not_attempted" } });
  });
});
