import type { ConsumeResult } from "../call-budget/attempt-budget.ts";
import { newAttemptId, type AttemptRecord, type Evidence } from "../context/attempt-record.ts";
import { newSpanId } from "../context/trace-context.ts";
import type { AttemptScope, RequestContext } from "../context/request-context.ts";
import type { DispatchPlan } from "../decide/dispatch-plan.ts";
import type { Clock } from "../deps/clock.ts";
import type { Rng } from "../deps/rng.ts";
import type { EgressPolicy } from "../egress/egress-guard.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { BackendCodec, BackendProtocolId, CodecRegistry, StreamDecoder } from "../protocol/codec.ts";
import type { TokenCache } from "./auth/token-cache.ts";
import type { InputOperation } from "../protocol/input-operation.ts";
import type { InputRequest, InputResponse } from "../protocol/input-wire.ts";
import { requestFeatures, type RequestFeature } from "../protocol/features.ts";
import type { NeutralRequest, NeutralResponse } from "../protocol/neutral.ts";
import type { PinnedSnapshot } from "../snapshot/pinned-snapshot.ts";
import type { BreakerGate } from "../traffic/breaker-cache.ts";
import type { HealthGate } from "../traffic/health-cache.ts";
import { minimumAvailable } from "../traffic/health.ts";
import type { LoadTracker } from "../traffic/load-tracker.ts";
import type { Selector } from "../traffic/selector.ts";
import { createSelector } from "../traffic/selectors/index.ts";
import type { AttemptCharger } from "../reserve/request-charges.ts";
import { breakerReport } from "./breaker-outcome.ts";
import { eligibleCandidates, nextChoice, pickWith, type Choice, type ModelCandidates } from "./candidates.ts";
import type { CredentialSource } from "./credentials.ts";
import { probeTargetFor } from "./health-target.ts";
import { decideRetry, type BackoffPolicy } from "./retry-policy.ts";
import type { CredentialWatch } from "../traffic/credential-watch.ts";
import { encodeChat, encodeCount, encodeInput, prepareAttempt, readChat, readCount, readInput, sendAttempt, type AnswerReader, type EncodedAttempt } from "./upstream-attempt.ts";
import type { ModelBindings } from "./workers-ai-binding.ts";
import type { TlsFetchers } from "./upstream-attempt.ts";

/** What the invoke phase hands the executor for one request. */
export interface InvocationContext {
  /** The request: its deadline, cancellation, attempts and the resources they hold. */
  readonly request: RequestContext;
  /** The BackendSnapshot this request pinned; used for its whole life, retries included. */
  readonly snapshot: PinnedSnapshot;
  /** Circuit breakers, when enabled: an open breaker only narrows the candidates. */
  readonly breakers?: BreakerGate | undefined;
  /**
   * The caller's cross-layer attempt budget, when it sent one: consumed by every attempt right
   * before it is sent, shared by every replica through its Durable Object.
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
   * right before it is sent, and the reservation is settled when the attempt ends.
   */
  readonly charges?: AttemptCharger | undefined;
  /** Headers the request's `headers` plugins set for the backend. */
  readonly upstreamHeaders?: Readonly<Record<string, string>> | undefined;
}

/** The outcome of the invoke phase, before the respond phase encodes it. */
export type Execution =
  | {
      readonly ok: true;
      readonly kind: "buffered";
      readonly response: NeutralResponse;
      /** Features dropped under the revision's declared downgrades (the client is told). */
      readonly downgraded: readonly RequestFeature[];
      /** Provider response headers the backend passes to the client (`responseHeaders`). */
      readonly headers: Readonly<Record<string, string>>;
    }
  | {
      readonly ok: true;
      readonly kind: "stream";
      readonly body: ReadableStream<Uint8Array>;
      readonly decoder: StreamDecoder;
      /** The wire protocol the provider's stream speaks (its decoder's). */
      readonly protocol: BackendProtocolId;
      /** The stream's attempt, still open: the respond phase ends it with the stream. */
      readonly attempt: AttemptScope;
      readonly downgraded: readonly RequestFeature[];
      readonly headers: Readonly<Record<string, string>>;
    }
  | { readonly ok: false; readonly error: GatewayError };

/** The outcome of an input-only request's invoke phase (embeddings, moderations): the answer, or the error. */
export type InputExecution<Res extends InputResponse> =
  | { readonly ok: true; readonly response: Res; readonly headers: Readonly<Record<string, string>> }
  | { readonly ok: false; readonly error: GatewayError };

/**
 * The outcome of a token count's invoke phase: the provider's count, or why there is none —
 * `no_counter`: no backend of the plan's first tier speaks a protocol that counts tokens, so
 * nothing was tried; `failed`: the count was tried (or its backends were refused) and failed.
 */
export type CountExecution =
  | { readonly ok: true; readonly inputTokens: number; readonly headers: Readonly<Record<string, string>> }
  | { readonly ok: false; readonly reason: "no_counter" | "failed"; readonly error: GatewayError };

/** What one kind of model operation does per attempt: build the backend's request, read its answer. */
interface AttemptOperation<S> {
  readonly encode: (codec: BackendCodec, choice: Choice) => EncodedAttempt;
  readonly read: (codec: BackendCodec) => AnswerReader<S>;
  /** The operation costs nothing at the provider (a token count): its attempts owe no usage. */
  readonly unbilled?: boolean | undefined;
}

export interface ExecutorDeps {
  readonly codecs: CodecRegistry;
  readonly credentials: CredentialSource;
  readonly load: LoadTracker;
  readonly clock: Clock;
  readonly rng: Rng;
  /** The fetch to reach backends (global fetch in production). */
  readonly fetch: typeof fetch;
  /** Waits between attempts; rejects when the signal aborts. Injected so tests need no real time. */
  readonly sleep?: ((ms: number, signal: AbortSignal) => Promise<void>) | undefined;
  readonly backoff?: BackoffPolicy | undefined;
  /** Per attempt: longest wait for response headers. */
  readonly firstByteTimeoutMs?: number | undefined;
  /** TCP pre-connect for backends with `connectCheck` (see upstream-attempt.ts). */
  readonly preconnect?: ((hostname: string, port: number, signal: AbortSignal) => Promise<boolean>) | undefined;
  /** The egress guard's policy, checked on each attempt's address (see upstream-attempt.ts). */
  readonly egress?: EgressPolicy | undefined;
  /** The Worker's bindings that binding-protocol backends are reached through (see upstream-attempt.ts). */
  readonly bindings?: ModelBindings | undefined;
  /** The Worker's fetcher bindings that backends with `tls` are reached through (see upstream-attempt.ts). */
  readonly tlsFetchers?: TlsFetchers | undefined;
  /** The isolate's minted access tokens (Entra ID credentials; see invoker/auth/token-cache.ts). */
  readonly tokens?: TokenCache | undefined;
  /** The values of every secret the gateway holds: a passed-through provider header containing one is dropped (egress/held-secrets.ts). */
  readonly heldSecrets?: (() => readonly string[]) | undefined;
  /** Told which backends' providers refused or accepted the gateway's credential (for `/admin/status`). */
  readonly credentialWatch?: CredentialWatch | undefined;
}

/**
 * Refusals (candidates, budgets) and aborts (checkpoints) arrive as GatewayErrors and become the
 * operation's failure; anything else is a bug the engine reports as such.
 */
function refusalOf(err: unknown): { readonly ok: false; readonly error: GatewayError } {
  if (err instanceof GatewayError) return { ok: false, error: err };
  throw err;
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

/** The record of an attempt about to be made on a choice. */
function attemptRecord(plan: DispatchPlan, snapshot: PinnedSnapshot, choice: Choice, now: number, codecs: CodecRegistry): AttemptRecord {
  const a: AttemptRecord = {
    id: newAttemptId(now),
    requestId: plan.requestId,
    snapshotRevision: snapshot.revision,
    logicalModel: choice.model.logicalModel,
    modelRevision: choice.model.revision,
    pool: choice.model.pool,
    backendId: choice.member.backend.id,
    backendName: choice.member.backend.name,
    upstreamModel: choice.member.model,
    backendProtocol: choice.member.backend.protocol,
    codecVersion: codecs.backend(choice.member.backend.protocol)?.version,
    spanId: newSpanId(),
    startedAt: now,
    outcome: "in_progress",
  };
  if (choice.drop.length > 0) a.downgraded = choice.drop;
  return a;
}

/**
 * The invoke phase: turns a logical plan into physical attempts (Pingora-style: select → take the
 * attempt's holds → send → on failure, the one retry decision). Each attempt's holds — probe
 * permit, ledger reservation, call-budget unit, load lease — are registered on the attempt as they
 * are taken, so they are undone exactly once whichever way the attempt or the request ends. The
 * next backend comes from the plan's own candidates, in order, from the snapshot the request
 * pinned.
 */
export class GatewayExecutor {
  readonly #deps: ExecutorDeps;
  readonly #selectors = new Map<string, Selector>();

  constructor(deps: ExecutorDeps) {
    this.#deps = deps;
  }

  /** A chat request. Never rejects for a refusal or an upstream failure: those are `{ ok: false }` results. */
  async execute(plan: DispatchPlan, request: NeutralRequest, ctx: InvocationContext): Promise<Execution> {
    try {
      const candidates = eligibleCandidates(plan, requestFeatures(request), ctx.snapshot, this.#deps.codecs, () => true);
      const done = await this.#attempts(plan, ctx, candidates, { encode: encodeChat(request, ctx.upstreamHeaders), read: (codec) => readChat(plan.stream, codec) });
      if (!done.ok) return done;
      const { success, choice, attempt } = done;
      return success.kind === "buffered"
        ? { ok: true, kind: "buffered", response: success.response, downgraded: choice.drop, headers: success.headers }
        : { ok: true, kind: "stream", body: success.body, decoder: success.decoder, protocol: success.protocol, attempt, downgraded: choice.drop, headers: success.headers };
    } catch (err) {
      return refusalOf(err);
    }
  }

  /**
   * An input-only request (embeddings, moderations), on backends whose protocol has the
   * operation's wire (and which declare its capability, as the plan requires). The same attempts,
   * evidence, retries, breakers and budgets as chat; never streamed. Never rejects for a refusal
   * or an upstream failure.
   */
  async executeInput<Req extends InputRequest, Res extends InputResponse>(op: InputOperation<Req, Res>, plan: DispatchPlan, request: Req, ctx: InvocationContext): Promise<InputExecution<Res>> {
    try {
      const candidates = eligibleCandidates(plan, [], ctx.snapshot, this.#deps.codecs, (codec) => op.backendWire(codec) !== undefined);
      const done = await this.#attempts(plan, ctx, candidates, { encode: encodeInput(op, request), read: (codec) => readInput(op, codec, request.inputs.length) });
      return done.ok ? { ok: true, response: done.success.response, headers: done.success.headers } : done;
    } catch (err) {
      return refusalOf(err);
    }
  }

  /**
   * A token count, forwarded to a backend of the plan's FIRST tier (the model the request would be
   * served by, whose tokenizer counts) whose protocol has a token-count wire. The same attempts,
   * evidence, retries on known-zero, breakers and backend slots as chat; nothing is reserved (the
   * invoke phase is handed no charger) and its attempts are unbilled. Never rejects for a refusal
   * or an upstream failure.
   */
  async countTokens(plan: DispatchPlan, request: NeutralRequest, ctx: InvocationContext): Promise<CountExecution> {
    let candidates: ModelCandidates[];
    try {
      // No request features: a count carries no sampling setting a backend would have to honour.
      candidates = eligibleCandidates({ ...plan, tiers: plan.tiers.slice(0, 1) }, [], ctx.snapshot, this.#deps.codecs, (codec) => codec.countTokens !== undefined);
    } catch (err) {
      const refused = refusalOf(err);
      return { ok: false, reason: "no_counter", error: refused.error };
    }
    try {
      const done = await this.#attempts(plan, ctx, candidates, { encode: encodeCount(request), read: readCount, unbilled: true });
      return done.ok ? { ok: true, inputTokens: done.success.inputTokens, headers: done.success.headers } : { ok: false, reason: "failed", error: done.error };
    } catch (err) {
      return { ok: false, reason: "failed", error: refusalOf(err).error };
    }
  }

  /** The attempts of one request, for any operation: select → take the holds → send → the one retry decision. */
  async #attempts<S>(
    plan: DispatchPlan,
    ctx: InvocationContext,
    candidates: ModelCandidates[],
    op: AttemptOperation<S>,
  ): Promise<{ readonly ok: true; readonly success: S; readonly choice: Choice; readonly attempt: AttemptScope } | { readonly ok: false; readonly error: GatewayError }> {
    const { clock } = this.#deps;
    const req = ctx.request;
    const gate = ctx.breakers;
    const health = ctx.health;
    if (health) {
      for (const c of candidates) {
        for (const m of c.members) {
          const target = probeTargetFor(m.backend, this.#deps.codecs.backend(m.backend.protocol)!);
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
    let last: Choice | undefined;
    let lastError: GatewayError | undefined;
    for (;;) {
      req.checkpoint();
      const choice = nextChoice(candidates, tried, last, pick, { affinityKey: plan.affinityKey });
      if (!choice) {
        // After a failed attempt, the client hears what actually happened, not "no backend".
        return {
          ok: false,
          error: lastError ?? new GatewayError("no_backend_available", `No backend is available for the model '${plan.entrypoint}'. Retry later.`, { retryAfterSeconds: 1 }),
        };
      }
      const backendId = choice.member.backend.id;
      tried.add(choice.member.key);
      last = choice;
      // The slot belongs to the request's admission lease: it moves with each attempt and is
      // released with the lease.
      if (ctx.backendSlots && !ctx.backendSlots.acquire(backendId)) {
        refused.add(choice.member.key);
        continue;
      }
      const first = req.attempts.length === 0;
      const record = attemptRecord(plan, ctx.snapshot, choice, clock.now(), this.#deps.codecs);
      if (op.unbilled) record.unbilled = true;
      const attempt = req.openAttempt(record);
      if (gate) {
        let permit: string | undefined;
        if (gate.admission(backendId) === "probe") {
          const probe = await gate.acquireProbe(backendId);
          if (!probe.allowed) {
            attempt.abandon();
            refused.add(choice.member.key);
            continue;
          }
          permit = probe.permitId;
        }
        // Every attempt owes its backend's breaker its outcome, and a probe permit back: a
        // neutral outcome only returns the permit.
        attempt.own("breaker_report", (a) => gate.report(backendId, breakerReport(a), permit));
      }
      const prepared = prepareAttempt(this.#deps, plan, choice, attempt, op.encode);
      if ("error" in prepared) {
        // A configuration refusal: nothing reserved, nothing sent.
        const next = this.#afterFailure(plan, req, prepared.evidence);
        if (next === undefined) return { ok: false, error: prepared.error };
        lastError = prepared.error;
        await this.#backoff(req, next);
        continue;
      }
      // The reservation before the call-budget unit: a ledger refusal then spends no unit.
      if (ctx.charges) {
        try {
          await ctx.charges.reserve(attempt, choice.model, first);
        } catch (err) {
          const error = err instanceof GatewayError ? err : new GatewayError("internal_error", "The gateway failed to check the budget.", { cause: err });
          attempt.abandon(error.code);
          return { ok: false, error };
        }
      }
      if (ctx.callBudget) {
        const refusal = await this.#spendCallBudget(ctx.callBudget);
        if (refusal) {
          attempt.abandon(refusal.code);
          return { ok: false, error: refusal };
        }
      }
      if (attempt.ended) {
        // The request ended while the holds were being taken; their undos already ran.
        req.checkpoint();
        return { ok: false, error: new GatewayError("client_closed", "The request ended before its attempt was sent.") };
      }
      const result = await sendAttempt(this.#deps, req, choice, attempt, prepared, op.read(prepared.codec));
      const watch = this.#deps.credentialWatch;
      if (watch) {
        // By code, never by message: a refused credential is upstream_auth_failed in every protocol.
        if (result.ok) watch.accepted(backendId, this.#deps.clock.now());
        else if (result.error.code === "upstream_auth_failed") watch.rejected(backendId, result.evidence.status, this.#deps.clock.now());
      }
      if (result.ok) return { ok: true, success: result.success, choice, attempt };
      const next = this.#afterFailure(plan, req, result.evidence);
      if (next === undefined) return { ok: false, error: result.error };
      lastError = result.error;
      await this.#backoff(req, next);
    }
  }

  /** The retry decision for a failed attempt: the delay before the next one, or undefined to stop. */
  #afterFailure(plan: DispatchPlan, req: RequestContext, evidence: Evidence): number | undefined {
    if (req.abortReason !== undefined) return undefined;
    const decision = decideRetry(
      evidence,
      { attemptsMade: req.attempts.length, maxAttempts: plan.retry.maxAttempts, deadlineAt: req.deadlineAt, now: this.#deps.clock.now(), clientCommitted: false },
      this.#deps.rng,
      this.#deps.backoff,
    );
    return decision.action === "retry" ? decision.delayMs : undefined;
  }

  async #backoff(req: RequestContext, delayMs: number): Promise<void> {
    try {
      await (this.#deps.sleep ?? realSleep)(delayMs, req.signal);
    } catch {
      req.checkpoint();
      throw new GatewayError("client_closed", "The client closed the request.");
    }
  }

  /** Takes one unit of the caller's attempt budget; the refusal the client hears, if any. */
  async #spendCallBudget(consume: () => Promise<ConsumeResult>): Promise<GatewayError | undefined> {
    let spent: ConsumeResult;
    try {
      spent = await consume();
    } catch (err) {
      // A strict budget fails closed: without its object no attempt is known to be allowed.
      return new GatewayError("attempt_budget_unavailable", "The caller's attempt budget could not be checked. Retry later.", { cause: err, retryAfterSeconds: 1 });
    }
    if (spent.ok) return undefined;
    return spent.reason === "expired"
      ? new GatewayError("deadline_exceeded", "The caller's deadline for this call has passed.")
      : new GatewayError("attempt_budget_exhausted", "The attempt budget for this call is exhausted.");
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
