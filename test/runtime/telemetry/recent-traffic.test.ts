import { describe, expect, it } from "vitest";
import type { AttemptRecord } from "../../../src/context/attempt-record.ts";
import type { RequestRecord } from "../../../src/context/request-record.ts";
import { RecentTraffic, TRAFFIC_SLOT_MS, TRAFFIC_SLOTS } from "../../../src/telemetry/recent-traffic.ts";

const T0 = Date.UTC(2027, 0, 4, 10, 0, 0);

function clockAt(t: { now: number }) {
  return { now: () => t.now };
}

/** A finished request with the fields the window reads; the rest are not looked at. */
function request(over: Partial<RequestRecord> & { receivedAt: number }): RequestRecord {
  return {
    requestId: `req_${Math.random()}`,
    parentRequestId: undefined,
    endedAt: undefined,
    entrypoint: "chat",
    route: "default",
    outcome: "success",
    errorCode: undefined,
    ...over,
  } as unknown as RequestRecord;
}

function attempt(over: Partial<AttemptRecord> & { startedAt: number }): AttemptRecord {
  return { id: `att_${Math.random()}`, backendName: "primary", outcome: "success", ...over } as unknown as AttemptRecord;
}

describe("RecentTraffic: this isolate's recent window", () => {
  it("counts requests per entrypoint, route and backend by outcome and error class, with latency and TTFT quantiles", () => {
    const t = { now: T0 + 5_000 };
    const w = new RecentTraffic(clockAt(t));
    // 100 successes at 1..100 ms, TTFT half of each.
    for (let i = 1; i <= 100; i++) {
      const at = T0;
      w.finished(request({ receivedAt: at, endedAt: at + i }), [attempt({ startedAt: at, endedAt: at + i, firstContentAt: at + i / 2 })]);
    }
    w.finished(request({ receivedAt: T0, endedAt: T0 + 3, outcome: "error", errorCode: "budget_exceeded" }), []);
    w.finished(request({ receivedAt: T0, endedAt: T0 + 900, outcome: "error", errorCode: "upstream_error", route: "code" }), [attempt({ startedAt: T0, endedAt: T0 + 900, outcome: "upstream_status", status: 500 })]);
    w.finished(request({ receivedAt: T0, endedAt: T0 + 10, outcome: "error", errorCode: "internal_error" }), []);
    w.finished(request({ receivedAt: T0, endedAt: T0 + 50, outcome: "cancelled", errorCode: "client_closed" }), [attempt({ startedAt: T0, endedAt: T0 + 50, outcome: "client_cancelled" })]);
    // An explain is not traffic; a sub-call counts at its backend only.
    w.finished(request({ receivedAt: T0, endedAt: T0 + 5, explain: true }), []);
    w.finished(request({ receivedAt: T0, endedAt: T0 + 5, parentRequestId: "req_parent" }), [attempt({ startedAt: T0, endedAt: T0 + 5, backendName: "embedder" })]);

    const s = w.summary();
    expect(s.entrypoints).toHaveLength(1);
    const chat = s.entrypoints[0]!;
    expect(chat).toMatchObject({ name: "chat", requests: 104, success: 100, cancelled: 1, errors: { client: 1, upstream: 1, gateway: 1 } });
    expect(chat.errorRate).toBeCloseTo(3 / 104);
    // Quantiles from log buckets: within 10% of the exact order statistic.
    expect(Math.abs(chat.latencyMs.p50! - 51) / 51).toBeLessThan(0.1);
    expect(Math.abs(chat.latencyMs.p99! - 100) / 100).toBeLessThan(0.1);
    expect(Math.abs(chat.ttftMs.p50! - 25) / 25).toBeLessThan(0.1);
    expect(s.routes.map((r) => [r.entrypoint, r.route, r.requests])).toEqual([
      ["chat", "default", 103],
      ["chat", "code", 1],
    ]);
    const primary = s.backends.find((b) => b.name === "primary")!;
    expect(primary).toMatchObject({ requests: 102, success: 100, cancelled: 1, errors: { client: 0, upstream: 1, gateway: 0 } });
    expect(s.backends.find((b) => b.name === "embedder")).toMatchObject({ requests: 1, success: 1 });
    expect(s.perMinute.at(-1)).toEqual({ at: T0, requests: 104, errors: 3, cancelled: 1 });
  });

  it("keeps its last minutes only, reports empty minutes as zero, and answers a shorter window", () => {
    const t = { now: T0 };
    const w = new RecentTraffic(clockAt(t));
    for (let m = 0; m < TRAFFIC_SLOTS + 5; m++) {
      t.now = T0 + m * TRAFFIC_SLOT_MS + 1_000;
      // A quiet minute every fourth.
      if (m % 4 === 3) continue;
      for (let i = 0; i <= m; i++) w.finished(request({ receivedAt: t.now - 10, endedAt: t.now }), []);
    }
    const last = TRAFFIC_SLOTS + 4;
    const s = w.summary();
    expect(s.perMinute).toHaveLength(TRAFFIC_SLOTS);
    expect(s.perMinute.map((p) => p.requests)).toEqual(Array.from({ length: TRAFFIC_SLOTS }, (_, k) => last - TRAFFIC_SLOTS + 1 + k).map((m) => (m % 4 === 3 ? 0 : m + 1)));
    expect(s.entrypoints[0]!.requests).toBe(s.perMinute.reduce((a, p) => a + p.requests, 0));
    const short = w.summary(3);
    expect(short.perMinute.map((p) => p.requests)).toEqual([last - 2, last - 1, last].map((m) => (m % 4 === 3 ? 0 : m + 1)));
    // Long quiet: nothing left.
    t.now += (TRAFFIC_SLOTS + 1) * TRAFFIC_SLOT_MS;
    expect(w.summary().entrypoints).toEqual([]);
    expect(w.summary().perMinute.every((p) => p.requests === 0)).toBe(true);
  });

  it("bounds the names it tracks per minute, folding the rest into other", () => {
    const t = { now: T0 };
    const w = new RecentTraffic(clockAt(t));
    for (let i = 0; i < 300; i++) w.finished(request({ receivedAt: T0, endedAt: T0 + 1 }), [attempt({ startedAt: T0, endedAt: T0 + 1, backendName: `b${i}` })]);
    const s = w.summary();
    expect(s.backends.length).toBeLessThanOrEqual(257);
    expect(s.backends.reduce((a, b) => a + b.requests, 0)).toBe(300);
    expect(s.backends.find((b) => b.name === "other")?.requests).toBe(300 - 256);
  });
});
