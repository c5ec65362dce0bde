import { GatewayError } from "../errors/gateway-error.ts";
import type { DispatchPlan } from "../plan/dispatch-plan.ts";
import type { CodecRegistry, StreamDecoder } from "../protocol/codec.ts";
import type { RequestFeature } from "../protocol/features.ts";
import type { NeutralRequest, NeutralResponse } from "../protocol/neutral.ts";
import type { AttemptFinalizer, AttemptSink } from "../pipeline/attempt-finalizer.ts";
import type { PinnedSnapshot } from "../snapshot/pinned-snapshot.ts";
import type { Clock } from "../deps/clock.ts";
import type { Rng } from "../deps/rng.ts";
import type { LoadTracker } from "../traffic/load-tracker.ts";
import type { ConsumeResult } from "../budget/attempt-budget.ts";
import type { BreakerGate } from "../traffic/breaker-cache.ts";
import type { HealthGate } from "../traffic/health-cache.ts";
import { minimumAvailable } from "../traffic/health.ts";
import type { Selector } from "../traffic/selector.ts";
import { createSelector } from "../traffic/selectors/index.ts";
import { newAttemptId, type AttemptRecord } from "./attempt.ts";
import { eligibleCandidates, nextChoice, pickWith, type Choice } from "./candidates.ts";
import type { CredentialSource } from "./credentials.ts";
import { probeTargetFor } from "./health-target.ts";
import { decideRetry, type BackoffPolicy } from "./retry-policy.ts";
import type { AttemptCharge, AttemptCharger } from "./attempt-charges.ts";
import { runAttempt } from "./upstream-attempt.ts";

/** Per-request inputs pinned by the adapter before execution. */
export interface ExecutionContext {
  /** The BackendSnapshot this request pinned; used for its whole life, retries included. */
  readonly snapshot: PinnedSnapshot;
  /** Aborts when the client disconnects. */
  readonly clientSignal: AbortSignal;
  /** Circuit breakers, when enabled: an open breaker only narrows the candidates. */
  readonly breakers?: BreakerGate | undefined;
  /**
   * The caller's cross-layer attempt budget, when it sent one: consumed before every attempt that
   * is about to be sent, shared by every replica through its Durable Object.
   */
  readonly callBudget?: (() => Promise<ConsumeResult>) | undefined;
  /** Active health, when enabled: unhealthy backends are left out unless that would empty a pool. */
  readonly health?: HealthGate | undefined;
  /**
   * Backend-level admission: a full backend is skipped, and the request's backend slot moves to
   * the backend of each attempt (never waits: the request already holds its other slots).
   */
  readonly backendSlots?: { hasRoom(backendId: string): boolean; acquire(backendId: string): boolean } | undefined;
  /**
   * The budget ledger, when the caller's tenant uses one: each attempt reserves its own worst case
   * right before it is sent and is settled by its finalizer.
   */
  readonly charges?: AttemptCharger | undefined;
}

interface ExecutionCommon {
  readonly finalizer: AttemptFinalizer;
  /** Features dropped under the revision's declared downgrades (the client is told). */
  readonly downgraded: readonly RequestFeature[];
  /** Every attempt made for this request, in order; the last one is the answer's. */
  readonly attempts: readonly AttemptRecord[];
}

/** The outcome of dispatch, before encoding for the client. */
export type Execution =
  | (ExecutionCommon & { readonly kind: "buffered"; readonly response: NeutralResponse })
  | (ExecutionCommon & { readonly kind: "stream"; readonly body: ReadableStream<Uint8Array>; readonly decoder: StreamDecoder });

/** Carries the attempts made when a request fails, so the adapter can report their ids. */
export class ExecutionError extends Error {
  readonly error: GatewayError;
  readonly attempts: readonly AttemptRecord[];
  constructor(error: GatewayError, attempts: readonly AttemptRecord[]) {
    super(error.message);
    this.name = "ExecutionError";
    this.error = error;
    this.attempts = attempts;
  }
}

export interface ExecutorDeps {
  readonly codecs: CodecRegistry;
  readonly credentials: CredentialSource;
  readonly load: LoadTracker;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly sink: AttemptSink;
  /** The fetch to reach backends (global fetch in production). */
  readonly fetch: typeof fetch;
  /** Waits between attempts; rejects when the signal aborts. Injected so tests need no real time. */
  readonly sleep?: ((ms: number, signal: AbortSignal) => Promise<void>) | undefined;
  readonly backoff?: BackoffPolicy | undefined;
  /** Per attempt: longest wait for response headers. */
  readonly firstByteTimeoutMs?: number | undefined;
  /** TCP pre-connect for backends with `connectCheck` (see upstream-attempt.ts). */
  readonly preconnect?: ((hostname: string, port: number, signal: AbortSignal) => Promise<boolean>) | undefined;
}

/** A selector per (snapshot digest, pool): state such as round-robin position lives per pool. */
const MAX_SELECTORS = 512;

function realSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Turns a logical plan into physical attempts (Pingora-style phases: select → invoke → on-failure).
 * Each failed attempt's evidence goes to the one retry decision (retry-policy.ts); the next
 * backend comes from the plan's own candidates, in order, from the snapshot the request pinned.
 */
export class GatewayExecutor {
  readonly #deps: ExecutorDeps;
  readonly #selectors = new Map<string, Selector>();

  constructor(deps: ExecutorDeps) {
    this.#deps = deps;
  }

  async execute(plan: DispatchPlan, request: NeutralRequest, ctx: ExecutionContext): Promise<Execution> {
    const { clock } = this.#deps;
    const candidates = eligibleCandidates(plan, request, ctx.snapshot, this.#deps.codecs);
    const gate = ctx.breakers;
    const health = ctx.health;
    if (health) {
      for (const c of candidates) {
        for (const m of c.members) {
          const target = probeTargetFor(m.backend, this.#deps.codecs.get(m.backend.protocol)!);
          if (target) health.ensureWatched(m.backend.id, target);
        }
      }
    }
    // Backends whose breaker refuses (open, or a half-open probe slot taken) are left out.
    const refused = new Set<string>();
    const select = pickWith((c, options, sel) => this.#selector(ctx.snapshot, c.model.pool, ctx.snapshot.pools.get(c.model.pool)!.selector).select(options, sel));
    const pick: typeof select = (c, members, sel) => {
      const open = members.filter(
        (m) => !refused.has(m.key) && gate?.admission(m.backend.id) !== "deny" && ctx.backendSlots?.hasRoom(m.backend.id) !== false,
      );
      // Health narrows like a breaker, but never below one backend: probes can be wrong.
      // Only backends with probes configured are looked up, so others cost no monitor calls.
      return select(c, health ? minimumAvailable(open, (m) => !m.backend.healthCheck || health.isHealthy(m.backend.id), 1) : open, sel);
    };
    const tried = new Set<string>();
    const attempts: AttemptRecord[] = [];
    let last: Choice | undefined;
    let lastError: GatewayError | undefined;
    for (;;) {
      const choice = nextChoice(candidates, tried, last, pick, { affinityKey: plan.affinityKey });
      if (!choice) {
        // After a failed attempt, the client hears what actually happened, not "no backend".
        throw new ExecutionError(
          lastError ?? new GatewayError("no_backend_available", `No backend is available for the model '${plan.entrypoint}'. Retry later.`, { retryAfterSeconds: 1 }),
          attempts,
        );
      }
      tried.add(choice.member.key);
      last = choice;
      if (ctx.backendSlots && !ctx.backendSlots.acquire(choice.member.backend.id)) {
        refused.add(choice.member.key);
        continue;
      }
      let permit: string | undefined;
      if (gate?.admission(choice.member.backend.id) === "probe") {
        const probe = await gate.acquireProbe(choice.member.backend.id);
        if (!probe.allowed) {
          refused.add(choice.member.key);
          continue;
        }
        permit = probe.permitId;
      }
      if (ctx.callBudget) {
        let spent: ConsumeResult;
        try {
          spent = await ctx.callBudget();
        } catch (err) {
          // A strict budget fails closed: without the ledger no attempt is known to be allowed.
          throw new ExecutionError(new GatewayError("attempt_budget_unavailable", "The caller's attempt budget could not be checked. Retry later.", { cause: err, retryAfterSeconds: 1 }), attempts);
        }
        if (!spent.ok) {
          throw new ExecutionError(
            spent.reason === "expired"
              ? new GatewayError("deadline_exceeded", "The caller's deadline for this call has passed.")
              : new GatewayError("attempt_budget_exhausted", "The attempt budget for this call is exhausted."),
            attempts,
          );
        }
      }
      const attemptId = newAttemptId();
      let charge: AttemptCharge | undefined;
      try {
        charge = await ctx.charges?.reserve(attemptId, choice.model, attempts.length === 0);
      } catch (err) {
        // Refused before anything was sent: hand back a half-open probe permit at once, so the
        // backend's probing is not blocked for everyone until the permit expires.
        if (permit !== undefined) gate?.report(choice.member.backend.id, "neutral", permit);
        throw new ExecutionError(err instanceof GatewayError ? err : new GatewayError("internal_error", "The gateway failed to check the budget.", { cause: err }), attempts);
      }
      const result = await runAttempt(this.#deps, plan, request, ctx, choice, { attemptId, probePermit: permit, charge });
      attempts.push(result.attempt);
      if (result.ok) {
        const common = { finalizer: result.success.finalizer, downgraded: choice.drop, attempts };
        return result.success.kind === "buffered"
          ? { ...common, kind: "buffered", response: result.success.response }
          : { ...common, kind: "stream", body: result.success.body, decoder: result.success.decoder };
      }
      const decision = decideRetry(
        result.evidence,
        { attemptsMade: attempts.length, maxAttempts: plan.retry.maxAttempts, deadlineAt: plan.deadlineAt, now: clock.now(), clientCommitted: false },
        this.#deps.rng,
        this.#deps.backoff,
      );
      if (decision.action === "stop") throw new ExecutionError(result.error, attempts);
      lastError = result.error;
      try {
        await (this.#deps.sleep ?? realSleep)(decision.delayMs, ctx.clientSignal);
      } catch {
        throw new ExecutionError(new GatewayError("client_closed", "The client closed the request."), attempts);
      }
    }
  }

  #selector(snapshot: PinnedSnapshot, pool: string, kind: Selector["kind"]): Selector {
    const key = `${snapshot.digest}/${pool}`;
    let s = this.#selectors.get(key);
    if (!s) {
      if (this.#selectors.size >= MAX_SELECTORS) this.#selectors.delete(this.#selectors.keys().next().value!);
      s = createSelector(kind, { clock: this.#deps.clock, rng: this.#deps.rng, load: this.#deps.load });
      this.#selectors.set(key, s);
    }
    return s;
  }
}
