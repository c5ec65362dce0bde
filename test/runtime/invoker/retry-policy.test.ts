import { describe, expect, it } from "vitest";
import type { Evidence, EvidenceClass } from "../../../src/context/attempt-record.ts";
import { evidenceFromStatus } from "../../../src/invoker/evidence.ts";
import { decideRetry, type RetryState } from "../../../src/invoker/retry-policy.ts";

const rng = (v: number) => ({ next: () => v });
const state = (over: Partial<RetryState> = {}): RetryState => ({ attemptsMade: 1, maxAttempts: 3, deadlineAt: 10_000, now: 0, clientCommitted: false, ...over });
const ev = (c: EvidenceClass, retryAfterSeconds?: number): Evidence => ({ class: c, reason: "rejected_before_processing", retryAfterSeconds });

describe("decideRetry: the one retry decision", () => {
  it("retries only known-zero evidence", () => {
    expect(decideRetry(ev("known_zero"), state(), rng(0.5)).action).toBe("retry");
    expect(decideRetry(ev("unknown"), state(), rng(0.5))).toEqual({ action: "stop", reason: "not_known_zero" });
    expect(decideRetry(ev("client_error"), state(), rng(0.5))).toEqual({ action: "stop", reason: "not_known_zero" });
    expect(decideRetry(ev("success"), state(), rng(0.5))).toEqual({ action: "stop", reason: "success" });
  });

  it("never retries once the client saw anything", () => {
    expect(decideRetry(ev("known_zero"), state({ clientCommitted: true }), rng(0.5))).toEqual({ action: "stop", reason: "client_committed" });
  });

  it("stops at the plan's attempt authority", () => {
    expect(decideRetry(ev("known_zero"), state({ attemptsMade: 3 }), rng(0.5))).toEqual({ action: "stop", reason: "attempts_exhausted" });
  });

  it("backs off with full jitter, exponentially, capped", () => {
    const d = (n: number, r: number) => decideRetry(ev("known_zero"), state({ attemptsMade: n, maxAttempts: 10 }), rng(r));
    expect(d(1, 0.999)).toEqual({ action: "retry", delayMs: 99 });
    expect(d(2, 0.999)).toEqual({ action: "retry", delayMs: 199 });
    expect(d(9, 0.999)).toEqual({ action: "retry", delayMs: 1998 });
    expect(d(3, 0)).toEqual({ action: "retry", delayMs: 0 });
  });

  it("honours retry-after, and gives up rather than wait past the deadline", () => {
    expect(decideRetry(ev("known_zero", 2), state(), rng(0.5))).toEqual({ action: "retry", delayMs: 2000 });
    expect(decideRetry(ev("known_zero", 20), state(), rng(0.5))).toEqual({ action: "stop", reason: "deadline" });
    expect(decideRetry(ev("known_zero"), state({ now: 9_990 }), rng(0.5))).toEqual({ action: "stop", reason: "deadline" });
  });
});

describe("evidenceFromStatus", () => {
  const declared = new Set([429, 529]);
  it("classifies declared refusals as known-zero and everything else conservatively", () => {
    expect(evidenceFromStatus(429, declared, 3)).toEqual({ class: "known_zero", reason: "rejected_before_processing", status: 429, retryAfterSeconds: 3 });
    expect(evidenceFromStatus(529, declared).class).toBe("known_zero");
    expect(evidenceFromStatus(503, declared).class).toBe("unknown");
    expect(evidenceFromStatus(500, declared).class).toBe("unknown");
    expect(evidenceFromStatus(400, declared).class).toBe("client_error");
    expect(evidenceFromStatus(200, declared).class).toBe("success");
    expect(evidenceFromStatus(429, new Set()).class).toBe("client_error");
  });
});
