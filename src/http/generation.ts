import { RequestBilling } from "../billing/attempt-billing.ts";
import type { PrincipalBudget } from "../billing/budget-policy.ts";
import { inputTokenBound, outputCap } from "../billing/token-bounds.ts";
import { estimatePromptTokens } from "../engine/request-facts.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { ProtocolId, ResponseStamp } from "../protocol/codec.ts";
import type { ConsumeResult } from "../budget/attempt-budget.ts";
import { parseCallBudget } from "../budget/attempt-budget-client.ts";
import { ExecutionError, type ExecutionContext } from "../invoker/executor.ts";
import type { DispatchPlan } from "../plan/dispatch-plan.ts";
import type { NeutralRequest } from "../protocol/neutral.ts";
import { createClientStream } from "../pipeline/stream-pipeline.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { errorResponse } from "./error-response.ts";
import { checkHeaders, discardUnreadBody, readJsonBody } from "./limits.ts";
import { logRequestError } from "./request-log.ts";

/** Transport facts the adapter passes along; nothing here is Hono-specific. */
export interface GenerationInput {
  readonly request: Request;
  readonly protocol: ProtocolId;
  readonly requestId: string;
  readonly receivedAt: number;
  /** Keeps the isolate alive for work after the response (breaker reports). */
  readonly waitUntil: (p: Promise<unknown>) => void;
}

/**
 * Pins the snapshot, executes the plan and encodes the answer for the client. A stream's body
 * calls `onStreamEnd` exactly once when it ends, fails or is cancelled.
 */
async function dispatch(
  rt: GatewayRuntime,
  input: GenerationInput,
  plan: DispatchPlan,
  neutral: NeutralRequest,
  d: DispatchOptions,
): Promise<{ response: Response; streaming: boolean }> {
  const { idHeader, onStreamEnd, signal } = d;
  // Pin the snapshot once: this object serves the request to its end, whatever activates meanwhile.
  const snapshot = await rt.snapshots.current();
  const execution = await rt.executor.execute(plan, neutral, {
    snapshot,
    clientSignal: signal,
    breakers: rt.breakers?.forRequest(input.waitUntil),
    health: rt.health?.forRequest(input.waitUntil),
    callBudget: d.callBudget,
    backendSlots: d.backendSlots,
    charges: d.billing,
  });
  const codec = rt.codecs.get(input.protocol)!;
  const stamp: ResponseStamp = { id: input.requestId.slice(4), created: Math.floor(input.receivedAt / 1000), model: plan.entrypoint };
  const headers: Record<string, string> = {
    ...idHeader,
    ...attemptHeader(execution.attempts),
    // A declared downgrade is the client's business: it is told which of its fields were dropped.
    ...(execution.downgraded.length > 0 ? { "x-sluice-downgraded": execution.downgraded.map((f) => codec.paramName(f)).join(", ") } : {}),
    ...(d.billing ? budgetHeaders(d.billing, d.budget) : {}),
  };
  if (execution.kind === "buffered") {
    const response = new Response(JSON.stringify(codec.encodeResponse(execution.response, stamp)), { headers: { "content-type": "application/json", ...headers } });
    return { response, streaming: false };
  }
  // The client stream is handed to the runtime directly: a client disconnect cancels it, and its
  // cancel() settles the attempt and cancels the provider's body (aborting the upstream fetch).
  const clientStream = createClientStream(execution.body, {
    decoder: execution.decoder,
    encoder: codec.createStreamEncoder(stamp, neutral),
    finalizer: execution.finalizer,
    clock: rt.clock,
    deadlineAt: plan.deadlineAt,
    onEnd: onStreamEnd,
    clientSignal: signal,
    timeouts: { firstTokenMs: rt.config.gateway.traffic.firstTokenTimeoutMs, idleMs: rt.config.gateway.traffic.streamIdleTimeoutMs },
  });
  const response = new Response(clientStream, { headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", ...headers } });
  return { response, streaming: true };
}

interface DispatchOptions {
  readonly idHeader: Record<string, string>;
  /** Runs exactly once when a stream's body ends, fails or is cancelled. */
  readonly onStreamEnd: () => void;
  readonly signal: AbortSignal;
  readonly callBudget: (() => Promise<ConsumeResult>) | undefined;
  readonly backendSlots: ExecutionContext["backendSlots"];
  readonly billing: RequestBilling | undefined;
  readonly budget: PrincipalBudget | undefined;
}

/**
 * Budget facts the caller may see: a soft route that went ahead without the ledger says so, and
 * keys allowed to see their budget get what remains after this request's reservation.
 */
function budgetHeaders(billing: RequestBilling, budget: PrincipalBudget | undefined): Record<string, string> {
  const h: Record<string, string> = {};
  if (billing.unchecked) h["x-sluice-budget"] = "unchecked";
  const remaining = billing.lastGrant?.remaining;
  if (budget?.exposeBudget && remaining && remaining.length > 0) {
    h["x-sluice-budget-remaining"] = remaining.map((r) => `${r.scope};${r.metric}=${r.remaining}`).join(", ");
  }
  return h;
}

/** An admission refusal as the client sees it; capacity figures stay internal. */
function admissionError(reason: "queue_full" | "deadline" | "cancelled", retryAfterSeconds: number): GatewayError {
  switch (reason) {
    case "queue_full":
      return new GatewayError("gateway_overloaded", "The gateway is at capacity. Retry later.", { retryAfterSeconds });
    case "deadline":
      return new GatewayError("deadline_exceeded", "The request deadline passed while waiting for capacity.");
    case "cancelled":
      return new GatewayError("client_closed", "The client closed the request.");
  }
}

/** Attempt ids, in order, so a caller can quote exactly which upstream calls its request made. */
function attemptHeader(attempts: readonly { readonly id: string }[]): Record<string, string> {
  return attempts.length > 0 ? { "x-sluice-attempts": attempts.map((a) => a.id).join(", ") } : {};
}

/** The caller's key from `Authorization: Bearer` or `x-api-key`; never forwarded anywhere. */
export function presentedKey(headers: Headers): string | undefined {
  const auth = headers.get("authorization");
  if (auth !== null) {
    const m = /^Bearer\s+(.+)$/i.exec(auth.trim());
    return m?.[1]?.trim();
  }
  return headers.get("x-api-key")?.trim() ?? undefined;
}

/** Trusted headers only: the ones the bootstrap config lists. */
export function trustedHeaders(headers: Headers, names: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const n of names) {
    const v = headers.get(n);
    if (v !== null) out.set(n, v);
  }
  return out;
}

/**
 * One generation request end to end: limits → auth → body → engine → executor → client encoding.
 * Headers are committed only once the provider has answered successfully, so every failure before
 * that is a proper HTTP error in the client's protocol.
 */
export async function handleGeneration(rt: GatewayRuntime, input: GenerationInput): Promise<Response> {
  const { request, protocol, requestId } = input;
  const idHeader = { [rt.config.gateway.observability.requestIdHeader]: requestId };
  try {
    const limits = rt.config.gateway.limits;
    checkHeaders(request.headers, limits);
    const principal = await rt.authenticator.authenticate(presentedKey(request.headers));
    const body = await readJsonBody(request, limits);
    const call = parseCallBudget(request.headers, input.receivedAt);
    if (call && "error" in call) throw new GatewayError("invalid_request", call.error);
    const trusted = trustedHeaders(request.headers, rt.config.gateway.security.trustedHeaders);
    const action = rt.engine
      .begin({ principal, protocol, body, requestId, receivedAt: input.receivedAt, trustedHeaders: trusted, callerDeadlineAt: call?.deadlineAt })
      .prepare();
    if (action.kind === "immediate") return errorResponse(action.error, protocol, idHeader);

    const { plan } = action;
    let neutral = action.request;
    // The tenant's ledger, when it uses one: the request gets an output cap (injected when it set
    // none, and the client is told) so every attempt's worst case is bounded and priced.
    const budget = rt.budgets.forPrincipal(principal, trusted);
    let billing: RequestBilling | undefined;
    if (budget) {
      const policy = rt.budgets.entrypoint(plan.entrypoint);
      const cap = outputCap(neutral, policy.defaultMaxOutputTokens);
      if (cap.injected) {
        neutral = { ...neutral, maxOutputTokens: cap.cap };
        idHeader["x-sluice-max-output-tokens"] = `${cap.cap}; injected`;
      }
      billing = new RequestBilling({
        ledger: rt.ledger,
        budget,
        policy,
        price: rt.budgets.price,
        currency: rt.budgets.currency,
        requestId,
        inputBound: inputTokenBound(neutral),
        inputEstimate: () => estimatePromptTokens(neutral),
        outputCap: cap.cap,
        waitUntil: input.waitUntil,
        log: (e) => console.error(JSON.stringify(e)),
      });
    }
    // Admission before any upstream work. The lease is released exactly once: when a stream's body
    // ends or is cancelled, or right here for buffered answers and failures.
    const ticket = rt.drain.track();
    if (!ticket) throw new GatewayError("gateway_draining", "The gateway is shutting down. Retry on another instance.", { retryAfterSeconds: 1 });
    // A drain that runs out of budget cancels the request like a client leaving would.
    const signal = AbortSignal.any([request.signal, ticket.signal]);
    const admitted = await rt.admission.admit({ tenant: principal.tenantId, model: plan.entrypoint }, { deadlineAt: plan.deadlineAt, signal });
    if (!admitted.ok) {
      ticket.done();
      throw admissionError(admitted.reason, admitted.retryAfterSeconds);
    }
    const release = () => {
      admitted.lease.release();
      ticket.done();
    };
    let handedOff = false;
    try {
      // Call ids are scoped by tenant, so two tenants choosing the same id never share a budget.
      const callBudget =
        call === undefined
          ? undefined
          : () => rt.callBudgets.consume(`${principal.tenantId}:${call.callId}`, { initialBudget: call.budget, deadlineAt: call.deadlineAt });
      if (call) idHeader["x-sluice-call-id"] = call.callId;
      const backendSlots = {
        // The slot this request already holds counts as room: a retry may go back to it.
        hasRoom: (id: string) => admitted.lease.backend === id || rt.admission.hasBackendRoom(id),
        acquire: (id: string) => admitted.lease.acquireBackend(id).ok,
      };
      const { response, streaming } = await dispatch(rt, input, plan, neutral, { idHeader, onStreamEnd: release, signal, callBudget, backendSlots, billing, budget });
      handedOff = streaming;
      return response;
    } finally {
      if (!handedOff) release();
    }
  } catch (thrown) {
    await discardUnreadBody(request, rt.config.gateway.limits);
    let err = thrown;
    if (err instanceof ExecutionError) {
      Object.assign(idHeader, attemptHeader(err.attempts));
      err = err.error;
    }
    if (err instanceof GatewayError) {
      logRequestError(requestId, err);
      return errorResponse(err, protocol, idHeader);
    }
    console.error(JSON.stringify({ kind: "request_failed", requestId, code: "internal_error", cause: String(err) }));
    return errorResponse(new GatewayError("internal_error", "The gateway failed to process the request."), protocol, idHeader);
  }
}
