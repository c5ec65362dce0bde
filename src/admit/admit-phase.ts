import { abortError, type RequestContext } from "../context/request-context.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { AdmissionController, AdmissionLease, AdmissionRefusalReason } from "./admission.ts";
import type { DrainController } from "./drain.ts";

/** An admission refusal as the client sees it; capacity figures stay internal. */
function admissionError(reason: AdmissionRefusalReason, retryAfterSeconds: number): GatewayError {
  switch (reason) {
    case "queue_full":
      return new GatewayError("gateway_overloaded", "The gateway is at capacity. Retry later.", { retryAfterSeconds });
    case "deadline":
      return new GatewayError("deadline_exceeded", "The request deadline passed while waiting for capacity.");
    case "cancelled":
      return new GatewayError("client_closed", "The client closed the request.");
  }
}

/**
 * The admit phase: the drain's ticket (a draining isolate admits nothing new), then the admission
 * lease, waiting in the fair queue if needed. Both are registered on the request the moment they
 * are taken; a request aborted while queued leaves the queue at once (the queue listens to the
 * request's signal). A sub-call passes no drain: it runs inside its parent's ticket.
 *
 * @throws GatewayError gateway_draining, gateway_overloaded, deadline_exceeded, client_closed.
 */
export async function admitRequest(
  ctx: RequestContext,
  admission: AdmissionController,
  drain: DrainController | undefined,
  who: { readonly tenant: string; readonly model: string } | undefined,
): Promise<AdmissionLease | undefined> {
  if (drain) {
    const ticket = drain.track();
    // A draining isolate refuses exactly as a drain cancels: the same code and retry-after.
    if (!ticket) throw abortError("drain");
    ctx.own("drain_ticket", () => ticket.done());
    ctx.watchDrain(ticket);
  }
  ctx.checkpoint();
  // Work admitted piece by piece (a Looper run's sub-calls) takes the drain ticket only.
  if (who === undefined) return undefined;
  const admitted = await admission.admit(who, { deadlineAt: ctx.deadlineAt, signal: ctx.signal });
  if (!admitted.ok) {
    ctx.checkpoint();
    throw admissionError(admitted.reason, admitted.retryAfterSeconds);
  }
  const lease = admitted.lease;
  ctx.own("admission_lease", () => lease.release());
  ctx.checkpoint();
  return lease;
}
