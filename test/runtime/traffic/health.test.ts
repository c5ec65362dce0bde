import { describe, expect, it } from "vitest";
import {
  credentialHeaders,
  firstProbeAt,
  initialHealth,
  isRoutable,
  minimumAvailable,
  nextProbeAt,
  parseHealthSnapshot,
  probeEgressRefusal,
  probeOnce,
  probeTargetKey,
  recordProbe,
  resolveProbeTarget,
  type HealthSnapshot,
  type ProbeFetch,
  type ProbeResult,
  type ProbeTarget,
} from "../../../src/traffic/health.ts";
import { ALLOWED_TARGETS, FORBIDDEN_TARGETS } from "../support/egress-targets.ts";
import { FakeClock, mulberry32 } from "./helpers.ts";

const target: ProbeTarget = { url: "https://backend.test/health", method: "GET", headers: {}, timeoutMs: 1000, intervalMs: 10_000, jitterRatio: 0.2 };
const OK: ProbeResult = { ok: true, status: 200, latencyMs: 5, reason: "ok" };
const FAIL: ProbeResult = { ok: false, status: 500, latencyMs: 5, reason: "http_500" };

function run(results: ProbeResult[], thresholds = { unhealthyAfter: 3, healthyAfter: 2 }, from: HealthSnapshot = initialHealth()): HealthSnapshot[] {
  const out: HealthSnapshot[] = [];
  let s = from;
  results.forEach((r, i) => {
    s = recordProbe(s, r, 1000 * (i + 1), thresholds);
    out.push(s);
  });
  return out;
}

describe("health state machine", () => {
  it("starts unknown, which is routable", () => {
    expect(initialHealth().status).toBe("unknown");
    expect(isRoutable("unknown")).toBe(true);
    expect(isRoutable(undefined)).toBe(true);
    expect(isRoutable("healthy")).toBe(true);
    expect(isRoutable("unhealthy")).toBe(false);
  });

  it("becomes unhealthy only after unhealthyAfter consecutive failures", () => {
    const s = run([FAIL, FAIL, FAIL]);
    expect(s.map((x) => x.status)).toEqual(["unknown", "unknown", "unhealthy"]);
    expect(s[2]).toMatchObject({ consecutiveFailures: 3, consecutiveSuccesses: 0, lastOk: false, lastReason: "http_500", lastProbeAt: 3000, changedAt: 3000 });
  });

  it("a success resets the failure streak", () => {
    const s = run([OK, FAIL, FAIL, OK, FAIL, FAIL]);
    expect(s.map((x) => x.status)).toEqual(["healthy", "healthy", "healthy", "healthy", "healthy", "healthy"]);
    expect(s[5]!.consecutiveFailures).toBe(2);
  });

  it("unknown becomes healthy on the first success", () => {
    expect(run([OK])[0]).toMatchObject({ status: "healthy", consecutiveSuccesses: 1, changedAt: 1000 });
  });

  it("unhealthy recovers only after healthyAfter consecutive successes", () => {
    const s = run([FAIL, FAIL, FAIL, OK, FAIL, OK, OK, OK]);
    expect(s.map((x) => x.status)).toEqual(["unknown", "unknown", "unhealthy", "unhealthy", "unhealthy", "unhealthy", "healthy", "healthy"]);
    expect(s[6]!.changedAt).toBe(7000);
    expect(s[7]!.changedAt).toBe(7000);
  });

  it("thresholds of 1 flip on every result; defaults are 3 and 2", () => {
    expect(run([FAIL, OK, FAIL], { unhealthyAfter: 1, healthyAfter: 1 }).map((x) => x.status)).toEqual(["unhealthy", "healthy", "unhealthy"]);
    let s = initialHealth();
    for (let i = 0; i < 2; i++) s = recordProbe(s, FAIL, i, {});
    expect(s.status).toBe("unknown");
    s = recordProbe(s, FAIL, 3, {});
    expect(s.status).toBe("unhealthy");
    s = recordProbe(s, OK, 4, {});
    expect(s.status).toBe("unhealthy");
    expect(recordProbe(s, OK, 5, {}).status).toBe("healthy");
  });

  it("round-trips through JSON and falls back to unknown on garbage", () => {
    const s = run([FAIL, FAIL, FAIL])[2]!;
    expect(parseHealthSnapshot(JSON.stringify(s))).toEqual(s);
    expect(parseHealthSnapshot(JSON.stringify(initialHealth()))).toEqual(initialHealth());
    expect(parseHealthSnapshot(undefined)).toEqual(initialHealth());
    expect(parseHealthSnapshot("{not json")).toEqual(initialHealth());
    expect(parseHealthSnapshot(JSON.stringify({ ...s, status: "sick" }))).toEqual(initialHealth());
  });
});

describe("probe scheduling", () => {
  it("keeps every next probe within intervalMs * (1 ± jitterRatio) and spreads them out", () => {
    const rng = mulberry32(7);
    const now = 1_000_000;
    const delays = Array.from({ length: 2000 }, () => nextProbeAt(now, target, rng) - now);
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(8000);
    expect(Math.max(...delays)).toBeLessThan(12_000);
    // Spread over the range, not lumped: both ends of the window are reached.
    expect(Math.min(...delays)).toBeLessThan(8100);
    expect(Math.max(...delays)).toBeGreaterThan(11_900);
    expect(new Set(delays).size).toBeGreaterThan(1000);
  });

  it("covers the exact bounds at rng 0 and just below 1; no jitter means exactly one interval", () => {
    expect(nextProbeAt(0, target, { next: () => 0 })).toBe(8000);
    expect(nextProbeAt(0, target, { next: () => 0.999999 })).toBeLessThan(12_000);
    expect(nextProbeAt(5, { intervalMs: 10_000, jitterRatio: 0 }, { next: () => 0.7 })).toBe(10_005);
    expect(nextProbeAt(0, { intervalMs: 0.1, jitterRatio: 0.5 }, { next: () => 0 })).toBe(1);
  });

  it("backends started together drift apart", () => {
    const rng = mulberry32(42);
    const firsts = Array.from({ length: 50 }, () => firstProbeAt(0, target, rng));
    expect(Math.min(...firsts)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...firsts)).toBeLessThan(2000);
    expect(new Set(firsts).size).toBeGreaterThan(40);
    expect(firstProbeAt(100, { intervalMs: 10_000, jitterRatio: 0 }, rng)).toBe(100);
  });
});

describe("resolveProbeTarget", () => {
  it("applies defaults, lower-cases header names and keeps only known fields", () => {
    const r = resolveProbeTarget({ ...target, headers: { "X-Version": "1" }, extra: 1 } as ProbeTarget);
    expect(r).toEqual({ ...target, headers: { "x-version": "1" }, unhealthyAfter: 3, healthyAfter: 2 });
    expect(Object.isFrozen(r)).toBe(true);
  });

  it("rejects invalid fields, listing each", () => {
    const bad = { url: "ftp://x", method: "POST", headers: {}, timeoutMs: 0, intervalMs: -1, jitterRatio: 1, unhealthyAfter: 0 } as unknown as ProbeTarget;
    expect(() => resolveProbeTarget(bad)).toThrow(RangeError);
    expect(() => resolveProbeTarget(bad)).toThrow(/url.*method.*timeoutMs.*intervalMs.*jitterRatio.*unhealthyAfter/);
    expect(() => resolveProbeTarget({ ...target, url: "not a url" })).toThrow(/url/);
  });

  it("refuses credential headers: secrets are named, never passed by value", () => {
    expect(() => resolveProbeTarget({ ...target, headers: { Authorization: "Bearer sk-123" } })).toThrow(/credential/);
    expect(() => resolveProbeTarget({ ...target, headers: { "x-api-key": "sk-123" } })).toThrow(/credential/);
    expect(() => resolveProbeTarget({ ...target, credential: { authorizationSecret: "sk-live-123!", scheme: "bearer" } })).toThrow(/secret name/);
    expect(resolveProbeTarget({ ...target, credential: { authorizationSecret: "OPENAI_KEY", scheme: "x-api-key" } }).credential).toEqual({
      authorizationSecret: "OPENAI_KEY",
      scheme: "x-api-key",
    });
  });

  it("gives equal targets equal keys whatever the key order", () => {
    const a = probeTargetKey({ ...target, headers: { a: "1", b: "2" } });
    const b = probeTargetKey({ jitterRatio: 0.2, intervalMs: 10_000, timeoutMs: 1000, headers: { b: "2", a: "1" }, method: "GET", url: target.url });
    expect(a).toBe(b);
    expect(probeTargetKey({ ...target, intervalMs: 5000 })).not.toBe(a);
  });

  it("builds credential headers from a secret looked up by name", () => {
    const secrets: Record<string, string> = { KEY: "s3cret" };
    const lookup = (n: string) => secrets[n];
    expect(credentialHeaders(target, lookup)).toEqual({ headers: {} });
    expect(credentialHeaders({ ...target, credential: { authorizationSecret: "KEY", scheme: "bearer" } }, lookup)).toEqual({ headers: { authorization: "Bearer s3cret" } });
    expect(credentialHeaders({ ...target, credential: { authorizationSecret: "KEY", scheme: "x-api-key" } }, lookup)).toEqual({ headers: { "x-api-key": "s3cret" } });
    expect(credentialHeaders({ ...target, credential: { authorizationSecret: "NOPE", scheme: "bearer" } }, lookup)).toEqual({ missing: "NOPE" });
  });
});

describe("probeOnce", () => {
  const clock = new FakeClock(0);

  it("succeeds on 2xx, sending GET with the target's and the credential headers", async () => {
    const seen: Array<{ url: string; init: RequestInit }> = [];
    const fetchFn: ProbeFetch = async (url, init) => {
      seen.push({ url, init });
      clock.advance(12);
      return new Response("fine", { status: 200 });
    };
    const r = await probeOnce(fetchFn, { ...target, headers: { "x-version": "1" } }, clock, { authorization: "Bearer k" });
    expect(r).toEqual({ ok: true, status: 200, latencyMs: 12, reason: "ok" });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.url).toBe(target.url);
    expect(seen[0]!.init.method).toBe("GET");
    expect(seen[0]!.init.headers).toEqual({ "x-version": "1", authorization: "Bearer k" });
    expect(seen[0]!.init.signal).toBeInstanceOf(AbortSignal);
  });

  it("fails on any non-2xx answer", async () => {
    for (const status of [500, 503, 429, 404, 301]) {
      const r = await probeOnce(async () => new Response(null, { status, headers: status === 301 ? { location: "/x" } : {} }), target, clock);
      expect(r).toMatchObject({ ok: false, status, reason: `http_${status}` });
    }
  });

  it("fails on a network error without throwing", async () => {
    const r = await probeOnce(async () => {
      throw new TypeError("connection refused");
    }, target, clock);
    expect(r).toMatchObject({ ok: false, reason: "network_error: connection refused" });
    expect(r.status).toBeUndefined();
    const sync = await probeOnce((() => {
      throw new Error("sync boom");
    }) as ProbeFetch, target, clock);
    expect(sync).toMatchObject({ ok: false, reason: "network_error: sync boom" });
  });

  it("fails as timeout when the answer does not come in time, even if fetch ignores its signal", async () => {
    const observed: boolean[] = [];
    const honouring: ProbeFetch = (_url, init) =>
      new Promise((_, reject) => init.signal!.addEventListener("abort", () => (observed.push(true), reject(init.signal!.reason))));
    expect(await probeOnce(honouring, { ...target, timeoutMs: 5 }, clock)).toMatchObject({ ok: false, reason: "timeout" });
    expect(observed).toEqual([true]);

    const ignoring: ProbeFetch = () => new Promise<Response>(() => {});
    expect(await probeOnce(ignoring, { ...target, timeoutMs: 5 }, clock)).toMatchObject({ ok: false, reason: "timeout" });
  });
});

describe("the egress guard at probe time", () => {
  const policy = { allow: ["127.0.0.1:9901"] };

  it.each(FORBIDDEN_TARGETS)("fails a probe of $url ($what) without sending it", ({ url }) => {
    expect(probeEgressRefusal({ url: `${url}/models` }, policy)).toMatchObject({ ok: false, latencyMs: 0, reason: expect.stringMatching(/^egress_refused: [a-z_]+$/) });
  });

  it.each(ALLOWED_TARGETS)("lets a probe of $url ($what) go", ({ url }) => {
    expect(probeEgressRefusal({ url: `${url}/models` }, policy)).toBeUndefined();
  });
});

describe("minimumAvailable", () => {
  const pool = ["a", "b", "c", "d"];
  const down = (ids: string[]) => (c: string) => !ids.includes(c);

  it("filters out unhealthy candidates", () => {
    expect(minimumAvailable(pool, down(["b", "d"]))).toEqual(["a", "c"]);
    expect(minimumAvailable(pool, down(["b"]), 3)).toEqual(["a", "c", "d"]);
  });

  it("returns the original list when fewer than minCount would remain: health never empties a pool", () => {
    expect(minimumAvailable(pool, down(pool))).toBe(pool);
    expect(minimumAvailable(pool, down(["a", "b", "c"]), 2)).toBe(pool);
    expect(minimumAvailable(["solo"], down(["solo"]))).toEqual(["solo"]);
    expect(minimumAvailable([], () => false)).toEqual([]);
  });

  it("returns the input itself when nothing is filtered", () => {
    expect(minimumAvailable(pool, () => true)).toBe(pool);
  });

  it("treats minCount below 1 as 1 and a throwing predicate as healthy", () => {
    expect(minimumAvailable(pool, down(pool), 0)).toBe(pool);
    expect(minimumAvailable(pool, down(pool), Number.NaN)).toBe(pool);
    expect(minimumAvailable(pool, (c) => {
      if (c === "a") throw new Error("boom");
      return c !== "b";
    })).toEqual(["a", "c", "d"]);
  });
});
