import { expect } from "vitest";
import {
  AdmissionController,
  type AdmissionLease,
  type AdmissionOptions,
  type AdmissionRequest,
  type AdmissionResult,
} from "../../../src/admit/admission.ts";
import type { Scheduler } from "../../../src/deps/scheduler.ts";
import { FakeClock } from "../traffic/helpers.ts";

/** Timers that fire only when the test advances the fake clock. */
export class ManualScheduler implements Scheduler {
  readonly #timers: { at: number; seq: number; fn: () => void; live: boolean }[] = [];
  #seq = 0;
  constructor(private readonly clock: FakeClock) {}

  schedule(delayMs: number, fn: () => void): () => void {
    const timer = { at: this.clock.now() + Math.max(0, delayMs), seq: this.#seq++, fn, live: true };
    this.#timers.push(timer);
    return () => {
      timer.live = false;
    };
  }

  /** Live timers (armed and not cancelled). */
  get pending(): number {
    return this.#timers.filter((t) => t.live).length;
  }

  /** Moves the clock forward, firing due timers in time order at their own instants. */
  advance(ms: number): void {
    const end = this.clock.now() + ms;
    for (;;) {
      const due = this.#timers.filter((t) => t.live && t.at <= end).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (due === undefined) break;
      due.live = false;
      this.clock.set(Math.max(this.clock.now(), due.at));
      due.fn();
    }
    this.clock.set(end);
  }
}

export function setup(options: AdmissionOptions = {}) {
  const clock = new FakeClock(1_000);
  const scheduler = new ManualScheduler(clock);
  const ctl = new AdmissionController(clock, scheduler, options);
  return { clock, scheduler, ctl };
}

export const NO_DEADLINE = { deadlineAt: Infinity };

/** Lets resolved admissions' continuations run (microtasks only, no timers). */
export async function flush(): Promise<void> {
  for (let i = 0; i < 5; i++) await Promise.resolve();
}

/** Wraps an admission promise so the test can look at its state synchronously after a flush. */
export function track(p: Promise<AdmissionResult>): { result: AdmissionResult | undefined; lease(): AdmissionLease } {
  const t = {
    result: undefined as AdmissionResult | undefined,
    lease(): AdmissionLease {
      if (t.result?.ok !== true) throw new Error(`not admitted: ${JSON.stringify(t.result)}`);
      return t.result.lease;
    },
  };
  p.then((r) => (t.result = r));
  return t;
}

export async function admitNow(ctl: AdmissionController, req: AdmissionRequest): Promise<AdmissionLease> {
  const r = await ctl.admit(req, NO_DEADLINE);
  if (!r.ok) throw new Error(`expected admission, got ${r.reason}`);
  return r.lease;
}

export function expectIdle(ctl: AdmissionController): void {
  expect(ctl.stats()).toEqual({
    inFlight: { global: 0, tenant: {}, model: {}, backend: {} },
    queued: { total: 0, byTenant: {} },
    starving: 0,
  });
}

