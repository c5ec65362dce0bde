/**
 * The fault matrix, once per backend protocol: each row is one upstream fault the simulator
 * injects, and what the gateway must make of it — how many upstream attempts (the simulator
 * counts every one), what the client gets, and the evidence each attempt is recorded with.
 * Retries and fallback happen only on known-zero evidence; a provider's own refusals (a 429,
 * Bedrock's ServiceUnavailableException and Google's UNAVAILABLE) are known-zero, a 503 elsewhere,
 * a reset, a cut stream and a slow first byte are not. Each backend's entrypoint has two tiers (its `sim-small`, then
 * its `sim-large`) and up to 3 attempts.
 */
import { stringify } from "yaml";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startGateway, type RunningGateway } from "../../local-stack/stack.ts";
import {
  ADMIN_TOKEN,
  allowingSimulators,
  BACKEND_PROTOCOLS,
  bundledConfig,
  DEMO_KEY,
  expectNothingLeft,
  perProtocolConfig,
  startProtocolSimulator,
  upstreamModel,
  type BackendProtocol,
  type ProtocolSimulator,
} from "./support/stack.ts";

/**
 * Whether the protocol's 503 is a refusal before any work. Bedrock's ServiceUnavailableException
 * and Google's UNAVAILABLE are (docs/protocols/bedrock-converse.md, gemini.md); elsewhere a 503
 * may follow accepted work.
 */
const OVERLOAD_IS_REFUSAL: Readonly<Record<BackendProtocol, boolean>> = {
  "openai-chat": false,
  "openai-responses": false,
  "anthropic-messages": false,
  "azure-openai": false,
  "bedrock-converse": true,
  gemini: true,
};
/** Protocols whose providers send `retry-after-ms` (OpenAI and Azure OpenAI), which the gateway honours to the millisecond. */
const SENDS_RETRY_AFTER_MS: ReadonlySet<BackendProtocol> = new Set(["openai-chat", "openai-responses", "azure-openai"]);
const FIRST_BYTE_TIMEOUT_MS = 400;

let sim: ProtocolSimulator;
let gateway: RunningGateway;

beforeAll(async () => {
  sim = await startProtocolSimulator();
  const { backends, publication } = perProtocolConfig(sim.url, ["chat", "streaming", "stream-usage", "tools"], { version: "e2e", currency: "USD", inputPerMTok: 1, outputPerMTok: 2 }, { retry: { maxAttempts: 3 } });
  publication.tenants[0].apiKeys = publication.tenants[0].apiKeys.filter((k: { id: string }) => k.id === "demo");
  for (const p of BACKEND_PROTOCOLS) {
    backends.pools.push({ name: `pool-${p}-large`, members: [{ backend: `sim-${p}`, model: "sim-large" }] });
    publication.models.push({ id: `m-${p}-large`, activeRevision: 1, revisions: [{ revision: 1, pool: `pool-${p}-large`, requires: ["chat"], price: publication.models[0].revisions[0].price }] });
    publication.entrypoints.find((e: { name: string }) => e.name === `via-${p}`).default = [[`m-${p}`], [`m-${p}-large`]];
  }
  const gw = allowingSimulators(bundledConfig("gateway"), sim.url);
  // Exact attempt counts: no breaker may open and change a later row.
  gw.breaker = { enabled: false };
  gw.traffic = { ...gw.traffic, firstByteTimeoutMs: FIRST_BYTE_TIMEOUT_MS };
  gateway = await startGateway({ adminToken: ADMIN_TOKEN, secrets: sim.secrets, config: { backends: stringify(backends), publication: stringify(publication), gateway: stringify(gw) } });
});
afterAll(async () => {
  try {
    if (gateway) await expectNothingLeft(gateway.adminUrl);
  } finally {
    await Promise.all([gateway?.stop(), sim?.stop()]);
  }
});
beforeEach(async () => {
  await fetch(`${sim.url}/__sim/reset`, { method: "POST" });
});

const attemptIds = (res: Response) => (res.headers.get("x-sluice-attempts") ?? "").split(", ").filter(Boolean);

/** The models the simulator was asked for, in order: one entry per upstream attempt. */
async function upstream(): Promise<string[]> {
  const { requests } = (await (await fetch(`${sim.url}/__sim/requests?limit=20`)).json()) as { requests: { path: string; body: unknown }[] };
  return requests.flatMap((r) => upstreamModel(r) ?? []);
}

/** Each attempt's backend protocol, outcome and evidence class, from the request's access line once written. */
async function evidence(res: Response): Promise<string[]> {
  const id = res.headers.get("x-request-id");
  const end = Date.now() + 5000;
  for (;;) {
    const line = gateway
      .output()
      .split("\n")
      .find((l) => l.startsWith('{"kind":"request"') && l.includes(`"requestId":"${id}"`));
    if (line !== undefined) return JSON.parse(line).attempts.map((a: { protocol: string; outcome: string; evidence: { class: string } }) => `${a.protocol} ${a.outcome} ${a.evidence.class}`);
    if (Date.now() > end) throw new Error(`no access line for ${id}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe.each(BACKEND_PROTOCOLS.map((backend) => ({ backend })))("faults from a $backend backend (the simulator counts every upstream attempt)", ({ backend }) => {
  const ask = (directive: string, stream = false) =>
    fetch(`${gateway.publicUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ model: `via-${backend}`, stream, messages: [{ role: "user", content: `hello [[sim ${directive}]]` }] }),
    });
  const as = (...classes: string[]) => classes.map((c) => `${backend} ${c}`);

  it("a 429 refusal falls back to the next tier: two upstream attempts, one answer", async () => {
    const res = await ask("status=429 retry-after=0 times=1");
    expect(res.status).toBe(200);
    expect(await upstream()).toEqual(["sim-small", "sim-large"]);
    expect(attemptIds(res)).toHaveLength(2);
    expect(await evidence(res)).toEqual(as("upstream_status known_zero", "success success"));
  });

  it("repeated 429s stop at the plan's attempt authority (3)", async () => {
    const res = await ask("status=429 retry-after=0");
    expect(res.status).toBe(429);
    expect(((await res.json()) as any).error.code).toBe("upstream_rate_limited");
    expect(await upstream()).toHaveLength(3);
    expect(attemptIds(res)).toHaveLength(3);
    expect(await evidence(res)).toEqual(as(...Array(3).fill("upstream_status known_zero")));
  });

  if (OVERLOAD_IS_REFUSAL[backend]) {
    it("a 503 is the provider's refusal before any work: it falls back, two attempts, one answer", async () => {
      const res = await ask("status=503 retry-after=0 times=1");
      expect(res.status).toBe(200);
      expect(await upstream()).toEqual(["sim-small", "sim-large"]);
      expect(await evidence(res)).toEqual(as("upstream_status known_zero", "success success"));
    });
  } else {
    it("a 503 after acceptance is unknown: exactly one attempt", async () => {
      const res = await ask("status=503 retry-after=0 times=1");
      expect(res.status).toBe(503);
      expect(((await res.json()) as any).error.code).toBe("upstream_overloaded");
      expect(await upstream()).toEqual(["sim-small"]);
      expect(await evidence(res)).toEqual(as("upstream_status unknown"));
    });
  }

  it("a connection reset is unknown (it may follow a written body): exactly one attempt", async () => {
    const res = await ask("fault=reset-before-headers times=1");
    expect(res.status).toBe(502);
    expect(((await res.json()) as any).error.code).toBe("upstream_unreachable");
    expect(await upstream()).toEqual(["sim-small"]);
    expect(await evidence(res)).toEqual(as("network_error unknown"));
  });

  it.each([
    ["between frames", ""],
    ["inside a frame", " cut-bytes=40"],
  ])("a stream cut after headers (%s) is upstream_stream_cut and never retried", async (_, where) => {
    const res = await ask(`fault=cut-mid-stream cut-after=2${where} times=1`, true);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toContain("[DONE]");
    expect(text).toMatch(/data: \{"error":\{[^\n]*"code":"upstream_stream_cut"/);
    expect(await upstream()).toEqual(["sim-small"]);
    // The attempt was answered (success at its headers), then its stream was cut: never retried, and the record says unknown.
    expect(await evidence(res)).toEqual(as("stream_cut unknown"));
  });

  it("a slow first byte is upstream_timeout, buffered and streamed, one attempt each (the provider may be working)", async () => {
    for (const stream of [false, true]) {
      await fetch(`${sim.url}/__sim/reset`, { method: "POST" });
      const res = await ask(`latency-ms=${FIRST_BYTE_TIMEOUT_MS * 8}`, stream);
      expect(res.status).toBe(504);
      expect(((await res.json()) as any).error.code).toBe("upstream_timeout");
      expect(await upstream()).toEqual(["sim-small"]);
      expect(await evidence(res)).toEqual(as("timeout unknown"));
    }
  });

  it("a retry-after beyond the deadline is not waited for", async () => {
    // The default deadline is 10 minutes; a provider asking for an hour gets no retry.
    const res = await ask("status=429 retry-after=3600 times=1");
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("3600");
    expect(await upstream()).toEqual(["sim-small"]);
  });

  it("a throttled attempt's retry waits the retry-after the provider sent", async () => {
    const started = Date.now();
    const res = await ask("status=429 retry-after=1 times=1");
    expect(res.status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(await upstream()).toEqual(["sim-small", "sim-large"]);
  });

  if (SENDS_RETRY_AFTER_MS.has(backend)) {
    it("retry-after-ms is honoured to the millisecond, not rounded up to retry-after's whole second", async () => {
      // The simulator sends retry-after: 1 beside retry-after-ms: 350; the backoff's own jitter is under 100 ms.
      const started = Date.now();
      const res = await ask("status=429 retry-after-ms=350 times=1");
      const waited = Date.now() - started;
      expect(res.status).toBe(200);
      expect(waited).toBeGreaterThanOrEqual(350);
      expect(waited).toBeLessThan(1000);
      expect(await upstream()).toEqual(["sim-small", "sim-large"]);
    });
  }
});
