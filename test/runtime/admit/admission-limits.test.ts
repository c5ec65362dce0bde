import { describe, expect, it } from "vitest";
import { AdmissionController, type AdmissionLease } from "../../../src/admit/admission.ts";
import { FakeClock } from "../traffic/helpers.ts";
import { ManualScheduler, setup, NO_DEADLINE, flush, track, admitNow, expectIdle } from "./admission-support.ts";

describe("AdmissionController limits", () => {
  it("admits everything when no level is limited", async () => {
    const { ctl } = setup();
    const leases = await Promise.all(Array.from({ length: 500 }, (_, i) => admitNow(ctl, { tenant: `t${i % 7}`, model: "m" })));
    expect(ctl.stats().inFlight.global).toBe(500);
    expect(ctl.stats().queued.total).toBe(0);
    for (const l of leases) l.release();
    expectIdle(ctl);
  });

  it("enforces the process-wide limit", async () => {
    const { ctl } = setup({ limits: { global: 2 } });
    const a = await admitNow(ctl, { tenant: "t1", model: "m1" });
    await admitNow(ctl, { tenant: "t2", model: "m2" });
    const third = track(ctl.admit({ tenant: "t3", model: "m3" }, NO_DEADLINE));
    await flush();
    expect(third.result).toBeUndefined();
    expect(ctl.stats().queued).toEqual({ total: 1, byTenant: { t3: 1 } });
    a.release();
    await flush();
    expect(third.result?.ok).toBe(true);
    expect(ctl.stats().inFlight.global).toBe(2);
  });

  it("enforces the per-tenant limit without affecting other tenants", async () => {
    const { ctl } = setup({ limits: { perTenant: 1 } });
    const a1 = await admitNow(ctl, { tenant: "a", model: "m" });
    const a2 = track(ctl.admit({ tenant: "a", model: "m" }, NO_DEADLINE));
    await admitNow(ctl, { tenant: "b", model: "m" });
    await flush();
    expect(a2.result).toBeUndefined();
    expect(ctl.stats().inFlight.tenant).toEqual({ a: 1, b: 1 });
    a1.release();
    await flush();
    expect(a2.result?.ok).toBe(true);
  });

  it("enforces the per-model limit across tenants", async () => {
    const { ctl } = setup({ limits: { perModel: 2 } });
    await admitNow(ctl, { tenant: "a", model: "big" });
    const b = await admitNow(ctl, { tenant: "b", model: "big" });
    const c = track(ctl.admit({ tenant: "c", model: "big" }, NO_DEADLINE));
    await admitNow(ctl, { tenant: "c", model: "small" });
    await flush();
    expect(c.result).toBeUndefined();
    expect(ctl.stats().inFlight.model).toEqual({ big: 2, small: 1 });
    b.release();
    await flush();
    expect(c.result?.ok).toBe(true);
  });

  it("admits a waiter only when every one of its levels has room", async () => {
    const { ctl } = setup({ limits: { perTenant: 1, perModel: 1 } });
    const holdsTenant = await admitNow(ctl, { tenant: "a", model: "other" });
    const holdsModel = await admitNow(ctl, { tenant: "b", model: "x" });
    const w = track(ctl.admit({ tenant: "a", model: "x" }, NO_DEADLINE));
    holdsTenant.release();
    await flush();
    expect(w.result).toBeUndefined(); // tenant free, model still full
    holdsModel.release();
    await flush();
    expect(w.result?.ok).toBe(true);
    expect(ctl.stats().inFlight).toEqual({ global: 1, tenant: { a: 1 }, model: { x: 1 }, backend: {} });
  });

  it("rejects invalid configuration", () => {
    const clock = new FakeClock();
    const s = new ManualScheduler(clock);
    expect(() => new AdmissionController(clock, s, { limits: { global: 0 } })).toThrow(RangeError);
    expect(() => new AdmissionController(clock, s, { limits: { perModel: 1.5 } })).toThrow(RangeError);
    expect(() => new AdmissionController(clock, s, { maxQueue: -1 })).toThrow(RangeError);
    expect(() => new AdmissionController(clock, s, { maxQueuePerTenant: Number.NaN })).toThrow(RangeError);
    expect(() => new AdmissionController(clock, s, { holdAlpha: 0 })).toThrow(RangeError);
    expect(() => new AdmissionController(clock, s, { maxBypass: 0 })).toThrow(RangeError);
    expect(() => new AdmissionController(clock, s, { initialHoldMs: Infinity })).toThrow(RangeError);
  });

  it("rejects malformed requests as a caller bug, without counting anything", async () => {
    const { ctl } = setup();
    await expect(ctl.admit({ tenant: "a", model: "m" }, { deadlineAt: Number.NaN })).rejects.toThrow(RangeError);
    await expect(ctl.admit({ tenant: 1 as unknown as string, model: "m" }, NO_DEADLINE)).rejects.toThrow(TypeError);
    expectIdle(ctl);
  });
});

describe("AdmissionController backend level", () => {
  it("grants backend slots without waiting, moves them on failover and frees them with the lease", async () => {
    const { ctl } = setup({ limits: { perBackend: 1 } });
    const l1 = await admitNow(ctl, { tenant: "a", model: "m" });
    const l2 = await admitNow(ctl, { tenant: "b", model: "m" });
    expect(ctl.hasBackendRoom("b1")).toBe(true);
    expect(l1.acquireBackend("b1")).toEqual({ ok: true });
    expect(l1.acquireBackend("b1")).toEqual({ ok: true }); // no-op, not a second slot
    expect(ctl.hasBackendRoom("b1")).toBe(false);
    const refused = l2.acquireBackend("b1");
    expect(refused.ok).toBe(false);
    if (!refused.ok) {
      expect(refused.reason).toBe("backend_full");
      expect(refused.retryAfterSeconds).toBeGreaterThanOrEqual(1);
      expect(refused.retryAfterSeconds).toBeLessThanOrEqual(60);
    }
    expect(l2.backend).toBeUndefined();
    expect(l2.acquireBackend("b2")).toEqual({ ok: true });
    expect(ctl.stats().inFlight.backend).toEqual({ b1: 1, b2: 1 });
    // Failover: l1 moves from b1 to b3; b1 is free again.
    expect(l1.acquireBackend("b3")).toEqual({ ok: true });
    expect(l1.backend).toBe("b3");
    expect(ctl.stats().inFlight.backend).toEqual({ b2: 1, b3: 1 });
    l2.release();
    l2.release();
    expect(ctl.stats().inFlight.backend).toEqual({ b3: 1 });
    l1.release();
    expectIdle(ctl);
    expect(() => l1.acquireBackend("b1")).toThrow(/released/);
  });

  it("a failed move leaves the lease with no backend slot", async () => {
    const { ctl } = setup({ limits: { perBackend: 1 } });
    const l1 = await admitNow(ctl, { tenant: "a", model: "m" });
    const l2 = await admitNow(ctl, { tenant: "a", model: "m" });
    l1.acquireBackend("x");
    l2.acquireBackend("y");
    expect(l1.acquireBackend("y").ok).toBe(false);
    expect(l1.backend).toBeUndefined();
    expect(ctl.stats().inFlight.backend).toEqual({ y: 1 });
    l1.release();
    l2.release();
    expectIdle(ctl);
  });

  it("with the backend known up front, waits for all four levels and wakes on a backend slot", async () => {
    const { ctl } = setup({ limits: { perBackend: 1 } });
    const holder = await admitNow(ctl, { tenant: "a", model: "m", backend: "b1" });
    expect(holder.backend).toBe("b1");
    const w = track(ctl.admit({ tenant: "b", model: "m", backend: "b1" }, NO_DEADLINE));
    await flush();
    expect(w.result).toBeUndefined();
    expect(holder.acquireBackend("b2").ok).toBe(true); // moving away frees b1: the waiter can go
    await flush();
    expect(w.lease().backend).toBe("b1");
    expect(ctl.stats().inFlight).toEqual({ global: 2, tenant: { a: 1, b: 1 }, model: { m: 2 }, backend: { b1: 1, b2: 1 } });
  });
});

describe("AdmissionController leases", () => {
  it("release is idempotent and cannot free another lease's slot", async () => {
    const { ctl } = setup({ limits: { global: 2 } });
    const a = await admitNow(ctl, { tenant: "t", model: "m" });
    const b = await admitNow(ctl, { tenant: "t", model: "m" });
    a.release();
    a.release();
    a.release();
    expect(a.released).toBe(true);
    expect(b.released).toBe(false);
    expect(ctl.stats().inFlight.global).toBe(1);
    b.release();
    expectIdle(ctl);
  });

});

describe("AdmissionController queue", () => {
  it("refuses with queue_full past the overall bound", async () => {
    const { ctl } = setup({ limits: { global: 1 }, maxQueue: 3 });
    await admitNow(ctl, { tenant: "t0", model: "m" });
    for (let i = 1; i <= 3; i++) ctl.admit({ tenant: `t${i}`, model: "m" }, NO_DEADLINE);
    const r = await ctl.admit({ tenant: "t4", model: "m" }, NO_DEADLINE);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toBe("queue_full");
    expect(ctl.stats().queued.total).toBe(3);
  });

  it("refuses with queue_full past the per-tenant bound while other tenants may still queue", async () => {
    const { ctl } = setup({ limits: { global: 1 }, maxQueue: 10, maxQueuePerTenant: 2 });
    await admitNow(ctl, { tenant: "a", model: "m" });
    ctl.admit({ tenant: "a", model: "m" }, NO_DEADLINE);
    ctl.admit({ tenant: "a", model: "m" }, NO_DEADLINE);
    const third = await ctl.admit({ tenant: "a", model: "m" }, NO_DEADLINE);
    expect(third).toMatchObject({ ok: false, reason: "queue_full" });
    const other = track(ctl.admit({ tenant: "b", model: "m" }, NO_DEADLINE));
    await flush();
    expect(other.result).toBeUndefined();
    expect(ctl.stats().queued).toEqual({ total: 3, byTenant: { a: 2, b: 1 } });
  });

  it("with maxQueue 0, fails fast instead of queueing", async () => {
    const { ctl } = setup({ limits: { perModel: 1 }, maxQueue: 0 });
    const l = await admitNow(ctl, { tenant: "a", model: "m" });
    expect(await ctl.admit({ tenant: "b", model: "m" }, NO_DEADLINE)).toMatchObject({ ok: false, reason: "queue_full" });
    expect((await ctl.admit({ tenant: "b", model: "other" }, NO_DEADLINE)).ok).toBe(true);
    l.release();
  });

  it("is FIFO within a tenant", async () => {
    const { ctl } = setup({ limits: { global: 1 } });
    const holder = await admitNow(ctl, { tenant: "a", model: "m" });
    const order: number[] = [];
    const leases: AdmissionLease[] = [];
    for (let i = 0; i < 10; i++) {
      ctl.admit({ tenant: "a", model: "m" }, NO_DEADLINE).then((r) => {
        order.push(i);
        if (r.ok) leases.push(r.lease);
      });
    }
    holder.release();
    for (let i = 0; i < 10; i++) {
      await flush();
      expect(order.length).toBe(i + 1);
      leases[i]!.release();
    }
    expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expectIdle(ctl);
  });

  it("is fair across tenants: a 5-request tenant behind a 50-request burst is served within 10 releases", async () => {
    const { ctl } = setup({ limits: { global: 1 } });
    let current = await admitNow(ctl, { tenant: "x", model: "m" });
    const admitted: string[] = [];
    const pending: AdmissionLease[] = [];
    const enqueue = (tenant: string, i: number) =>
      ctl.admit({ tenant, model: "m" }, NO_DEADLINE).then((r) => {
        admitted.push(`${tenant}${i}`);
        if (r.ok) pending.push(r.lease);
      });
    for (let i = 0; i < 50; i++) enqueue("A", i);
    for (let i = 0; i < 5; i++) enqueue("B", i);
    expect(ctl.stats().queued.byTenant).toEqual({ A: 50, B: 5 });
    for (let releases = 0; releases < 55; releases++) {
      current.release();
      await flush();
      expect(pending.length).toBe(1);
      current = pending.pop()!;
    }
    current.release();
    const firstTen = admitted.slice(0, 10);
    expect(firstTen.filter((n) => n.startsWith("B"))).toEqual(["B0", "B1", "B2", "B3", "B4"]);
    expect(firstTen).toEqual(["A0", "B0", "A1", "B1", "A2", "B2", "A3", "B3", "A4", "B4"]);
    expect(admitted.filter((n) => n.startsWith("A"))).toEqual(Array.from({ length: 50 }, (_, i) => `A${i}`));
    expectIdle(ctl);
  });

  it("lets a waiter of a tenant overtake its blocked elder only for another free level", async () => {
    const { ctl } = setup({ limits: { perModel: 1 } });
    const holdsX = await admitNow(ctl, { tenant: "z", model: "x" });
    const holdsY = await admitNow(ctl, { tenant: "z", model: "y" });
    const wx = track(ctl.admit({ tenant: "a", model: "x" }, NO_DEADLINE));
    const wy = track(ctl.admit({ tenant: "a", model: "y" }, NO_DEADLINE));
    holdsY.release();
    await flush();
    expect(wx.result).toBeUndefined();
    expect(wy.result?.ok).toBe(true);
    holdsX.release();
    await flush();
    expect(wx.result?.ok).toBe(true);
  });

  /**
   * V needs tenant "v" (limit 1) and model "x" (limit 1). Whenever one frees, the other is busy and
   * a younger request that needs only the freed one takes it. Returns the round V got in, if any.
   */
  async function alternatingLevels(maxBypass: number): Promise<number | undefined> {
    const { ctl } = setup({ limits: { perTenant: 1, perModel: 1 }, maxBypass });
    let tenantHolder = await admitNow(ctl, { tenant: "v", model: "other0" });
    let modelHolder = await admitNow(ctl, { tenant: "w0", model: "x" });
    const v = track(ctl.admit({ tenant: "v", model: "x" }, NO_DEADLINE));
    let round = 1;
    for (; round <= 20 && v.result === undefined; round++) {
      // Queue a rival for each level, then free the levels one at a time.
      const forTenant = track(ctl.admit({ tenant: "v", model: `other${round}` }, NO_DEADLINE));
      const forModel = track(ctl.admit({ tenant: `w${round}`, model: "x" }, NO_DEADLINE));
      tenantHolder.release();
      await flush();
      if (forTenant.result?.ok) tenantHolder = forTenant.lease();
      modelHolder.release();
      await flush();
      if (forModel.result?.ok) modelHolder = forModel.lease();
      if (v.result !== undefined) break;
    }
    if (v.result === undefined) return undefined;
    expect(v.result.ok).toBe(true);
    expect(ctl.stats().starving).toBe(0);
    return round;
  }

  it("bounds overtaking: a waiter blocked at alternating levels is admitted after maxBypass bypasses", async () => {
    // Control: with an effectively unbounded bypass count V starves for all 20 rounds.
    expect(await alternatingLevels(1_000)).toBeUndefined();
    // Each round overtakes V twice; after maxBypass it reserves both levels and gets in.
    const round = await alternatingLevels(3);
    expect(round).toBeDefined();
    expect(round!).toBeLessThanOrEqual(3);
  });

  it("a starving waiter reserves its free levels but not more than one slot", async () => {
    const { ctl } = setup({ limits: { global: 3, perModel: 1 }, maxBypass: 1 });
    const holdsX = await admitNow(ctl, { tenant: "a", model: "x" });
    const v = track(ctl.admit({ tenant: "b", model: "x" }, NO_DEADLINE));
    // Overtaken once on the global level by a younger request: V is now starving.
    const y1 = await admitNow(ctl, { tenant: "c", model: "y" });
    expect(ctl.stats().starving).toBe(1);
    // Global: 2 in flight + 1 reserved for V = 3 → a new request must queue.
    const y2 = track(ctl.admit({ tenant: "c", model: "z" }, NO_DEADLINE));
    await flush();
    expect(y2.result).toBeUndefined();
    holdsX.release();
    await flush();
    expect(v.result?.ok).toBe(true);
    expect(y2.result?.ok).toBe(true);
    expect(ctl.stats().starving).toBe(0);
    y1.release();
  });
});
