/**
 * Gemini backends on the real engine over a fake fetch that plays Vertex AI, the Gemini API and
 * Google's token endpoint: each endpoint mode's address, the API key header, a service account's
 * tokens minted once and reused, replaced before they expire and after Vertex refuses one, a token
 * endpoint that is down making the attempt known-zero so the next tier answers, and Google's
 * errors read by their structured fields.
 */
import { exportPKCS8, generateKeyPair, jwtVerify } from "jose";
import { beforeAll, describe, expect, it } from "vitest";
import type { Reply } from "../../../src/kinds/model/model-api.ts";
import { TokenCache } from "../../../src/invoker/auth/token-cache.ts";
import { probeTargetFor } from "../../../src/invoker/health-target.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { normalizeSnapshot } from "../../../src/snapshot/normalize.ts";
import { pinSnapshot, type PinnedSnapshot } from "../../../src/snapshot/pinned-snapshot.ts";
import { chat, engineHarness } from "../support/engine-harness.ts";
import { LOOPBACK_EGRESS, publication } from "../support/executor-harness.ts";

const HOST = "http://127.0.0.1:9";
const TOKEN_URL = `${HOST}/token`;
const API_KEY = "gemini-api-key-value-7c1e";
const EMAIL = "gateway@acme-prod.iam.gserviceaccount.com";
const VERTEX_URL = `${HOST}/v1/projects/acme-prod/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent`;
const API_URL = `${HOST}/v1beta/models/gemini-2.5-flash:generateContent`;

let keys: Awaited<ReturnType<typeof generateKeyPair>>;
let keyFile: string;
beforeAll(async () => {
  keys = await generateKeyPair("RS256", { extractable: true });
  keyFile = JSON.stringify({ type: "service_account", project_id: "acme-prod", private_key_id: "kid-1", private_key: await exportPKCS8(keys.privateKey), client_email: EMAIL, token_uri: TOKEN_URL });
});

/** Small on Vertex AI with a service account, large on the Gemini API with a key; each its own tier of `sluice-chat`. */
async function geminiSnapshot(): Promise<PinnedSnapshot> {
  const caps = ["chat", "streaming", "stream-usage", "tools"];
  const src = {
    version: 1,
    backends: [
      { name: "vertex", protocol: "gemini", baseUrl: `${HOST}/`, project: "acme-prod", location: "us-central1", credential: { kind: "google-service-account", secret: "GOOGLE_SA" }, capabilities: caps },
      { name: "gemini-api", protocol: "gemini", baseUrl: HOST, credential: { secret: "GEMINI_KEY", scheme: "x-goog-api-key" }, capabilities: caps },
      { name: "other", protocol: "openai-chat", baseUrl: `${HOST}/v1`, capabilities: ["chat", "streaming", "stream-usage", "logprobs", "embeddings", "moderations"] },
    ],
    pools: [
      { name: "sim-small", members: [{ backend: "vertex", model: "gemini-2.5-pro" }] },
      { name: "sim-large", members: [{ backend: "gemini-api", model: "gemini-2.5-flash" }] },
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

interface Seen {
  readonly url: string;
  readonly headers: Headers;
  readonly body: string;
}

const answer = (text = "Hi!") =>
  Response.json({
    candidates: [{ content: { role: "model", parts: [{ text: "pondering", thought: true }, { text }] }, finishReason: "STOP", index: 0 }],
    usageMetadata: { promptTokenCount: 9, cachedContentTokenCount: 4, candidatesTokenCount: 2, thoughtsTokenCount: 3, totalTokenCount: 14 },
    modelVersion: "gemini-2.5-pro",
    responseId: "resp-1",
  });
const googleError = (status: number, googleStatus: string, details: unknown[] = [], headers: Record<string, string> = {}) =>
  Response.json({ error: { code: status, message: "refused", status: googleStatus, details } }, { status, headers });

/**
 * A harness whose fetch answers token requests with `token(n)` and calls with `model(seen)`;
 * `tokens` is the isolate's token cache (one per harness, as one per isolate).
 */
function harness(opts: { token?: (n: number) => Response | Promise<Response>; model?: (s: Seen) => Response } = {}) {
  const seen: Seen[] = [];
  let mints = 0;
  const holder: { clock?: { now(): number } } = {};
  const tokens = new TokenCache({ clock: { now: () => holder.clock!.now() } });
  const h = engineHarness({
    snapshot: geminiSnapshot,
    executor: {
      tokens,
      egress: LOOPBACK_EGRESS,
      credentials: { get: (name) => (name === "GEMINI_KEY" ? API_KEY : name === "GOOGLE_SA" ? keyFile : undefined) },
      fetch: async (input, init) => {
        const s = { url: String(input), headers: new Headers(init?.headers), body: String(init?.body) };
        seen.push(s);
        if (s.url === TOKEN_URL) {
          mints++;
          return opts.token ? opts.token(mints) : Response.json({ token_type: "Bearer", expires_in: 3599, access_token: `ya29.tok-${mints}` });
        }
        return opts.model ? opts.model(s) : answer();
      },
    },
  });
  holder.clock = h.clock;
  return { ...h, seen, tokens, mints: () => mints, calls: () => seen.filter((s) => s.url !== TOKEN_URL) };
}

type Harness = ReturnType<typeof harness>;

async function send(h: Harness, body: unknown): Promise<Reply> {
  const s = h.engine.begin(h.ingress(body));
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

/** Everything the harness recorded, as text: no secret, key or token may be in it. */
const recorded = (h: Harness) => JSON.stringify([h.attempts, h.requests, h.logs]);

describe("Gemini backends", () => {
  it("call Vertex AI at the project's and location's address with a token minted from the service account, and record the usage exactly", async () => {
    const h = harness();
    const reply = await send(h, chat("Hello", { max_tokens: 20 }));
    expect(reply.kind === "buffered" && reply.body).toMatchObject({ choices: [{ message: { content: "Hi!" } }], usage: { prompt_tokens: 9, completion_tokens: 5 } });
    const [mint, call] = h.seen;
    expect(mint!.url).toBe(TOKEN_URL);
    const form = new URLSearchParams(mint!.body);
    expect(form.get("grant_type")).toBe("urn:ietf:params:oauth:grant-type:jwt-bearer");
    const { payload } = await jwtVerify(form.get("assertion")!, keys.publicKey, { issuer: EMAIL, audience: TOKEN_URL, currentDate: new Date(h.clock.now()) });
    expect(payload.scope).toBe("https://www.googleapis.com/auth/cloud-platform");
    expect(call!.url).toBe(VERTEX_URL);
    expect(call!.headers.get("authorization")).toBe("Bearer ya29.tok-1");
    expect(call!.headers.get("x-goog-api-key")).toBeNull();
    const body = JSON.parse(call!.body);
    expect(body).not.toHaveProperty("model");
    expect(body).toMatchObject({ contents: [{ role: "user", parts: [{ text: "Hello" }] }], generationConfig: { maxOutputTokens: 20 } });
    await h.settled();
    expect(h.attempts[0]).toMatchObject({
      backendName: "vertex",
      backendProtocol: "gemini",
      codecVersion: "1",
      usage: { inputTokens: 9, cachedInputTokens: 4, outputTokens: 5, reasoningTokens: 3, source: "provider" },
      evidence: { class: "success" },
    });
    expect(recorded(h)).not.toContain("ya29.tok-1");
    expect(recorded(h)).not.toContain("PRIVATE KEY");
  });

  it("call the Gemini API with the key in x-goog-api-key, and stream from streamGenerateContent with alt=sse", async () => {
    // The token endpoint is down: the Vertex tier is skipped and the Gemini API tier answers.
    const sse = (chunks: unknown[]) => new Response(chunks.map((c) => `data: ${JSON.stringify(c)}\r\n\r\n`).join(""), { headers: { "content-type": "text/event-stream" } });
    const h = harness({
      token: () => Response.json({ error: "internal_failure" }, { status: 503 }),
      model: () =>
        sse([
          { candidates: [{ content: { role: "model", parts: [{ text: "Hel" }] }, index: 0 }] },
          { candidates: [{ content: { role: "model", parts: [{ text: "lo" }] }, finishReason: "STOP", index: 0 }], usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 2, totalTokenCount: 5 } },
        ]),
    });
    const reply = await send(h, chat("Hi", { stream: true, stream_options: { include_usage: true } }));
    if (reply.kind !== "stream") throw new Error(`expected a stream, got ${reply.kind}`);
    const text = await readAll(reply.body);
    expect(text).toContain('"content":"Hel"');
    expect(text).toContain('"prompt_tokens":3');
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    const [call] = h.calls();
    expect(call!.url).toBe(`${HOST}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`);
    expect(call!.headers.get("x-goog-api-key")).toBe(API_KEY);
    expect(call!.headers.get("authorization")).toBeNull();
    expect(call!.headers.get("accept")).toBe("text/event-stream");
    await h.settled();
    expect(recorded(h)).not.toContain(API_KEY);
  });

  it("reuses the token, mints once for concurrent requests, and mints a new one before the old expires", async () => {
    const h = harness();
    await Promise.all(Array.from({ length: 8 }, (_, i) => send(h, chat(`Hello ${i}`))));
    expect(h.mints()).toBe(1);
    expect(new Set(h.calls().map((c) => c.headers.get("authorization")))).toEqual(new Set(["Bearer ya29.tok-1"]));
    // Within five minutes of its expiry the token is replaced before the request leaves.
    h.clock.advance(3_599_000 - 299_000);
    await send(h, chat("Later"));
    expect(h.mints()).toBe(2);
    expect(h.calls().at(-1)!.headers.get("authorization")).toBe("Bearer ya29.tok-2");
    expect(h.tokens.stats()).toEqual({ minted: 2, failed: 0 });
  });

  it("drops a token Vertex refuses with 401, answering the gateway's credential error, so the next request mints anew", async () => {
    let refuse = true;
    const h = harness({ model: (s) => (s.url === VERTEX_URL && s.headers.get("authorization") === "Bearer ya29.tok-1" && refuse ? googleError(401, "UNAUTHENTICATED") : answer()) });
    const first = await send(h, chat("Hello"));
    expect(first.kind === "error" && [first.error.code, first.error.status]).toEqual(["upstream_auth_failed", 502]);
    refuse = false;
    await send(h, chat("Again"));
    expect(h.mints()).toBe(2);
    expect(h.calls().at(-1)!.headers.get("authorization")).toBe("Bearer ya29.tok-2");
    await h.settled();
    expect(h.attempts[0]).toMatchObject({ backendName: "vertex", status: 401, outcome: "upstream_status", evidence: { class: "client_error" } });
  });

  it("a token endpoint that is down is known-zero: nothing reaches Vertex and the next tier answers", async () => {
    const h = harness({ token: () => Response.json({ error: "internal_failure" }, { status: 503 }) });
    const reply = await send(h, chat("Hello"));
    expect(reply.kind === "buffered" && reply.body).toMatchObject({ choices: [{ message: { content: "Hi!" } }] });
    expect(h.calls().map((c) => c.url)).toEqual([API_URL]);
    await h.settled();
    expect(h.attempts.map((a) => [a.backendName, a.outcome, a.evidence?.class, a.evidence?.reason, a.errorCode])).toEqual([
      ["vertex", "connect_failed", "known_zero", "credential_unavailable", "upstream_unreachable"],
      ["gemini-api", "success", "success", "ok", undefined],
    ]);
    expect(h.tokens.stats()).toEqual({ minted: 0, failed: 1 });
    expect(recorded(h)).not.toContain("PRIVATE KEY");
  });

  it("a token URI in the key file the egress guard refuses is known-zero too, and nothing is sent to it", async () => {
    const h = harness();
    keyFile = keyFile.replace(TOKEN_URL, "http://10.1.2.3/token");
    try {
      const reply = await send(h, chat("Hello"));
      expect(reply.kind).toBe("buffered");
      expect(h.seen.map((s) => s.url)).toEqual([API_URL]);
      await h.settled();
      expect(h.attempts[0]).toMatchObject({ backendName: "vertex", errorCode: "internal_error", evidence: { class: "known_zero", reason: "credential_unavailable" } });
    } finally {
      keyFile = keyFile.replace("http://10.1.2.3/token", TOKEN_URL);
    }
  });

  it("reads Google's errors by their structured fields: RESOURCE_EXHAUSTED and UNAVAILABLE refuse before work with RetryInfo's wait, API_KEY_INVALID is the gateway's credential", async () => {
    const retryInfo = (delay: string) => [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: delay }];
    const cases: [Response, Record<string, unknown>, string | undefined][] = [
      [googleError(429, "RESOURCE_EXHAUSTED", retryInfo("2s")), { status: 429, evidence: { class: "known_zero", reason: "rejected_before_processing", retryAfterSeconds: 2 } }, undefined],
      // A header, when sent, says the wait.
      [googleError(429, "RESOURCE_EXHAUSTED", retryInfo("30s"), { "retry-after": "1" }), { status: 429, evidence: { class: "known_zero", retryAfterSeconds: 1 } }, undefined],
      [googleError(503, "UNAVAILABLE"), { status: 503, evidence: { class: "known_zero", reason: "rejected_before_processing" } }, undefined],
      [googleError(400, "INVALID_ARGUMENT", [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "API_KEY_INVALID", domain: "googleapis.com" }]), { status: 400, errorCode: "upstream_auth_failed", evidence: { class: "client_error" } }, "upstream_auth_failed"],
      [googleError(403, "PERMISSION_DENIED"), { status: 403, errorCode: "upstream_auth_failed", evidence: { class: "client_error" } }, "upstream_auth_failed"],
      // A 400 without that reason is the request's fault, whatever its message says.
      [googleError(400, "INVALID_ARGUMENT"), { status: 400, errorCode: "invalid_request", evidence: { class: "client_error" } }, "invalid_request"],
      [googleError(500, "INTERNAL"), { status: 500, evidence: { class: "unknown" } }, undefined],
    ];
    for (const [res, attempt, clientCode] of cases) {
      let n = 0;
      const h = harness({ model: () => (++n === 1 ? res.clone() : answer()) });
      const reply = await send(h, chat("Hello"));
      if (clientCode !== undefined) expect(reply.kind === "error" && reply.error.code).toBe(clientCode);
      await h.settled();
      expect(h.attempts[0]).toMatchObject({ backendName: "vertex", ...attempt });
    }
  });

  it("probes a Gemini API backend at its model list with the key by name", async () => {
    const snapshot = await normalizeSnapshot(
      { version: 1, backends: [{ name: "g", protocol: "gemini", baseUrl: HOST, credential: { secret: "GEMINI_KEY", scheme: "x-goog-api-key" }, capabilities: ["chat"], healthCheck: {} }], pools: [{ name: "p", members: [{ backend: "g", model: "gemini-2.5-flash" }] }] },
      { supportedProtocols: builtinCodecs.ids(), logprobsProtocols: builtinCodecs.logprobsIds(), requirements: [], egress: LOOPBACK_EGRESS },
    );
    if (!snapshot.ok) throw new Error(JSON.stringify(snapshot.reasons));
    const target = probeTargetFor(snapshot.snapshot.backends[0]!, builtinCodecs.backend("gemini")!);
    expect(target).toMatchObject({ url: `${HOST}/v1beta/models`, method: "GET", credential: { authorizationSecret: "GEMINI_KEY", scheme: "x-goog-api-key" } });
  });
});
