/**
 * Azure OpenAI backends on the real engine over a fake fetch that plays both the deployment and
 * the Entra ID token endpoint: the deployment's address and body, the `api-key` header, tokens
 * minted once and reused, replaced before they expire and after the provider refuses one, and a
 * token endpoint that is down making the attempt known-zero, so the next tier answers.
 */
import { describe, expect, it } from "vitest";
import type { Reply } from "../../../src/kinds/model/model-api.ts";
import { TokenCache } from "../../../src/invoker/auth/token-cache.ts";
import { probeTargetFor } from "../../../src/invoker/health-target.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { normalizeSnapshot } from "../../../src/snapshot/normalize.ts";
import { pinSnapshot, type PinnedSnapshot } from "../../../src/snapshot/pinned-snapshot.ts";
import { chat, engineHarness } from "../support/engine-harness.ts";
import { LOOPBACK_EGRESS, publication } from "../support/executor-harness.ts";

const HOST = "http://127.0.0.1:9";
const TOKEN_URL = `${HOST}/tenant-1/oauth2/v2.0/token`;
const SECRET = "provider-secret";

/** Small on an api-key deployment, large on an Entra one; each its own tier of `sluice-chat`. */
async function azureSnapshot(): Promise<PinnedSnapshot> {
  const caps = ["chat", "streaming", "stream-usage", "tools"];
  const src = {
    version: 1,
    backends: [
      { name: "azure-key", protocol: "azure-openai", baseUrl: HOST, apiVersion: "2024-10-21", credential: { secret: "AZURE_KEY", scheme: "api-key" }, capabilities: caps },
      { name: "azure-entra", protocol: "azure-openai", baseUrl: `${HOST}/`, apiVersion: "2025-04-01-preview", credential: { kind: "entra", tenantId: "tenant-1", clientId: "app", secret: "AZURE_CLIENT_SECRET", tokenUrl: TOKEN_URL }, capabilities: caps },
      { name: "other", protocol: "openai-chat", baseUrl: `${HOST}/v1`, capabilities: ["chat", "streaming", "stream-usage", "logprobs", "embeddings", "moderations"] },
    ],
    pools: [
      { name: "sim-small", members: [{ backend: "azure-entra", model: "gpt-4o-mini-prod" }] },
      { name: "sim-large", members: [{ backend: "azure-key", model: "gpt-4o-prod" }] },
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

const chatAnswer = () => Response.json({ id: "chatcmpl-1", object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content: "Hi!" }, finish_reason: "stop", content_filter_results: {} }], usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 }, prompt_filter_results: [] });

/**
 * A harness whose fetch answers token requests with `token(n)` and chats with `deployment(seen)`;
 * `tokens` is the isolate's token cache (one per harness, as one per isolate).
 */
function harness(opts: { token?: (n: number) => Response | Promise<Response>; deployment?: (s: Seen) => Response } = {}) {
  const seen: Seen[] = [];
  let mints = 0;
  const holder: { clock?: { now(): number } } = {};
  const clockNow = () => holder.clock!.now();
  const tokens = new TokenCache({ clock: { now: clockNow } });
  const h = engineHarness({
    snapshot: azureSnapshot,
    executor: {
      tokens,
      credentials: { get: (name) => (name === "AZURE_KEY" ? "azure-key-value" : name === "AZURE_CLIENT_SECRET" ? SECRET : undefined) },
      fetch: async (input, init) => {
        const s = { url: String(input), headers: new Headers(init?.headers), body: String(init?.body) };
        seen.push(s);
        if (s.url === TOKEN_URL) {
          mints++;
          return opts.token ? opts.token(mints) : Response.json({ token_type: "Bearer", expires_in: 3600, access_token: `tok-${mints}` });
        }
        return opts.deployment ? opts.deployment(s) : chatAnswer();
      },
    },
  });
  holder.clock = h.clock;
  return { ...h, seen, tokens, mints: () => mints, chats: () => seen.filter((s) => s.url !== TOKEN_URL) };
}

type Harness = ReturnType<typeof harness>;

async function send(h: Harness, body: unknown): Promise<Reply> {
  const s = h.engine.begin(h.ingress(body));
  const prepared = await s.prepare();
  if (prepared.kind !== "dispatch") throw new Error(`expected dispatch, got ${prepared.error.code}`);
  return s.dispatch();
}

describe("Azure OpenAI backends", () => {
  it("send to the deployment's address with the API version, a bearer token minted for the Entra app, and no model in the body", async () => {
    const h = harness();
    const reply = await send(h, chat("Hello", { max_tokens: 20 }));
    expect(reply.kind === "buffered" && reply.body).toMatchObject({ choices: [{ message: { content: "Hi!" } }], usage: { prompt_tokens: 5, completion_tokens: 2 } });
    const [mint, call] = h.seen;
    expect(mint!.url).toBe(TOKEN_URL);
    expect(Object.fromEntries(new URLSearchParams(mint!.body))).toEqual({ grant_type: "client_credentials", client_id: "app", client_secret: SECRET, scope: "https://cognitiveservices.azure.com/.default" });
    expect(call!.url).toBe(`${HOST}/openai/deployments/gpt-4o-mini-prod/chat/completions?api-version=2025-04-01-preview`);
    expect(call!.headers.get("authorization")).toBe("Bearer tok-1");
    expect(call!.headers.get("api-key")).toBeNull();
    const body = JSON.parse(call!.body);
    expect(body).not.toHaveProperty("model");
    expect(body).toMatchObject({ messages: [{ role: "user", content: "Hello" }], max_completion_tokens: 20 });
    await h.settled();
    expect(h.attempts[0]).toMatchObject({ backendProtocol: "azure-openai", codecVersion: "1", usage: { source: "provider" }, evidence: { class: "success" } });
  });

  it("reuses the token, mints once for concurrent requests, and mints a new one before the old expires", async () => {
    const h = harness();
    await Promise.all(Array.from({ length: 8 }, (_, i) => send(h, chat(`Hello ${i}`))));
    expect(h.mints()).toBe(1);
    expect(new Set(h.chats().map((c) => c.headers.get("authorization")))).toEqual(new Set(["Bearer tok-1"]));
    // Within five minutes of its expiry the token is replaced before the request leaves.
    h.clock.advance(3_600_000 - 299_000);
    await send(h, chat("Later"));
    expect(h.mints()).toBe(2);
    expect(h.chats().at(-1)!.headers.get("authorization")).toBe("Bearer tok-2");
    expect(h.tokens.stats()).toEqual({ minted: 2, failed: 0 });
  });

  it("drops a token the deployment refuses with 401, so the next request mints anew", async () => {
    let refuse = true;
    const h = harness({ deployment: (s) => (s.headers.get("authorization") === "Bearer tok-1" && refuse ? Response.json({ error: { code: "401", message: "Unauthorized." } }, { status: 401 }) : chatAnswer()) });
    const first = await send(h, chat("Hello"));
    expect(first.kind).toBe("error");
    refuse = false;
    await send(h, chat("Again"));
    expect(h.mints()).toBe(2);
    expect(h.chats().at(-1)!.headers.get("authorization")).toBe("Bearer tok-2");
  });

  it("a token endpoint that is down is known-zero: nothing reaches the Entra deployment and the next tier answers", async () => {
    const h = harness({ token: () => Response.json({ error: "temporarily_unavailable" }, { status: 503 }) });
    const reply = await send(h, chat("Hello"));
    expect(reply.kind === "buffered" && reply.body).toMatchObject({ choices: [{ message: { content: "Hi!" } }] });
    expect(h.chats().map((c) => c.url)).toEqual([`${HOST}/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21`]);
    expect(h.chats()[0]!.headers.get("api-key")).toBe("azure-key-value");
    await h.settled();
    expect(h.attempts.map((a) => [a.backendName, a.outcome, a.evidence?.class, a.evidence?.reason, a.errorCode])).toEqual([
      ["azure-entra", "connect_failed", "known_zero", "credential_unavailable", "upstream_unreachable"],
      ["azure-key", "success", "success", "ok", undefined],
    ]);
    expect(h.tokens.stats()).toEqual({ minted: 0, failed: 1 });
    // Nothing of the secret in the records.
    expect(JSON.stringify([h.attempts, h.requests, h.logs])).not.toContain(SECRET);
  });

  it("takes Azure's 429 with retry-after-ms as a refusal before any work, reading the wait to the millisecond", async () => {
    let n = 0;
    const h = harness({ deployment: () => (++n === 1 ? Response.json({ error: { code: "429", message: "Requests have exceeded call rate limit." } }, { status: 429, headers: { "retry-after-ms": "1500", "retry-after": "2" } }) : chatAnswer()) });
    const reply = await send(h, chat("Hello"));
    expect(reply.kind).toBe("buffered");
    await h.settled();
    expect(h.attempts[0]).toMatchObject({ status: 429, evidence: { class: "known_zero", reason: "rejected_before_processing", retryAfterSeconds: 1.5 } });
  });

  it("probes an api-key deployment's resource at its model list, with the API version and the key by name", async () => {
    const snapshot = await normalizeSnapshot(
      { version: 1, backends: [{ name: "az", protocol: "azure-openai", baseUrl: HOST, apiVersion: "2024-10-21", credential: { secret: "AZURE_KEY", scheme: "api-key" }, capabilities: ["chat"], healthCheck: {} }], pools: [{ name: "p", members: [{ backend: "az", model: "d" }] }] },
      { supportedProtocols: builtinCodecs.ids(), logprobsProtocols: builtinCodecs.logprobsIds(), requirements: [], egress: LOOPBACK_EGRESS },
    );
    if (!snapshot.ok) throw new Error(JSON.stringify(snapshot.reasons));
    const target = probeTargetFor(snapshot.snapshot.backends[0]!, builtinCodecs.backend("azure-openai")!);
    expect(target).toMatchObject({ url: `${HOST}/openai/models?api-version=2024-10-21`, method: "GET", credential: { authorizationSecret: "AZURE_KEY", scheme: "api-key" } });
  });
});
