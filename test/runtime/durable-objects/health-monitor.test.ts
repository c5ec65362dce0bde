import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { HealthMonitor } from "../../../durable-objects/health-monitor.ts";
import type { ProbeFetch, ProbeTarget } from "../../../src/traffic/health.ts";
import { healthClient } from "../../../src/traffic/health-client.ts";
import { FORBIDDEN_TARGETS } from "../support/egress-targets.ts";

/**
 * A day's interval: a watched target's first probe is jittered into the first 10% of it (8,640 s),
 * so the object's real alarm never fires while a test runs; the tests run it themselves
 * (runDurableObjectAlarm), which with a short interval could find it already fired.
 */
const DAY_MS = 86_400_000;
const target: ProbeTarget = { url: "https://backend.test/health", method: "GET", headers: {}, timeoutMs: 1000, intervalMs: DAY_MS, jitterRatio: 0.1, unhealthyAfter: 2, healthyAfter: 2 };

/** Points the object's probes at `fetchFn` (the instance stays in memory between test calls). */
async function useFetch(name: string, fetchFn: ProbeFetch): Promise<void> {
  await runInDurableObject(env.HEALTH_MONITOR.getByName(name), async (instance: HealthMonitor) => {
    instance.probeFetch = fetchFn;
  });
}

describe("HealthMonitor Durable Object", () => {
  it("watch stores the target and arms one alarm; a second watch does not re-schedule it", async () => {
    const stub = env.HEALTH_MONITOR.getByName("backend-watch");
    const before = Date.now();
    const first = await stub.watch(target);
    expect(first).toMatchObject({ status: "unknown", watching: true, consecutiveFailures: 0 });
    let alarm: number | null = null;
    await runInDurableObject(stub, async (_i: HealthMonitor, state) => {
      alarm = await state.storage.getAlarm();
      const rows = state.storage.sql.exec<{ target: string }>("SELECT target FROM health").toArray();
      expect(rows).toHaveLength(1);
      expect(JSON.parse(rows[0]!.target)).toMatchObject({ url: target.url, intervalMs: DAY_MS });
    });
    expect(alarm).not.toBeNull();
    expect(alarm!).toBeGreaterThanOrEqual(before);
    expect(alarm!).toBeLessThanOrEqual(Date.now() + DAY_MS * 0.1); // first probe within jitterRatio of an interval

    const second = await stub.watch(target);
    expect(second.nextProbeAt).toBe(alarm);
    await runInDurableObject(stub, async (_i: HealthMonitor, state) => {
      expect(await state.storage.getAlarm()).toBe(alarm);
    });
  });

  it("the alarm probes, records the result and re-arms within the jittered interval", async () => {
    const name = "backend-alarm";
    const stub = env.HEALTH_MONITOR.getByName(name);
    const calls: string[] = [];
    let status = 503;
    await stub.watch(target);
    await useFetch(name, async (url) => (calls.push(url), new Response(null, { status })));

    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await stub.state()).toMatchObject({ status: "unknown", consecutiveFailures: 1, lastOk: false, lastReason: "http_503" });
    const t = Date.now();
    const next = (await stub.state()).nextProbeAt!;
    expect(next).toBeGreaterThanOrEqual(t + DAY_MS * 0.9 - 1_000);
    expect(next).toBeLessThanOrEqual(t + DAY_MS * 1.1);

    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await stub.state()).toMatchObject({ status: "unhealthy", consecutiveFailures: 2 });

    status = 200;
    await runDurableObjectAlarm(stub);
    expect(await stub.state()).toMatchObject({ status: "unhealthy", consecutiveSuccesses: 1 });
    await runDurableObjectAlarm(stub);
    const s = await stub.state();
    expect(s).toMatchObject({ status: "healthy", consecutiveSuccesses: 2, consecutiveFailures: 0, lastOk: true, lastReason: "ok", watching: true });
    expect(s.lastProbeAt).toBeTypeOf("number");
    expect(calls).toEqual(Array(4).fill(target.url));
  });

  it("reads a named secret from its env at probe time and never stores its value", async () => {
    const name = "backend-secret";
    const stub = env.HEALTH_MONITOR.getByName(name);
    const seen: Array<Record<string, string>> = [];
    await stub.watch({ ...target, credential: { authorizationSecret: "SIMULATOR_API_KEY", scheme: "bearer" } });
    await useFetch(name, async (_url, init) => (seen.push(init.headers as Record<string, string>), new Response("ok")));
    await runDurableObjectAlarm(stub);
    expect(seen).toEqual([{ authorization: `Bearer ${env.SIMULATOR_API_KEY}` }]);
    await runInDurableObject(stub, async (_i: HealthMonitor, state) => {
      const dump = JSON.stringify(state.storage.sql.exec("SELECT * FROM health").toArray());
      expect(dump).toContain("SIMULATOR_API_KEY");
      expect(dump).not.toContain(env.SIMULATOR_API_KEY);
    });
  });

  it("fails the probe without sending it when the named secret is missing", async () => {
    const name = "backend-nosecret";
    const stub = env.HEALTH_MONITOR.getByName(name);
    let sent = 0;
    await stub.watch({ ...target, credential: { authorizationSecret: "NO_SUCH_SECRET", scheme: "x-api-key" } });
    await useFetch(name, async () => (sent++, new Response("ok")));
    await runDurableObjectAlarm(stub);
    expect(sent).toBe(0);
    expect(await stub.state()).toMatchObject({ lastOk: false, lastReason: "credential_missing: NO_SUCH_SECRET" });
  });

  it("a probe that never answers fails as timeout", async () => {
    const name = "backend-hang";
    const stub = env.HEALTH_MONITOR.getByName(name);
    await stub.watch({ ...target, timeoutMs: 10 });
    await useFetch(name, () => new Promise<Response>(() => {}));
    await runDurableObjectAlarm(stub);
    expect(await stub.state()).toMatchObject({ lastOk: false, lastReason: "timeout", consecutiveFailures: 1 });
  });

  it("unwatch deletes everything and stops probing; a later watch starts fresh", async () => {
    const name = "backend-unwatch";
    const stub = env.HEALTH_MONITOR.getByName(name);
    await stub.watch(target);
    await useFetch(name, async () => new Response(null, { status: 500 }));
    await runDurableObjectAlarm(stub);
    await stub.unwatch();
    expect(await stub.state()).toMatchObject({ status: "unknown", watching: false, consecutiveFailures: 0, nextProbeAt: undefined });
    expect(await runDurableObjectAlarm(stub)).toBe(false);
    expect(await stub.watch(target)).toMatchObject({ watching: true, status: "unknown" });
  });

  it("rejects an invalid target with a RangeError", async () => {
    // Called in the object, not over RPC: the test pool's RPC wrapper logs every remote throw as uncaught.
    await runInDurableObject(env.HEALTH_MONITOR.getByName("backend-bad"), async (instance: HealthMonitor, state) => {
      await expect(instance.watch({ ...target, headers: { authorization: "Bearer sk" } })).rejects.toThrow(RangeError);
      expect(await state.storage.getAlarm()).toBeNull();
    });
  });

  it("refuses at probe time, without sending, every stored target the egress guard refuses", async () => {
    // watch() stores whatever the isolate hands it, as an object watched before the guard existed
    // would hold it: only the probe itself is guarded (by the bundled gateway.yaml's policy).
    for (const [i, { url, what }] of FORBIDDEN_TARGETS.entries()) {
      const name = `backend-egress-${i}`;
      const stub = env.HEALTH_MONITOR.getByName(name);
      let sent = 0;
      const stored = await runInDurableObject(stub, async (instance: HealthMonitor) => {
        instance.probeFetch = async () => (sent++, new Response("ok"));
        try {
          await instance.watch({ ...target, url: `${url}/models` });
          return true;
        } catch (err) {
          // A URL no parser accepts (a zone id) cannot even be stored.
          expect(err, what).toBeInstanceOf(RangeError);
          return false;
        }
      });
      if (!stored) continue;
      expect(await runDurableObjectAlarm(stub), what).toBe(true);
      expect(sent, what).toBe(0);
      expect(await stub.state(), what).toMatchObject({ lastOk: false, lastReason: expect.stringMatching(/^egress_refused: /) });
    }
  });

  it("probes the allowlisted simulator address", async () => {
    const name = "backend-egress-allowed";
    const stub = env.HEALTH_MONITOR.getByName(name);
    const calls: string[] = [];
    await stub.watch({ ...target, url: "http://127.0.0.1:9901/v1/models" });
    await useFetch(name, async (url, init) => (calls.push(`${url} ${init.redirect}`), new Response("ok")));
    await runDurableObjectAlarm(stub);
    expect(calls).toEqual(["http://127.0.0.1:9901/v1/models manual"]);
    expect(await stub.state()).toMatchObject({ lastOk: true, lastReason: "ok" });
  });

  it("serves a HealthClient over per-backend objects", async () => {
    const client = healthClient((id) => env.HEALTH_MONITOR.getByName(id));
    await client.watch("backend-client-a", target);
    expect((await client.state("backend-client-a")).watching).toBe(true);
    expect((await client.state("backend-client-b")).watching).toBe(false);
  });
});
