import { describe, expect, it } from "vitest";
import {
  AdmissionController,
  quantizeRetryAfter,
  type AdmissionLease,
} from "../../../src/admit/admission.ts";
import type { Scheduler } from "../../../src/deps/scheduler.ts";
import { FakeClock, mulberry32 } from "../traffic/helpers.ts";
import { setup, NO_DEADLINE, flush, track, admitNow, expectIdle } from "./admission-support.ts";

describe("AdmissionController deadlines", () => {
  it("refuses at once when the deadline has already passed, even with free slots", async () => {
    const { ctl, clock } = setup();
    expect(await ctl.admit({ tenant: "a", model: "m" }, { deadlineAt: clock.now() - 1 })).toMatchObject({ ok: false, reason: "deadline" });
    expect(await ctl.admit({ tenant: "a", model: "m" }, { deadlineAt: clock.now() })).toMatchObject({ ok: false, reason: "deadline" });
    expectIdle(ctl);
  });

  it("removes a waiter whose deadline passes and answers deadline", async () => {
    const { ctl, clock, scheduler } = setup({ limits: { global: 1 } });
    const holder = await admitNow(ctl, { tenant: "a", model: "m" });
    const w = track(ctl.admit({ tenant: "b", model: "m" }, { deadlineAt: clock.now() + 500 }));
    const later = track(ctl.admit({ tenant: "c", model: "m" }, { deadlineAt: clock.now() + 5_000 }));
    scheduler.advance(499);
    await flush();
    expect(w.result).toBeUndefined();
    scheduler.advance(1);
    await flush();
    expect(w.result).toMatchObject({ ok: false, reason: "deadline" });
    expect(ctl.stats().queued).toEqual({ total: 1, byTenant: { c: 1 } });
    holder.release();
    await flush();
    expect(later.result?.ok).toBe(true);
    expect(scheduler.pending).toBe(0); // the admitted waiter's timer was cancelled
    later.lease().release();
    expectIdle(ctl);
  });

  it("never admits a waiter past its deadline even if its timer has not fired yet", async () => {
    const { ctl, clock } = setup({ limits: { global: 1 } });
    const holder = await admitNow(ctl, { tenant: "a", model: "m" });
    const w = track(ctl.admit({ tenant: "b", model: "m" }, { deadlineAt: clock.now() + 100 }));
    clock.advance(100); // time passes, timers lag
    holder.release();
    await flush();
    expect(w.result).toMatchObject({ ok: false, reason: "deadline" });
    expectIdle(ctl);
  });

  it("re-arms a timer that fires early", async () => {
    const clock = new FakeClock(0);
    let fire: (() => void) | undefined;
    const early: Scheduler = {
      schedule: (_delay, fn) => {
        fire = fn;
        return () => (fire = undefined);
      },
    };
    const ctl = new AdmissionController(clock, early, { limits: { global: 1 } });
    await admitNow(ctl, { tenant: "a", model: "m" });
    const w = track(ctl.admit({ tenant: "b", model: "m" }, { deadlineAt: 1_000 }));
    clock.set(400);
    fire!();
    await flush();
    expect(w.result).toBeUndefined();
    expect(fire).toBeDefined(); // re-armed
    clock.set(1_000);
    fire!();
    await flush();
    expect(w.result).toMatchObject({ ok: false, reason: "deadline" });
  });
});

describe("AdmissionController cancellation", () => {
  it("refuses at once when the signal is already aborted", async () => {
    const { ctl } = setup();
    const c = new AbortController();
    c.abort();
    expect(await ctl.admit({ tenant: "a", model: "m" }, { deadlineAt: Infinity, signal: c.signal })).toMatchObject({
      ok: false,
      reason: "cancelled",
    });
    expectIdle(ctl);
  });

  it("removes an aborted waiter without freeing or leaking a slot", async () => {
    const { ctl, clock, scheduler } = setup({ limits: { global: 1 } });
    const holder = await admitNow(ctl, { tenant: "a", model: "m" });
    const c = new AbortController();
    const w = track(ctl.admit({ tenant: "b", model: "m" }, { deadlineAt: clock.now() + 10_000, signal: c.signal }));
    const next = track(ctl.admit({ tenant: "c", model: "m" }, NO_DEADLINE));
    c.abort();
    await flush();
    expect(w.result).toMatchObject({ ok: false, reason: "cancelled" });
    expect(scheduler.pending).toBe(0);
    expect(ctl.stats().inFlight.global).toBe(1); // the holder still holds its slot
    expect(ctl.stats().queued).toEqual({ total: 1, byTenant: { c: 1 } });
    expect(next.result).toBeUndefined();
    holder.release();
    await flush();
    expect(next.result?.ok).toBe(true);
    next.lease().release();
    expectIdle(ctl);
  });

  it("an abort after admission leaves the lease to its owner", async () => {
    const { ctl } = setup({ limits: { global: 1 } });
    const holder = await admitNow(ctl, { tenant: "a", model: "m" });
    const c = new AbortController();
    const w = track(ctl.admit({ tenant: "b", model: "m" }, { deadlineAt: Infinity, signal: c.signal }));
    holder.release();
    await flush();
    expect(w.result?.ok).toBe(true);
    c.abort();
    expect(ctl.stats().inFlight.global).toBe(1);
    w.lease().release();
    expectIdle(ctl);
  });
});

describe("AdmissionController retry-after", () => {
  it("quantises to integer steps in 1..60", () => {
    expect(quantizeRetryAfter(0)).toBe(1);
    expect(quantizeRetryAfter(-5)).toBe(1);
    expect(quantizeRetryAfter(1)).toBe(1);
    expect(quantizeRetryAfter(1_001)).toBe(2);
    expect(quantizeRetryAfter(4_000)).toBe(5);
    expect(quantizeRetryAfter(59_000)).toBe(60);
    expect(quantizeRetryAfter(3_600_000)).toBe(60);
    expect(quantizeRetryAfter(Infinity)).toBe(60);
    expect(quantizeRetryAfter(Number.NaN)).toBe(60);
    const seen = new Set<number>();
    for (let ms = 0; ms < 120_000; ms += 97) seen.add(quantizeRetryAfter(ms));
    for (const s of seen) {
      expect(Number.isInteger(s)).toBe(true);
      expect(s).toBeGreaterThanOrEqual(1);
      expect(s).toBeLessThanOrEqual(60);
    }
    // Coarse: far fewer distinct values than seconds, so limits cannot be read back from them.
    expect(seen.size).toBeLessThanOrEqual(10);
  });

  it("follows observed hold times and queue depth, bounded by 1 and 60", async () => {
    // The estimate is only ever seen on a refusal; a full queue of a given depth gives one.
    const refusedAt = async (depth: number, holdMs: number) => {
      const { ctl, clock } = setup({ limits: { global: 1 }, maxQueue: depth, maxQueuePerTenant: 100, holdAlpha: 1 });
      const req = { tenant: "a", model: "m" };
      const held = await admitNow(ctl, req);
      clock.advance(holdMs);
      held.release();
      await admitNow(ctl, req);
      for (let i = 0; i < depth; i++) void ctl.admit(req, NO_DEADLINE);
      const r = await ctl.admit(req, NO_DEADLINE);
      if (r.ok) throw new Error("expected a refusal");
      expect(r.reason).toBe("queue_full");
      return r.retryAfterSeconds;
    };
    // Short holds: the estimate stays at the floor.
    expect(await refusedAt(1, 10)).toBe(1);
    // Long holds (10 s each): the estimate grows with the depth of the queue and saturates at 60.
    const shallow = await refusedAt(1, 10_000);
    const deep = await refusedAt(50, 10_000);
    expect(shallow).toBeGreaterThanOrEqual(10);
    expect(deep).toBeGreaterThan(shallow);
    expect(deep).toBe(60);
    // Even an hour-long hold never yields more than 60.
    expect(await refusedAt(0, 3_600_000)).toBe(60);
  });

  it("every refusal carries a bounded integer retryAfterSeconds", async () => {
    const { ctl, clock, scheduler } = setup({ limits: { global: 1 }, maxQueue: 1 });
    await admitNow(ctl, { tenant: "a", model: "m" });
    const c = new AbortController();
    const cancelled = ctl.admit({ tenant: "b", model: "m" }, { deadlineAt: Infinity, signal: c.signal });
    const full = await ctl.admit({ tenant: "c", model: "m" }, NO_DEADLINE);
    c.abort();
    const expired = ctl.admit({ tenant: "d", model: "m" }, { deadlineAt: clock.now() + 5 });
    scheduler.advance(5);
    for (const r of [full, await cancelled, await expired]) {
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(Number.isInteger(r.retryAfterSeconds)).toBe(true);
        expect(r.retryAfterSeconds).toBeGreaterThanOrEqual(1);
        expect(r.retryAfterSeconds).toBeLessThanOrEqual(60);
      }
    }
    expect([full, await cancelled, await expired].map((r) => (r.ok ? "ok" : r.reason))).toEqual(["queue_full", "cancelled", "deadline"]);
  });
});

describe("AdmissionController random workload", () => {
  for (const seed of [1, 2, 3, 42, 1234]) {
    it(`never exceeds a limit and leaks no slot (seed ${seed})`, async () => {
      const rng = mulberry32(seed);
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng.next() * xs.length)]!;
      const limits = { global: 6, perTenant: 3, perModel: 2, perBackend: 2 };
      const { ctl, clock, scheduler } = setup({ limits, maxQueue: 12, maxQueuePerTenant: 5, maxBypass: 4 });
      const tenants = ["t1", "t2", "t3", "t4"];
      const models = ["big", "small", "mid"];
      const backendIds = ["b1", "b2", "b3"];

      const live = new Set<AdmissionLease>();
      const aborters: AbortController[] = [];
      const outcomes = new Map<string, number>();
      let unsettled = 0;

      const checkInvariants = () => {
        const s = ctl.stats();
        // The controller's counts match the live leases exactly, and no limit is exceeded.
        const expected = { global: 0, tenant: {} as Record<string, number>, model: {} as Record<string, number>, backend: {} as Record<string, number> };
        for (const l of live) {
          expected.global++;
          expected.tenant[l.tenant] = (expected.tenant[l.tenant] ?? 0) + 1;
          expected.model[l.model] = (expected.model[l.model] ?? 0) + 1;
          if (l.backend !== undefined) expected.backend[l.backend] = (expected.backend[l.backend] ?? 0) + 1;
        }
        expect(s.inFlight).toEqual(expected);
        expect(s.inFlight.global).toBeLessThanOrEqual(limits.global);
        for (const n of Object.values(s.inFlight.tenant)) expect(n).toBeLessThanOrEqual(limits.perTenant);
        for (const n of Object.values(s.inFlight.model)) expect(n).toBeLessThanOrEqual(limits.perModel);
        for (const n of Object.values(s.inFlight.backend)) expect(n).toBeLessThanOrEqual(limits.perBackend);
        expect(s.queued.total).toBeLessThanOrEqual(12);
        for (const n of Object.values(s.queued.byTenant)) expect(n).toBeLessThanOrEqual(5);
        expect(s.queued.total).toBe(Object.values(s.queued.byTenant).reduce((a, b) => a + b, 0));
      };

      for (let step = 0; step < 600; step++) {
        const r = rng.next();
        if (r < 0.4) {
          const c = new AbortController();
          aborters.push(c);
          const withBackend = rng.next() < 0.3;
          const deadline = rng.next() < 0.2 ? Infinity : clock.now() + Math.floor(rng.next() * 400) - 20;
          unsettled++;
          ctl
            .admit(
              { tenant: pick(tenants), model: pick(models), backend: withBackend ? pick(backendIds) : undefined },
              { deadlineAt: deadline, signal: rng.next() < 0.5 ? c.signal : undefined },
            )
            .then((res) => {
              unsettled--;
              outcomes.set(res.ok ? "ok" : res.reason, (outcomes.get(res.ok ? "ok" : res.reason) ?? 0) + 1);
              if (res.ok) live.add(res.lease);
            });
        } else if (r < 0.65 && live.size > 0) {
          const l = pick([...live]);
          live.delete(l);
          // Release paths: plain, twice, or after moving the backend slot first.
          if (rng.next() < 0.3) l.acquireBackend(pick(backendIds));
          l.release();
          if (rng.next() < 0.3) l.release();
        } else if (r < 0.75 && live.size > 0) {
          const l = pick([...live]);
          l.acquireBackend(pick(backendIds));
        } else if (r < 0.82 && aborters.length > 0) {
          // Mostly recent requests, which are likelier to still be queued.
          pick(aborters.slice(-8)).abort();
        } else {
          scheduler.advance(Math.floor(rng.next() * 60));
        }
        await flush();
        checkInvariants();
      }

      // Wind down: release everything, let every deadline pass, then release what that admitted.
      for (let i = 0; i < 50 && (live.size > 0 || ctl.stats().queued.total > 0); i++) {
        for (const l of [...live]) {
          live.delete(l);
          l.release();
        }
        scheduler.advance(1_000);
        await flush();
        checkInvariants();
      }
      // Waiters with no deadline and no signal may remain admitted only through releases above;
      // finally withdraw the rest.
      for (const c of aborters) c.abort();
      await flush();
      for (const l of [...live]) {
        live.delete(l);
        l.release();
      }
      await flush();
      expect(unsettled).toBe(0);
      expectIdle(ctl);
      expect(scheduler.pending).toBe(0);
      // The workload exercised every outcome.
      for (const k of ["ok", "queue_full", "deadline", "cancelled"]) expect(outcomes.get(k) ?? 0, k).toBeGreaterThan(0);
    });
  }
});
