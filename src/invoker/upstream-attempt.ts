import { GatewayError } from "../errors/gateway-error.ts";
import type { DispatchPlan } from "../plan/dispatch-plan.ts";
import type { CodecRegistry, StreamDecoder } from "../protocol/codec.ts";
import { withoutFeatures } from "../protocol/features.ts";
import type { NeutralRequest, NeutralResponse } from "../protocol/neutral.ts";
import { AttemptFinalizer, type AttemptSink } from "../pipeline/attempt-finalizer.ts";
import type { PinnedSnapshot } from "../snapshot/pinned-snapshot.ts";
import type { Clock } from "../traffic/deps.ts";
import type { LoadTracker } from "../traffic/load-tracker.ts";
import type { BreakerGate } from "../traffic/breaker-cache.ts";
import { newAttemptId, type AttemptRecord } from "./attempt.ts";
import { breakerReport } from "./breaker-outcome.ts";
import type { AttemptCharge } from "./attempt-charges.ts";
import type { Choice } from "./candidates.ts";
import type { CredentialSource } from "./credentials.ts";
import { evidenceFromStatus, type Evidence } from "./evidence.ts";
import { readUpstreamErrorDetail, readUpstreamJson } from "./upstream-body.ts";
import { errorFromUpstreamStatus, retryAfterSeconds } from "./upstream-error.ts";

/** What one attempt needs from its surroundings. */
export interface AttemptDeps {
  readonly codecs: CodecRegistry;
  readonly credentials: CredentialSource;
  readonly load: LoadTracker;
  readonly clock: Clock;
  readonly sink: AttemptSink;
  readonly fetch: typeof fetch;
  /** Per attempt: longest wait for the provider's response headers (connection set-up included). */
  readonly firstByteTimeoutMs?: number | undefined;
  /**
   * Opens (and closes) a TCP connection to host:port; resolves false when it cannot be opened.
   * Used for backends with `connectCheck` (the composition root supplies the sockets API).
   */
  readonly preconnect?: ((hostname: string, port: number, signal: AbortSignal) => Promise<boolean>) | undefined;
}

export interface AttemptContext {
  readonly snapshot: PinnedSnapshot;
  readonly clientSignal: AbortSignal;
  /** Circuit breakers, when enabled: every finished attempt is reported off the hot path. */
  readonly breakers?: BreakerGate | undefined;
}

/** A successful attempt: the provider answered 2xx with a readable body or a stream. */
export type AttemptSuccess =
  | { readonly kind: "buffered"; readonly response: NeutralResponse; readonly finalizer: AttemptFinalizer }
  | { readonly kind: "stream"; readonly body: ReadableStream<Uint8Array>; readonly decoder: StreamDecoder; readonly finalizer: AttemptFinalizer };

export type AttemptResult =
  | { readonly ok: true; readonly success: AttemptSuccess; readonly attempt: AttemptRecord }
  | { readonly ok: false; readonly error: GatewayError; readonly evidence: Evidence; readonly attempt: AttemptRecord };

/**
 * One physical call to one backend. Never throws for an upstream failure: it returns the error the
 * client would see together with the evidence the retry policy reads, and it always finishes the
 * attempt record exactly once.
 */
export async function runAttempt(
  deps: AttemptDeps,
  plan: DispatchPlan,
  original: NeutralRequest,
  ctx: AttemptContext,
  choice: Choice,
  opts: { readonly attemptId?: string | undefined; readonly probePermit?: string | undefined; readonly charge?: AttemptCharge | undefined } = {},
): Promise<AttemptResult> {
  const { probePermit, charge } = opts;
  const { clock } = deps;
  const { model, member, drop } = choice;
  const request = withoutFeatures(original, new Set(drop));
  const backend = member.backend;
  const codec = deps.codecs.get(backend.protocol)!;
  const attempt: AttemptRecord = {
    id: opts.attemptId ?? newAttemptId(),
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
  const breakers = ctx.breakers;
  const finalizer = new AttemptFinalizer(attempt, deps.load.begin(member.key), deps.sink, clock, (a) => {
    // Settlement first: it is the bill, and it must run whatever the breaker report does.
    charge?.finish(a);
    breakers?.report(backend.id, breakerReport(a), probePermit);
  });
  const fail = (error: GatewayError, evidence: Evidence, outcome: AttemptRecord["outcome"]): AttemptResult => {
    attempt.evidence = evidence;
    finalizer.finish(outcome, error.code);
    return { ok: false, error, evidence, attempt };
  };

  // Only what the provider needs: never a caller header, never a caller credential.
  const headers = new Headers(codec.upstreamHeaders);
  for (const [k, v] of Object.entries(backend.headers)) headers.set(k, v);
  headers.set("content-type", "application/json");
  headers.set("accept", plan.stream ? "text/event-stream" : "application/json");
  headers.set("accept-encoding", "identity");
  headers.set("user-agent", "sluice");
  if (backend.credential) {
    const secret = deps.credentials.get(backend.credential.secret);
    if (secret === undefined || secret === "") {
      const error = new GatewayError("internal_error", "The gateway is missing a provider credential.", { cause: `secret ${backend.credential.secret} is not set` });
      // Nothing was sent: another backend may serve the request.
      return fail(error, { class: "known_zero", reason: "not_attempted" }, "connect_failed");
    }
    if (backend.credential.scheme === "bearer") headers.set("authorization", `Bearer ${secret}`);
    else headers.set("x-api-key", secret);
  }

  let body: string;
  try {
    body = JSON.stringify(codec.encodeRequest(request, member.model, { streamUsage: backend.capabilities.includes("stream-usage") }));
  } catch (err) {
    // The backend's protocol cannot express this request (an encoder refusal): nothing was sent,
    // and the attempt still ends here, once, like every other.
    const error = err instanceof GatewayError ? err : new GatewayError("internal_error", "The gateway failed to encode the request for the model provider.", { cause: err });
    // `connect_failed`: it never reached the backend, so its breaker hears nothing against it.
    return fail(error, { class: "client_error", reason: "not_attempted" }, "connect_failed");
  }

  const remaining = plan.deadlineAt - clock.now();
  if (remaining <= 0) {
    // Nothing was sent: known-zero for the books; the retry policy stops at the deadline anyway.
    return fail(new GatewayError("deadline_exceeded", "The request deadline passed."), { class: "known_zero", reason: "not_attempted" }, "timeout");
  }
  if (ctx.clientSignal.aborted) {
    return fail(new GatewayError("client_closed", "The client closed the request."), { class: "known_zero", reason: "not_attempted" }, "client_cancelled");
  }
  const deadline = AbortSignal.timeout(remaining);
  // Aborted only while waiting for headers; once they arrive the timer is cleared, so a long
  // healthy stream is never cut by it.
  const firstByte = new AbortController();
  const firstByteTimer =
    deps.firstByteTimeoutMs !== undefined && deps.firstByteTimeoutMs < remaining ? setTimeout(() => firstByte.abort(), deps.firstByteTimeoutMs) : undefined;
  const signal = AbortSignal.any([ctx.clientSignal, deadline, firstByte.signal]);
  /** Which signal fired decides the class; error text is never read. */
  const aborted = (err: unknown): AttemptResult => {
    if (ctx.clientSignal.aborted) {
      return fail(new GatewayError("client_closed", "The client closed the request.", { cause: err }), { class: "unknown", reason: "client_cancelled" }, "client_cancelled");
    }
    if (deadline.aborted) {
      return fail(
        new GatewayError("deadline_exceeded", "The request deadline passed before the model provider answered.", { cause: err }),
        { class: "unknown", reason: "timeout" },
        "timeout",
      );
    }
    if (firstByte.signal.aborted) {
      // The request was sent: the provider may be working on it. Unknown, so never retried.
      return fail(
        new GatewayError("upstream_timeout", "The model provider did not start answering in time.", { cause: err }),
        { class: "unknown", reason: "timeout" },
        "timeout",
      );
    }
    // A refused connection and a reset after the body was written look the same here: unknown.
    return fail(new GatewayError("upstream_unreachable", "The model provider could not be reached.", { cause: err }), { class: "unknown", reason: "network_error" }, "network_error");
  };

  if (backend.connectCheck && deps.preconnect) {
    const url = new URL(backend.baseUrl);
    const port = url.port !== "" ? Number(url.port) : url.protocol === "https:" ? 443 : 80;
    let opened: boolean;
    try {
      opened = await deps.preconnect(url.hostname, port, signal);
    } catch {
      opened = false;
    }
    if (signal.aborted) {
      clearTimeout(firstByteTimer);
      return aborted(signal.reason);
    }
    if (!opened) {
      clearTimeout(firstByteTimer);
      // The request was never sent: the connection did not open. Safe to try elsewhere.
      return fail(new GatewayError("upstream_unreachable", "The model provider could not be reached."), { class: "known_zero", reason: "connect_failed" }, "connect_failed");
    }
  }

  let res: Response;
  try {
    res = await deps.fetch(`${backend.baseUrl}${codec.upstreamPath}`, { method: "POST", headers, body, signal });
  } catch (err) {
    return aborted(err);
  } finally {
    clearTimeout(firstByteTimer);
  }
  attempt.headersAt = clock.now();
  attempt.status = res.status;

  if (!res.ok) {
    const detail = await readUpstreamErrorDetail(res);
    const after = retryAfterSeconds(res.headers.get("retry-after"), clock.now());
    return fail(errorFromUpstreamStatus(res.status, after, detail), evidenceFromStatus(res.status, codec.rejectedBeforeProcessing, after), "upstream_status");
  }
  const contentType = res.headers.get("content-type") ?? "";
  if (plan.stream) {
    if (!contentType.includes("text/event-stream") || !res.body) {
      res.body?.cancel().catch(() => {});
      return fail(new GatewayError("upstream_protocol_error", "The model provider did not answer with a stream."), { class: "unknown", reason: "protocol_error" }, "protocol_error");
    }
    attempt.evidence = { class: "success", reason: "ok", status: res.status };
    return { ok: true, success: { kind: "stream", body: res.body, decoder: codec.createStreamDecoder(), finalizer }, attempt };
  }

  let json: unknown;
  try {
    json = await readUpstreamJson(res);
  } catch (err) {
    if (signal.aborted) return aborted(err);
    return fail(
      err instanceof GatewayError ? err : new GatewayError("upstream_protocol_error", "The model provider returned an unreadable response.", { cause: err }),
      { class: "unknown", reason: "protocol_error" },
      "protocol_error",
    );
  }
  let response: NeutralResponse;
  try {
    response = codec.decodeResponse(json);
  } catch (err) {
    const error = err instanceof GatewayError ? err : new GatewayError("upstream_protocol_error", "The model provider returned an unreadable response.", { cause: err });
    return fail(error, { class: "unknown", reason: "protocol_error" }, "protocol_error");
  }
  attempt.stopReason = response.stopReason;
  if (response.usage) attempt.usage = response.usage;
  attempt.outputChars = response.text.length + (response.reasoning ?? []).reduce((n, r) => n + r.text.length, 0) + response.toolCalls.reduce((n, c) => n + c.arguments.length, 0);
  attempt.evidence = { class: "success", reason: "ok", status: res.status };
  finalizer.finish("success");
  return { ok: true, success: { kind: "buffered", response, finalizer }, attempt };
}
