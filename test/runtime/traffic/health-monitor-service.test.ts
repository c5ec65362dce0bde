import { describe, expect, it } from "vitest";
import type { Rng } from "../../../src/deps/rng.ts";
import type { EgressPolicy } from "../../../src/egress/egress-guard.ts";
import { initialHealth, probeTargetKey, type HealthSnapshot, type ProbeFetch, type ProbeTarget, type ResolvedProbeTarget } from "../../../src/traffic/health.ts";
import { HealthMonitorService, type HealthStore, type McpProbe } from "../../../src/traffic/health-monitor-service.ts";
import { FakeAlarmStorage } from "../support/fake-alarm-storage.ts";
import { FakeClock } from "../support/fixtures.ts";

const INTERVAL = 60_000;
const target: ProbeTarget = { url: "https://backend.test/health", method: "GET", headers: {}, timeoutMs: 1000, intervalMs: INTERVAL, jitterRatio: 0.1, unhealthyAfter: 2, healthyAfter: 2 };

/** Target and health in memory; `drop` also clears the alarm, as the object's storage does. */
class MemoryHealthStore implements HealthStore {
  target: ResolvedProbeTarget | undefined;
  health: HealthSnapshot = initialHealth();
  constructor(readonly alarm: FakeAlarmStorage) {}
  transaction<T>(fn: () => T): T {
    return fn();
  }
  loadTarget() {
    return this.target;
  }
  loadHealth() {
    return this.health;
  }
  saveTarget(t: ResolvedProbeTarget) {
    this.target = t;
  }
  saveHealth(h: HealthSnapshot) {
    this.health = h;
  }
  async drop() {
    this.target = undefined;
    this.health = initialHealth();
    this.alarm.at = null;
  }
}

/** Always the middle of its range: the first probe half a jitter into the interval, the next exactly one interval on. */
const half: Rng = { next: () => 0.5 };

describe("HealthMonitorService", () => {
  const make = (over: { secrets?: Record<string, string>; egress?: () => EgressPolicy; probeMcp?: McpProbe; fetchers?: Record<string, ProbeFetch> } = {}) => {
    const alarm = new FakeAlarmStorage();
    const store = new MemoryHealthStore(alarm);
    const clock = new FakeClock();
    const mcpCalls: string[] = [];
    const monitor = new HealthMonitorService({
      store,
      alarm,
      clock,
      rng: half,
      egress: over.egress ?? (() => ({ allow: [] })),
      secret: (name) => over.secrets?.[name],
      probeMcp: over.probeMcp ?? (async (_f, t, _c, headers) => (mcpCalls.push(`${t.url} ${JSON.stringify(headers)}`), { ok: true, latencyMs: 1, reason: "ok" })),
      fetcher: (name) => over.fetchers?.[name],
    });
    return { alarm, store, clock, monitor, mcpCalls };
  };
  const fetchLog = (status = 200) => {
    const sent: Array<{ url: string; headers: unknown }> = [];
    const f: ProbeFetch = async (url, init) => (sent.push({ url, headers: init.headers }), new Response(null, { status }));
    return { sent, f };
  };

  it("watch stores the resolved target and arms the first probe within the jitter of an interval", async () => {
    const { alarm, store, clock, monitor } = make();
    const view = await monitor.watch(target);
    const first = clock.now() + Math.floor(INTERVAL * 0.1 * 0.5);
    expect(alarm.at).toBe(first);
    expect(store.target).toMatchObject({ url: target.url, unhealthyAfter: 2 });
    expect(view).toMatchObject({ status: "unknown", watching: true, targetKey: probeTargetKey(store.target!), nextProbeAt: first });
  });

  it("a second watch leaves the armed probe alone; a shorter interval brings it forward", async () => {
    const { alarm, clock, monitor } = make();
    alarm.at = clock.now() + INTERVAL;
    await monitor.watch(target);
    expect(alarm.at).toBe(clock.now() + INTERVAL);
    await monitor.watch({ ...target, intervalMs: 1_000 });
    expect(alarm.at).toBe(clock.now() + Math.floor(1_000 * 0.1 * 0.5));
  });

  it("rejects an invalid target before storing or arming anything", async () => {
    const { alarm, store, monitor } = make();
    await expect(monitor.watch({ ...target, headers: { authorization: "Bearer sk" } })).rejects.toThrow(RangeError);
    expect(store.target).toBeUndefined();
    expect(alarm.log).toEqual([]);
  });

  it("reports not watching without reading the alarm, and unwatch forgets everything", async () => {
    const { alarm, monitor } = make();
    expect(await monitor.state()).toMatchObject({ status: "unknown", watching: false, targetKey: undefined, nextProbeAt: undefined });
    expect(alarm.log).toEqual([]);
    await monitor.watch(target);
    await monitor.unwatch();
    expect(await monitor.state()).toMatchObject({ watching: false, nextProbeAt: undefined });
  });

  it("probes a target with a binding (a backend's tls) through that binding, and fails naming a binding the Worker lacks", async () => {
    const through = fetchLog(200);
    const plain = fetchLog(200);
    const { monitor } = make({ fetchers: { BACKEND_TLS: through.f } });
    await monitor.watch({ ...target, binding: "BACKEND_TLS" });
    await monitor.alarm(plain.f);
    expect(through.sent.map((s) => s.url)).toEqual([target.url]);
    expect(plain.sent).toEqual([]);
    expect(await monitor.state()).toMatchObject({ lastOk: true });
    await monitor.watch({ ...target, binding: "NOT_BOUND" });
    await monitor.alarm(plain.f);
    expect(plain.sent).toEqual([]);
    expect(await monitor.state()).toMatchObject({ lastOk: false, lastReason: "binding_missing: NOT_BOUND" });
  });

  it("on its alarm probes with the fetch it is handed, records the result at its clock and re-arms an interval on", async () => {
    const { alarm, clock, monitor } = make();
    await monitor.watch(target);
    const { sent, f } = fetchLog(503);
    await monitor.alarm(f);
    expect(sent.map((s) => s.url)).toEqual([target.url]);
    expect(await monitor.state()).toMatchObject({ consecutiveFailures: 1, lastOk: false, lastReason: "http_503", lastProbeAt: clock.now() });
    expect(alarm.at).toBe(clock.now() + INTERVAL);
    await monitor.alarm(f);
    expect((await monitor.state()).status).toBe("unhealthy");
  });

  it("does nothing on an alarm while unwatched, and records nothing for a target removed while its probe was out", async () => {
    const idle = make();
    const { sent, f } = fetchLog();
    await idle.monitor.alarm(f);
    expect(sent).toEqual([]);
    expect(idle.alarm.log).toEqual([]);

    const { alarm, store, monitor } = make();
    await monitor.watch(target);
    alarm.log.length = 0;
    await monitor.alarm(async () => (store.target = undefined, new Response("ok")));
    expect(store.health).toEqual(initialHealth());
    expect(alarm.log).toEqual([]);
  });

  it("sends the named secret's header, and fails without sending when the secret is missing", async () => {
    const withSecret = make({ secrets: { KEY: "s3cret" } });
    await withSecret.monitor.watch({ ...target, credential: { authorizationSecret: "KEY", scheme: "x-api-key" } });
    const { sent, f } = fetchLog();
    await withSecret.monitor.alarm(f);
    expect(sent.map((s) => s.headers)).toEqual([{ "x-api-key": "s3cret" }]);

    const without = make();
    await without.monitor.watch({ ...target, credential: { authorizationSecret: "KEY", scheme: "bearer" } });
    const none = fetchLog();
    await without.monitor.alarm(none.f);
    expect(none.sent).toEqual([]);
    expect(await without.monitor.state()).toMatchObject({ lastOk: false, lastReason: "credential_missing: KEY", lastLatencyMs: 0 });
  });

  it("refuses a target the egress rules refuse, read at probe time, without sending it", async () => {
    let allow: readonly string[] = [];
    const { monitor: guarded } = make({ egress: () => ({ allow }) });
    await guarded.watch({ ...target, url: "http://127.0.0.1:9901/health" });
    const { sent, f } = fetchLog();
    await guarded.alarm(f);
    expect(sent).toEqual([]);
    expect(await guarded.state()).toMatchObject({ lastOk: false, lastReason: expect.stringMatching(/^egress_refused: /) });
    allow = ["127.0.0.1:9901"];
    await guarded.alarm(f);
    expect(sent.map((s) => s.url)).toEqual(["http://127.0.0.1:9901/health"]);
  });

  it("hands an MCP target to the MCP probe, with its credential headers", async () => {
    const { monitor, mcpCalls } = make({ secrets: { TOKEN: "t" } });
    await monitor.watch({ ...target, method: "POST", mcp: { era: "stateless" }, credential: { authorizationSecret: "TOKEN", scheme: "bearer" } });
    const { sent, f } = fetchLog();
    await monitor.alarm(f);
    expect(sent).toEqual([]);
    expect(mcpCalls).toEqual([`${target.url} {"authorization":"Bearer t"}`]);
    expect(await monitor.state()).toMatchObject({ status: "healthy", lastReason: "ok" });
  });
});
