import { isValidSpanId, isValidTraceId } from "@opentelemetry/api";

/** A W3C trace context as a client (or a parent request) hands it on. */
export interface TraceParent {
  readonly traceId: string;
  readonly spanId: string;
  readonly sampled: boolean;
  /** The `tracestate` header, passed on untouched. */
  readonly state?: string | undefined;
}

/** The trace a request belongs to: its own span, and where that span hangs. */
export interface RequestTrace {
  readonly traceId: string;
  /** The request's root span. */
  readonly spanId: string;
  /** The client's (or the parent request's) span, when the trace was continued. */
  readonly parentSpanId: string | undefined;
  readonly sampled: boolean;
  readonly state: string | undefined;
  /** The client's trace when policy did not let the request continue it: linked, not parented. */
  readonly linked: TraceParent | undefined;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * Parses `traceparent` (W3C Trace Context level 1): version `00` exactly, or a later version read
 * as far as version 00 defines it. Invalid ids (all zeros) and version `ff` are refused.
 */
export function parseTraceparent(header: string | null | undefined, state?: string | null): TraceParent | undefined {
  if (!header) return undefined;
  const m = TRACEPARENT.exec(header.trim());
  if (!m) return undefined;
  const [, version, traceId, spanId, flags, rest] = m;
  if (version === "ff" || (version === "00" && rest !== undefined)) return undefined;
  if (!isValidTraceId(traceId!) || !isValidSpanId(spanId!)) return undefined;
  // tracestate is opaque to us; keep it only while it stays within the spec's size.
  const s = state?.trim();
  return { traceId: traceId!, spanId: spanId!, sampled: (parseInt(flags!, 16) & 1) === 1, state: s && s.length <= 512 ? s : undefined };
}

/** `traceparent` for a span of this trace. */
export function formatTraceparent(traceId: string, spanId: string, sampled: boolean): string {
  return `00-${traceId}-${spanId}-${sampled ? "01" : "00"}`;
}

function randomHex(bytes: number): string {
  const b = crypto.getRandomValues(new Uint8Array(bytes));
  let hex = "";
  for (const x of b) hex += x.toString(16).padStart(2, "0");
  return hex;
}

/** A new random trace id (never all zeros). */
export function newTraceId(): string {
  const id = randomHex(16);
  return isValidTraceId(id) ? id : newTraceId();
}

/** A new random span id (never all zeros). */
export function newSpanId(): string {
  const id = randomHex(8);
  return isValidSpanId(id) ? id : newSpanId();
}

/**
 * The trace of a new request: continue the client's trace when policy trusts it, else start one
 * (linking the client's); a sub-call continues its parent request's trace.
 */
export function requestTrace(client: TraceParent | undefined, trusted: boolean, parent: RequestTrace | undefined, sampleNew: () => boolean): RequestTrace {
  const spanId = newSpanId();
  if (parent) return { traceId: parent.traceId, spanId, parentSpanId: parent.spanId, sampled: parent.sampled, state: parent.state, linked: undefined };
  if (client && trusted) return { traceId: client.traceId, spanId, parentSpanId: client.spanId, sampled: client.sampled, state: client.state, linked: undefined };
  return { traceId: newTraceId(), spanId, parentSpanId: undefined, sampled: sampleNew(), state: undefined, linked: client };
}
