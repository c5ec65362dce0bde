import { GatewayError } from "../errors/gateway-error.ts";
import type { DispatchPlan, PlannedModel } from "../plan/dispatch-plan.ts";
import type { CodecRegistry, StreamDecoder } from "../protocol/codec.ts";
import { requestFeatures, withoutFeatures, type RequestFeature } from "../protocol/features.ts";
import type { NeutralRequest, NeutralResponse } from "../protocol/neutral.ts";
import { AttemptFinalizer, type AttemptSink } from "../pipeline/attempt-finalizer.ts";
import type { PinnedMember, PinnedSnapshot } from "../snapshot/pinned-snapshot.ts";
import type { Clock, Rng } from "../traffic/deps.ts";
import type { LoadTracker } from "../traffic/load-tracker.ts";
import type { Selector } from "../traffic/selector.ts";
import { createSelector } from "../traffic/selectors/index.ts";
import { newAttemptId, type AttemptRecord } from "./attempt.ts";
import type { CredentialSource } from "./credentials.ts";
import { errorFromUpstreamStatus, retryAfterSeconds } from "./upstream-error.ts";

/** Per-request inputs pinned by the adapter before execution. */
export interface ExecutionContext {
  /** The BackendSnapshot this request pinned; used for its whole life. */
  readonly snapshot: PinnedSnapshot;
  /** Aborts when the client disconnects. */
  readonly clientSignal: AbortSignal;
}

/** The outcome of dispatch, before encoding for the client. */
export type Execution =
  | {
      readonly kind: "buffered";
      readonly response: NeutralResponse;
      readonly finalizer: AttemptFinalizer;
      /** Features dropped under the revision's declared downgrades (the client is told). */
      readonly downgraded: readonly RequestFeature[];
    }
  | {
      readonly kind: "stream";
      readonly body: ReadableStream<Uint8Array>;
      readonly decoder: StreamDecoder;
      readonly finalizer: AttemptFinalizer;
      readonly downgraded: readonly RequestFeature[];
    };

interface Choice {
  readonly model: PlannedModel;
  readonly member: PinnedMember;
  /** Features the chosen backend's protocol cannot carry, all allowed by the revision's downgrades. */
  readonly drop: readonly RequestFeature[];
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
}

/** Bound on a buffered provider body; a larger one is a provider fault, not something to buffer. */
const MAX_UPSTREAM_JSON_BYTES = 32 * 1024 * 1024;

/** A selector per (snapshot digest, pool): state such as round-robin position lives per pool. */
const MAX_SELECTORS = 512;

/**
 * Turns a logical plan into a physical attempt: resolves the plan's models in the pinned snapshot,
 * narrows candidates by capability, selects a backend, pins its credential and calls it once.
 * (Retries and fallback come with evidence classes; every attempt already has an id and an outcome.)
 */
export class GatewayExecutor {
  readonly #deps: ExecutorDeps;
  readonly #selectors = new Map<string, Selector>();

  constructor(deps: ExecutorDeps) {
    this.#deps = deps;
  }

  async execute(plan: DispatchPlan, request: NeutralRequest, ctx: ExecutionContext): Promise<Execution> {
    const choice = this.#choose(plan, request, ctx.snapshot);
    return this.#attempt(plan, request, ctx, choice);
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

  /**
   * First tier, first model with an eligible backend. A member is eligible when its protocol has a
   * codec, it declares every required capability, and its protocol carries every request feature
   * the revision does not allow dropping. Backends only narrow the plan.
   */
  #choose(plan: DispatchPlan, request: NeutralRequest, snapshot: PinnedSnapshot): Choice {
    const features = requestFeatures(request);
    let capabilityGap: string[] | undefined;
    let featureGap: RequestFeature | undefined;
    for (const model of plan.tiers[0] ?? []) {
      const pool = snapshot.pools.get(model.pool);
      if (!pool) continue;
      const drops = new Map<string, RequestFeature[]>();
      const eligible = pool.members.filter((m) => {
        const codec = this.#deps.codecs.get(m.backend.protocol);
        if (!codec) return false;
        const missing = model.requires.filter((c) => !m.backend.capabilities.includes(c));
        if (missing.length > 0) {
          capabilityGap ??= missing;
          return false;
        }
        const uncarried = features.filter((f) => !codec.carries.has(f));
        const refused = uncarried.find((f) => !model.downgrades.includes(f));
        if (refused !== undefined) {
          featureGap ??= refused;
          return false;
        }
        drops.set(m.key, uncarried);
        return true;
      });
      if (eligible.length === 0) continue;
      const byKey = new Map(eligible.map((m) => [m.key, m]));
      const picked = this.#selector(snapshot, pool.name, pool.selector).select(
        eligible.map((m) => ({ id: m.key, weight: m.weight })),
        { affinityKey: plan.affinityKey },
      );
      const member = picked && byKey.get(picked.id);
      if (member) return { model, member, drop: drops.get(member.key) ?? [] };
    }
    if (featureGap !== undefined) {
      const param = this.#deps.codecs.get(plan.clientProtocol)?.paramName(featureGap) ?? featureGap;
      throw new GatewayError("invalid_request", `The model '${plan.entrypoint}' does not support '${param}'.`, { param });
    }
    if (capabilityGap) {
      throw new GatewayError(
        "invalid_request",
        `The model '${plan.entrypoint}' does not support ${capabilityGap.join(", ")} for this request.`,
      );
    }
    throw new GatewayError("no_backend_available", `No backend is available for the model '${plan.entrypoint}'. Retry later.`, {
      retryAfterSeconds: 1,
    });
  }

  async #attempt(plan: DispatchPlan, original: NeutralRequest, ctx: ExecutionContext, choice: Choice): Promise<Execution> {
    const { clock } = this.#deps;
    const { model, member, drop } = choice;
    const request = withoutFeatures(original, new Set(drop));
    const backend = member.backend;
    const codec = this.#deps.codecs.get(backend.protocol)!;
    const attempt: AttemptRecord = {
      id: newAttemptId(),
      requestId: plan.requestId,
      snapshotRevision: ctx.snapshot.revision,
      logicalModel: model.logicalModel,
      modelRevision: model.revision,
      pool: model.pool,
      backendId: backend.id,
      backendName: backend.name,
      upstreamModel: member.model,
      startedAt: clock.now(),
      outcome: "in_progress",
    };
    if (drop.length > 0) attempt.downgraded = drop;
    const finalizer = new AttemptFinalizer(attempt, this.#deps.load.begin(member.key), this.#deps.sink, clock);

    // Only what the provider needs: never a caller header, never a caller credential.
    const headers = new Headers(codec.upstreamHeaders);
    for (const [k, v] of Object.entries(backend.headers)) headers.set(k, v);
    headers.set("content-type", "application/json");
    headers.set("accept", plan.stream ? "text/event-stream" : "application/json");
    headers.set("accept-encoding", "identity");
    headers.set("user-agent", "sluice");
    if (backend.credential) {
      const secret = this.#deps.credentials.get(backend.credential.secret);
      if (secret === undefined || secret === "") {
        finalizer.finish("connect_failed", "internal_error");
        throw new GatewayError("internal_error", "The gateway is missing a provider credential.", {
          cause: `secret ${backend.credential.secret} is not set`,
        });
      }
      if (backend.credential.scheme === "bearer") headers.set("authorization", `Bearer ${secret}`);
      else headers.set("x-api-key", secret);
    }

    const remaining = plan.deadlineAt - clock.now();
    if (remaining <= 0) {
      finalizer.finish("timeout", "deadline_exceeded");
      throw new GatewayError("deadline_exceeded", "The request deadline passed.");
    }
    const deadline = AbortSignal.timeout(remaining);
    const signal = AbortSignal.any([ctx.clientSignal, deadline]);
    const body = JSON.stringify(codec.encodeRequest(request, member.model, { streamUsage: backend.capabilities.includes("stream-usage") }));

    let res: Response;
    try {
      res = await this.#deps.fetch(`${backend.baseUrl}${codec.upstreamPath}`, { method: "POST", headers, body, signal });
    } catch (err) {
      throw this.#fetchFailure(finalizer, ctx, deadline, err);
    }
    attempt.headersAt = clock.now();
    attempt.status = res.status;

    if (!res.ok) {
      const detail = await res.text().catch(() => "");
      const error = errorFromUpstreamStatus(res.status, retryAfterSeconds(res.headers.get("retry-after"), clock.now()), detail);
      finalizer.finish("upstream_status", error.code);
      throw error;
    }
    const contentType = res.headers.get("content-type") ?? "";
    if (plan.stream) {
      if (!contentType.includes("text/event-stream") || !res.body) {
        res.body?.cancel().catch(() => {});
        finalizer.finish("protocol_error", "upstream_protocol_error");
        throw new GatewayError("upstream_protocol_error", "The model provider did not answer with a stream.");
      }
      return { kind: "stream", body: res.body, decoder: codec.createStreamDecoder(), finalizer, downgraded: drop };
    }

    let json: unknown;
    try {
      const declared = Number(res.headers.get("content-length") ?? "0");
      if (declared > MAX_UPSTREAM_JSON_BYTES) throw new RangeError("provider body too large");
      const text = await res.text();
      if (text.length > MAX_UPSTREAM_JSON_BYTES) throw new RangeError("provider body too large");
      json = JSON.parse(text);
    } catch (err) {
      if (signal.aborted) throw this.#fetchFailure(finalizer, ctx, deadline, err);
      finalizer.finish("protocol_error", "upstream_protocol_error");
      throw new GatewayError("upstream_protocol_error", "The model provider returned an unreadable response.", { cause: err });
    }
    let response: NeutralResponse;
    try {
      response = codec.decodeResponse(json);
    } catch (err) {
      finalizer.finish("protocol_error", "upstream_protocol_error");
      throw err;
    }
    attempt.stopReason = response.stopReason;
    if (response.usage) attempt.usage = response.usage;
    finalizer.finish("success");
    return { kind: "buffered", response, finalizer, downgraded: drop };
  }

  /** Classifies a failed fetch without reading error text: which signal fired, else a network failure. */
  #fetchFailure(finalizer: AttemptFinalizer, ctx: ExecutionContext, deadline: AbortSignal, err: unknown): GatewayError {
    if (ctx.clientSignal.aborted) {
      finalizer.finish("client_cancelled", "client_closed");
      return new GatewayError("client_closed", "The client closed the request.", { cause: err });
    }
    if (deadline.aborted) {
      finalizer.finish("timeout", "deadline_exceeded");
      return new GatewayError("deadline_exceeded", "The request deadline passed before the model provider answered.", { cause: err });
    }
    // Whether the request was written before the failure is unknown here; the resilience work
    // splits this into known-zero (refused) and unknown (reset after write).
    finalizer.finish("network_error", "upstream_unreachable");
    return new GatewayError("upstream_unreachable", "The model provider could not be reached.", { cause: err });
  }
}
