/**
 * Choosing a decision: priority and order, lazy signals (a model-backed signal is started only
 * when a decision that can still win needs it, all of those a round needs at once), and unknown
 * signals under each decision's policy.
 */
import { describe, expect, it } from "vitest";
import { chooseDecision } from "../../../src/decide/decisions.ts";
import type { Scheduler } from "../../../src/deps/scheduler.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import type { CompiledDecision } from "../../../src/publication/compile-publication.ts";
import { compileCondition, type ConditionConfig } from "../../../src/signals/conditions.ts";
import type { SignalShape } from "../../../src/signals/compile-signals.ts";
import { SignalSet, type SignalDatum, type SignalDefinition } from "../../../src/signals/signal-set.ts";

/** A scheduler whose timers fire only when the test says so. */
function manualScheduler(): Scheduler & { fire(): void; readonly pending: number } {
  const timers = new Set<() => void>();
  return {
    schedule(_ms, fn) {
      timers.add(fn);
      return () => timers.delete(fn);
    },
    fire() {
      for (const fn of [...timers]) {
        timers.delete(fn);
        fn();
      }
    },
    get pending() {
      return timers.size;
    },
  };
}

interface Probe {
  readonly defs: SignalDefinition[];
  readonly shapes: Map<string, SignalShape>;
  /** Names in the order their computation started. */
  readonly started: string[];
  /** Settles a model-backed signal's computation. */
  resolve(name: string, value: SignalDatum | Error): void;
  readonly aborted: string[];
}

/** Local signals with fixed values, and model-backed ones the test settles by hand. */
function probe(local: Record<string, SignalDatum | undefined | Error>, model: string[]): Probe {
  const started: string[] = [];
  const aborted: string[] = [];
  const waiting = new Map<string, { resolve: (v: SignalDatum) => void; reject: (e: Error) => void }>();
  const defs: SignalDefinition[] = [
    ...Object.entries(local).map(([name, v]): SignalDefinition => ({
      name,
      cost: "local",
      compute: () => {
        started.push(name);
        if (v instanceof Error) throw v;
        return v;
      },
    })),
    ...model.map((name): SignalDefinition => ({
      name,
      cost: "model",
      compute: ({ signal }) => {
        started.push(name);
        signal.addEventListener("abort", () => aborted.push(name));
        return new Promise<SignalDatum>((resolve, reject) => waiting.set(name, { resolve, reject }));
      },
    })),
  ];
  const shapes = new Map<string, SignalShape>([...Object.keys(local), ...model].map((n) => [n, { type: "boolean" }]));
  return {
    defs,
    shapes,
    started,
    aborted,
    resolve(name, value) {
      const w = waiting.get(name)!;
      if (value instanceof Error) w.reject(value);
      else w.resolve(value);
    },
  };
}

function set(p: Probe, scheduler: Scheduler = manualScheduler(), signal = new AbortController().signal): SignalSet {
  return new SignalSet(p.defs, { input: () => ({ subject: undefined, principal: undefined, trustedHeaders: new Map(), models: undefined }), signal, scheduler, onFailure: () => {} });
}

function decision(p: Probe, name: string, when: ConditionConfig, over: Partial<CompiledDecision> = {}): CompiledDecision {
  const { condition, problems } = compileCondition(when, p.shapes, name);
  expect(problems).toEqual([]);
  return { name, priority: 0, when: condition, tiers: undefined, plugins: [], onUnknown: "skip", algorithm: undefined, ...over };
}

const deadline = { at: Number.POSITIVE_INFINITY, now: () => 0 };
const settle = () => new Promise<void>((r) => setTimeout(r, 0));

describe("chooseDecision", () => {
  it("takes the first decision that holds, in the order given, and reads no signal past it", () => {
    const p = probe({ a: false, b: true, c: true }, []);
    const out = chooseDecision([decision(p, "one", { signal: "a" }), decision(p, "two", { signal: "b" }), decision(p, "three", { signal: "c" })], set(p), deadline);
    expect(out).toEqual({ decision: expect.objectContaining({ name: "two" }), skipped: [] });
    expect(p.started).toEqual(["a", "b"]);
  });

  it("answers synchronously when local signals decide, and undefined when nothing holds", () => {
    const p = probe({ a: false }, ["m"]);
    const out = chooseDecision([decision(p, "one", { all: [{ signal: "a" }, { signal: "m" }] })], set(p), deadline);
    // `all` with a false local part is false: the model-backed signal is never started.
    expect(out).toEqual({ decision: undefined, skipped: [] });
    expect(p.started).toEqual(["a"]);
  });

  it("starts every model-backed signal a decision that can still win needs, at once, and none past a sure local winner", async () => {
    const p = probe({ yes: true }, ["m1", "m2", "m3", "m4"]);
    const ds = [decision(p, "first", { signal: "m1" }), decision(p, "second", { any: [{ signal: "m2" }, { signal: "m3" }] }), decision(p, "local", { signal: "yes" }), decision(p, "later", { signal: "m4" })];
    const out = chooseDecision(ds, set(p), deadline);
    expect(out).toBeInstanceOf(Promise);
    await settle();
    expect(p.started.sort()).toEqual(["m1", "m2", "m3", "yes"]);
    p.resolve("m1", false);
    p.resolve("m2", false);
    p.resolve("m3", true);
    expect(await out).toEqual({ decision: expect.objectContaining({ name: "second" }), skipped: [] });
    expect(p.started).not.toContain("m4");
  });

  it("treats an unknown signal as not holding under onUnknown: skip, and says so", async () => {
    const p = probe({ broken: new Error("detector down"), fallback: true }, []);
    const out = await chooseDecision([decision(p, "risky", { signal: "broken" }), decision(p, "safe", { signal: "fallback" })], set(p), deadline);
    expect(out).toEqual({ decision: expect.objectContaining({ name: "safe" }), skipped: ["risky"] });
  });

  it("refuses with signal_unavailable under onUnknown: refuse", () => {
    const p = probe({ broken: new Error("detector down"), fallback: true }, []);
    let err: unknown;
    try {
      chooseDecision([decision(p, "guard", { signal: "broken" }, { onUnknown: "refuse" }), decision(p, "safe", { signal: "fallback" })], set(p), deadline);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(GatewayError);
    expect(err).toMatchObject({ code: "signal_unavailable", status: 503 });
  });

  it("a decision settled by another part is not unknown: any(true, unknown) holds, all(false, unknown) does not", async () => {
    const p = probe({ broken: new Error("x"), yes: true, no: false }, []);
    const any = await chooseDecision([decision(p, "any", { any: [{ signal: "broken" }, { signal: "yes" }] }, { onUnknown: "refuse" })], set(p), deadline);
    expect(any.decision?.name).toBe("any");
    const all = await chooseDecision([decision(p, "all", { all: [{ signal: "broken" }, { signal: "no" }] }, { onUnknown: "refuse" })], set(p), deadline);
    expect(all).toEqual({ decision: undefined, skipped: [] });
  });

  it("a model-backed signal late at the deadline is unknown (timeout) and its call is aborted", async () => {
    const p = probe({ fallback: true }, ["slow"]);
    const scheduler = manualScheduler();
    const signals = set(p, scheduler);
    const out = chooseDecision([decision(p, "semantic", { signal: "slow" }), decision(p, "fallback", { signal: "fallback" })], signals, { at: 500, now: () => 0 });
    await settle();
    expect(scheduler.pending).toBe(1);
    scheduler.fire();
    expect(await out).toEqual({ decision: expect.objectContaining({ name: "fallback" }), skipped: ["semantic"] });
    expect(signals.peek("slow")).toEqual({ state: "unknown", reason: "timeout" });
    expect(p.aborted).toEqual(["slow"]);
  });

  it("a model-backed signal that fails is unknown (failed), and a fail-closed decision refuses", async () => {
    const p = probe({}, ["flaky"]);
    const signals = set(p);
    const out = chooseDecision([decision(p, "guard", { not: { signal: "flaky" } }, { onUnknown: "refuse" })], signals, deadline);
    await settle();
    p.resolve("flaky", new Error("embedding backend down"));
    await expect(out).rejects.toMatchObject({ code: "signal_unavailable" });
    expect(signals.peek("flaky")).toEqual({ state: "unknown", reason: "failed" });
  });

  it("stops with the request's abort, not as a signal failure", async () => {
    const p = probe({}, ["m"]);
    const request = new AbortController();
    const signals = set(p, manualScheduler(), request.signal);
    const out = chooseDecision([decision(p, "d", { signal: "m" })], signals, deadline);
    await settle();
    request.abort(new GatewayError("client_closed", "gone"));
    p.resolve("m", true);
    await expect(out).rejects.toMatchObject({ code: "client_closed" });
    expect(signals.peek("m")).toBeUndefined();
  });
});
