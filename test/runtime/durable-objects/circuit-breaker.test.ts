import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { CircuitBreaker } from "../../../durable-objects/circuit-breaker.ts";
import type { BreakerConfigInput } from "../../../src/traffic/breaker.ts";
import { breakerClient } from "../../../src/traffic/breaker-client.ts";

/** Opens on the first failure and is due for probing at once (openMs 0), 3 probe slots. */
const cfg: BreakerConfigInput = { minSamples: 1, failureRatio: 0.5, openMs: 0, halfOpenProbes: 3, halfOpenSuccesses: 2, permitTtlMs: 60_000 };

describe("CircuitBreaker Durable Object", () => {
  it("hands out exactly halfOpenProbes permits to 20 concurrent acquires", async () => {
    const stub = env.CIRCUIT_BREAKER.getByName("backend-concurrent");
    // openMs 0: the breaker opened and is due for probing at once, so it already reads half-open.
    expect(await stub.report("failure", undefined, cfg)).toMatchObject({ state: "half_open", opens: 1 });
    const answers = await Promise.all(Array.from({ length: 20 }, () => stub.acquire(cfg)));
    const granted = answers.filter((a) => a.allowed);
    expect(granted).toHaveLength(3);
    expect(granted.every((a) => a.probe)).toBe(true);
    expect(new Set(granted.map((a) => a.permitId)).size).toBe(3);
    expect(await stub.state(cfg)).toMatchObject({ state: "half_open", permitsOutstanding: 3 });

    // Two probe successes close it; the third permit's late outcome is then an ordinary sample.
    await stub.report("success", granted[0]!.permitId, cfg);
    expect((await stub.report("success", granted[1]!.permitId, cfg)).state).toBe("closed");
    expect(await stub.acquire(cfg)).toMatchObject({ allowed: true, probe: false, snapshot: { state: "closed" } });
  });

  it("re-opens on a probe failure", async () => {
    const stub = env.CIRCUIT_BREAKER.getByName("backend-reopen");
    await stub.report("failure", undefined, cfg);
    const probe = await stub.acquire({ ...cfg, openMs: 0 });
    expect(probe.probe).toBe(true);
    const after = await stub.report("failure", probe.permitId, { ...cfg, openMs: 60_000 });
    expect(after).toMatchObject({ state: "open", opens: 2 });
    expect((await stub.acquire({ ...cfg, openMs: 60_000 })).allowed).toBe(false);
  });

  it("keeps one breaker per backend id", async () => {
    await env.CIRCUIT_BREAKER.getByName("backend-a").reportMany({ successes: 0, failures: 5 }, { ...cfg, openMs: 60_000 });
    expect((await env.CIRCUIT_BREAKER.getByName("backend-a").state({ ...cfg, openMs: 60_000 })).state).toBe("open");
    expect((await env.CIRCUIT_BREAKER.getByName("backend-b").state(cfg)).state).toBe("closed");
  });

  it("persists its state in SQLite: a fresh instance (as after eviction) continues from it", async () => {
    const stub = env.CIRCUIT_BREAKER.getByName("backend-persist");
    const slow = { ...cfg, minSamples: 10, openMs: 60_000 };
    await runInDurableObject(stub, async (instance: CircuitBreaker) => {
      await instance.reportMany({ successes: 3, failures: 2 }, slow);
      await instance.report("failure", undefined, slow);
    });
    await runInDurableObject(stub, async (instance: CircuitBreaker, state) => {
      expect(await instance.state(slow)).toMatchObject({ state: "closed", samples: 6, failures: 3 });
      const rows = state.storage.sql.exec<{ data: string }>("SELECT data FROM breaker").toArray();
      expect(rows).toHaveLength(1);
      const reborn = new CircuitBreaker(state, env);
      expect(await reborn.state(slow)).toMatchObject({ state: "closed", samples: 6, failures: 3 });
      await reborn.reportMany({ successes: 0, failures: 4 }, slow);
    });
    expect(await stub.state(slow)).toMatchObject({ state: "open", opens: 1 });
  });

  it("rejects an invalid config without touching its state", async () => {
    const stub = env.CIRCUIT_BREAKER.getByName("backend-bad-config");
    // Called in the object, not over RPC: the test pool's RPC wrapper logs every remote throw as uncaught.
    await runInDurableObject(stub, async (instance: CircuitBreaker) => {
      await expect(instance.report("failure", undefined, { failureRatio: 2 })).rejects.toThrow(RangeError);
      await expect(instance.acquire({ halfOpenProbes: 0 })).rejects.toThrow(/halfOpenProbes/);
      await expect(instance.report("bogus" as never, undefined, cfg)).rejects.toThrow(/outcome/);
    });
    expect(await stub.state(cfg)).toMatchObject({ state: "closed", samples: 0 });
  });

  it("works through breakerClient over the namespace, with the caller's config", async () => {
    const client = breakerClient((id) => env.CIRCUIT_BREAKER.getByName(id), { ...cfg, openMs: 60_000 });
    expect((await client.report("backend-client", "failure")).state).toBe("open");
    expect((await client.acquire("backend-client")).allowed).toBe(false);
    expect((await client.state("backend-client")).openUntil).toBeGreaterThan(Date.now());
  });
});
