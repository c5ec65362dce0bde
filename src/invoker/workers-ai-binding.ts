import type { AttemptOutcome, Evidence } from "../context/attempt-record.ts";
import { GatewayError } from "../errors/gateway-error.ts";

/**
 * The part of a Workers AI binding (`env.AI`) the gateway calls: `run(model, inputs, options)`.
 * The composition root hands the Worker's own bindings in; nothing below it knows the runtime's
 * types. With `returnRawResponse` the binding answers with the service's own `Response` — status,
 * headers and body (JSON, or an SSE stream for `stream: true`) — instead of throwing an error whose
 * only structure is its message text, so an attempt's evidence comes from a status, as over HTTP.
 */
export interface WorkersAiBinding {
  run(model: string, inputs: Record<string, unknown>, options: WorkersAiRunOptions): Promise<unknown>;
}

/** The options the gateway passes to every `run`. */
export interface WorkersAiRunOptions {
  /** Answer with the service's raw `Response` (every status), never throw for an error status. */
  readonly returnRawResponse: true;
  /** Aborts the binding's own request to the service (the request's end, the first-byte limit). */
  readonly signal: AbortSignal;
}

/** The Worker's bindings that binding-protocol backends name, looked up by name at attempt time. */
export type ModelBindings = (name: string) => WorkersAiBinding | undefined;

/** Whether a Worker binding can serve as a Workers AI binding (it has `run`). */
export function isWorkersAiBinding(value: unknown): value is WorkersAiBinding {
  return typeof value === "object" && value !== null && typeof (value as { run?: unknown }).run === "function";
}

/**
 * One attempt through a binding: the service's answer as a `Response`. Rejects when no answer came
 * (the signal fired first, or the binding threw); a binding that ignores the signal is not waited
 * for, and its late answer's body is cancelled. A binding that does not honour `returnRawResponse`
 * answers the documented outputs instead (an object, or the SSE stream of a `stream: true` call),
 * which become the equivalent 2xx response; such a binding reports errors only by throwing.
 */
export async function runThroughBinding(binding: WorkersAiBinding, model: string, inputs: Record<string, unknown>, signal: AbortSignal): Promise<Response> {
  signal.throwIfAborted();
  const run = binding.run(model, inputs, { returnRawResponse: true, signal });
  let onAbort: (() => void) | undefined;
  const stopped = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return asResponse(await Promise.race([run, stopped]));
  } catch (err) {
    // The answer may still come: nothing will read it.
    if (signal.aborted) run.then((late) => (late instanceof Response ? late.body?.cancel() : late instanceof ReadableStream ? late.cancel() : undefined)).catch(() => {});
    throw err;
  } finally {
    signal.removeEventListener("abort", onAbort!);
  }
}

function asResponse(answer: unknown): Response {
  if (answer instanceof Response) return answer;
  if (answer instanceof ReadableStream) return new Response(answer, { headers: { "content-type": "text/event-stream" } });
  // A documented output object; anything else is left for the codec to refuse as unreadable.
  return new Response(JSON.stringify(answer ?? null), { headers: { "content-type": "application/json" } });
}

/** What a non-2xx answer means for the attempt. */
export interface StatusFailure {
  readonly error: GatewayError;
  readonly evidence: Evidence;
  readonly outcome: AttemptOutcome;
}

/**
 * Workers AI statuses whose meaning differs from HTTP's usual one, else undefined. Its 408 is the
 * service's own inference timeout (internal code 3007) or abort (3008): the request was accepted
 * and may have been billed, so the evidence is unknown (never retried) and the backend's breaker
 * hears a timeout — not a client's 4xx, which says nothing about the backend. Every other status
 * means what it does over HTTP: 429 (3036 daily allocation used up, 3040 out of capacity) is a
 * refusal before any work.
 */
export function workersAiStatusFailure(status: number, detail: string): StatusFailure | undefined {
  if (status !== 408) return undefined;
  return {
    error: new GatewayError("upstream_timeout", "The model provider did not finish in time.", { cause: { status, detail: detail.slice(0, 2000) } }),
    evidence: { class: "unknown", reason: "status_after_acceptance", status },
    outcome: "timeout",
  };
}
