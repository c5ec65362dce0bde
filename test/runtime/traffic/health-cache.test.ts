import { describe, expect, it } from "vitest";
import type { Schedule } from "../../../src/traffic/breaker-cache.ts";
import { initialHealth, probeTargetKey, resolveProbeTarget, type ProbeTarget } from "../../../src/traffic/health.ts";
import { HealthCache, type HealthCacheOptions } from "../../../src/traffic/health-cache.ts";
import type { HealthClient, HealthView } from "../../../src/traffic/health-client.ts";
import { FakeClock } from "./helpers.ts";

const target: ProbeTarget = { url: "https://backend.test/health", method: "GET", headers: {}, timeoutMs: 1000, intervalMs: 10_000, jitterRatio: 0.2 };

function view(over: Partial<HealthView> = {}): HealthView {
  return { ...initialHealth(), watching: true, targetKey: "k", nextProbeAt: undefined, ...over };
}

/** A monitor client whose answers the test sets, recording every call. */
class FakeClient implements HealthClient {
  readonly calls: string[] = [];
  readonly watched: Array<{ id: string; target: ProbeTarget }> = [];
  views = new Map<string, HealthView>();
  fail: "throw" | "reject" | undefined;
  gate: Promise<void> | undefined;

  async #answer<T>(call: string, value: () => T): Promise<T> {
    this.calls.push(call);
    if (this.fail === "reject") throw new Error(`${call} failed`);
    if (this.gate) await this.gate;
    return value();
  }
  watch(id: string, t: ProbeTarget): Promise<HealthView> {
    if (this.fail === "throw") throw new Error("sync throw");
    return this.#answer(`watch:${id}`, () => (this.watched.push({ id, target: t }), this.views.get(id) ?? view()));
  }
  state(id: string): Promise<HealthView> {
    if (this.fail === "throw") throw new Error("sync throw");
    return this.#answer(`state:${id}`, () => this.views.get(id) ?? view({ watching: false, targetKey: undefined }));
  }
  async unwatch(id: string): Promise<void> {
    this.calls.push(`unwatch:${id}`);
  }
}

class Background {
  readonly work: Promise<unknown>[] = [];
  readonly schedule: Schedule = (p) => void this.work.push(p);
  async settle(): Promise<void> {
    while (this.work.length > 0) await Promise.all(this.work.splice(0));
  }
}

function setup(options: HealthCacheOptions = {}) {
  const clock = new FakeClock(1_000_000);
  const client = new FakeClient();
  const bg = new Background();
  const errors: Array<{ id: string; op: string }> = [];
  const cache = new HealthCache(client, clock, { ttlMs: 1000, onError: (_e, id, op) => errors.push({ id, op }), ...options });
  return { clock, client, bg, errors, cache, gate: cache.forRequest(bg.schedule) };
}

describe("HealthCache", () => {
  it("answers healthy for a backend never seen, and fetches its state in the background", async () => {
    const { client, bg, gate } = setup();
    client.views.set("a", view({ status: "unhealthy" }));
    expect(gate.isHealthy("a")).toBe(true);
    expect(gate.status("a")).toBe("unknown");
    expect(client.calls).toEqual(["state:a"]);
    await bg.settle();
    expect(gate.isHealthy("a")).toBe(false);
    expect(gate.status("a")).toBe("unhealthy");
  });

  it("serves the view for ttlMs, then refreshes once in the background", async () => {
    const { client, bg, clock, gate } = setup();
    client.views.set("a", view({ status: "unhealthy" }));
    gate.isHealthy("a");
    await bg.settle();
    for (let i = 0; i < 10; i++) gate.isHealthy("a");
    expect(client.calls).toEqual(["state:a"]);
    clock.advance(1000);
    client.views.set("a", view({ status: "healthy" }));
    let release!: () => void;
    client.gate = new Promise((r) => (release = r));
    for (let i = 0; i < 10; i++) expect(gate.isHealthy("a")).toBe(false); // stale view served while refreshing
    expect(client.calls).toEqual(["state:a", "state:a"]); // one refresh in flight, not ten
    release();
    await bg.settle();
    expect(gate.isHealthy("a")).toBe(true);
  });

  it("fails open: an unreachable monitor forgets the view, reports the error and retries after one TTL", async () => {
    const { client, bg, clock, gate, errors } = setup();
    client.views.set("a", view({ status: "unhealthy" }));
    gate.isHealthy("a");
    await bg.settle();
    expect(gate.isHealthy("a")).toBe(false);
    clock.advance(1000);
    client.fail = "reject";
    gate.isHealthy("a");
    await bg.settle();
    expect(gate.isHealthy("a")).toBe(true);
    expect(errors).toEqual([{ id: "a", op: "state" }]);
    const n = client.calls.length;
    gate.isHealthy("a");
    expect(client.calls.length).toBe(n);
    clock.advance(1000);
    client.fail = "throw";
    expect(gate.isHealthy("a")).toBe(true);
    await bg.settle();
    expect(errors).toHaveLength(2);
  });

  it("never throws into the caller, even when schedule or onError throw", async () => {
    const clock = new FakeClock(0);
    const client = new FakeClient();
    client.fail = "throw";
    const cache = new HealthCache(client, clock, {
      onError: () => {
        throw new Error("handler boom");
      },
    });
    const gate = cache.forRequest(() => {
      throw new Error("schedule boom");
    });
    expect(gate.isHealthy("a")).toBe(true);
    expect(() => gate.ensureWatched("a", target)).not.toThrow();
    expect(() => gate.ensureWatched("a", { ...target, timeoutMs: -1 })).not.toThrow();
  });

  it("calls watch once per isolate per target, again when the target changes", async () => {
    const { client, bg, gate } = setup();
    gate.ensureWatched("a", target);
    gate.ensureWatched("a", target); // in flight: not sent again
    await bg.settle();
    gate.ensureWatched("a", { ...target, headers: {} });
    gate.ensureWatched("b", target);
    await bg.settle();
    expect(client.calls).toEqual(["watch:a", "watch:b"]);
    gate.ensureWatched("a", { ...target, intervalMs: 5000 });
    await bg.settle();
    expect(client.calls).toEqual(["watch:a", "watch:b", "watch:a"]);
    expect(client.watched.at(-1)!.target.intervalMs).toBe(5000);
  });

  it("applies the watch answer to the view", async () => {
    const { client, bg, gate } = setup();
    client.views.set("a", view({ status: "unhealthy" }));
    gate.ensureWatched("a", target);
    await bg.settle();
    expect(gate.status("a")).toBe("unhealthy");
    expect(client.calls).toEqual(["watch:a"]); // the watch answer is fresh: no extra state call
  });

  it("re-sends watch after a failure only after watchRetryMs", async () => {
    const { client, bg, clock, gate, errors } = setup({ watchRetryMs: 5000 });
    client.fail = "reject";
    gate.ensureWatched("a", target);
    await bg.settle();
    expect(errors).toEqual([{ id: "a", op: "watch" }]);
    client.fail = undefined;
    gate.ensureWatched("a", target);
    expect(client.calls).toEqual(["watch:a"]);
    clock.advance(5000);
    gate.ensureWatched("a", target);
    await bg.settle();
    expect(client.calls).toEqual(["watch:a", "watch:a"]);
    gate.ensureWatched("a", target);
    expect(client.calls).toHaveLength(2);
  });

  it("re-sends watch when a refresh shows the monitor no longer watching", async () => {
    const { client, bg, clock, gate } = setup();
    gate.ensureWatched("a", target);
    await bg.settle();
    clock.advance(1000);
    client.views.set("a", view({ watching: false, targetKey: undefined }));
    gate.isHealthy("a");
    await bg.settle();
    gate.ensureWatched("a", target);
    await bg.settle();
    expect(client.calls).toEqual(["watch:a", "state:a", "watch:a"]);
  });

  it("reports an invalid target once per retry period and never sends it", async () => {
    const { client, bg, gate, errors } = setup();
    gate.ensureWatched("a", { ...target, url: "nope" });
    gate.ensureWatched("a", { ...target, url: "nope" });
    await bg.settle();
    expect(client.calls).toEqual([]);
    expect(errors).toEqual([{ id: "a", op: "watch" }]);
  });

  it("keys targets like the monitor does (resolved, canonical)", () => {
    expect(probeTargetKey(resolveProbeTarget({ ...target, headers: { "X-A": "1" } }))).toBe(probeTargetKey(resolveProbeTarget({ ...target, headers: { "x-a": "1" } })));
  });

  it("drops the least recently used backend past maxEntries", async () => {
    const { gate, cache, bg } = setup({ maxEntries: 2 });
    gate.isHealthy("a");
    gate.isHealthy("b");
    gate.isHealthy("c");
    await bg.settle();
    expect(cache.size).toBe(2);
  });

  it("rejects invalid options", () => {
    const c = new FakeClient();
    expect(() => new HealthCache(c, new FakeClock(), { ttlMs: -1 })).toThrow(RangeError);
    expect(() => new HealthCache(c, new FakeClock(), { maxEntries: 0 })).toThrow(RangeError);
  });
});
