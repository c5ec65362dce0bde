import type { ErrorCode } from "../errors/gateway-error.ts";
import type { BackendProtocolId } from "../protocol/codec.ts";
import type { RequestFeature } from "../protocol/features.ts";
import type { StopReason, Usage } from "../protocol/neutral.ts";

/**
 * How an attempt ended. The retry policy reads evidence, never these or error text:
 * - `connect_failed`: the request never reached the backend (known zero).
 * - `network_error`, `timeout`, `stream_cut`: it may have been accepted (unknown).
 * - `not_sent`: the gateway gave the attempt up before sending it (a budget, call budget or
 *   probe permit refused); such an attempt is never listed or logged, only its holds undone.
 * - `gateway_error`: the gateway itself failed while the attempt was under way.
 */
export type AttemptOutcome =
  | "in_progress"
  | "not_sent"
  | "gateway_error"
  | "success"
  | "upstream_status"
  | "connect_failed"
  | "network_error"
  | "timeout"
  | "client_cancelled"
  | "stream_cut"
  | "protocol_error";

/** One physical call to one backend. Every attempt has an id, whether it ends well or not. */
export interface AttemptRecord {
  readonly id: string;
  readonly requestId: string;
  readonly snapshotRevision: number;
  readonly logicalModel: string;
  readonly modelRevision: number;
  readonly pool: string;
  readonly backendId: string;
  readonly backendName: string;
  readonly upstreamModel: string;
  /** The backend's wire protocol (which provider family answered, for telemetry). */
  readonly backendProtocol?: BackendProtocolId | undefined;
  /** The version of the codec that spoke the backend's protocol (it read the usage). */
  readonly codecVersion?: string | undefined;
  /** The attempt's span in the request's trace (what a provider sees as parent when it propagates). */
  readonly spanId?: string | undefined;
  readonly startedAt: number;
  /** When it went out (after its holds were taken): its upstream wait begins here. */
  sentAt?: number;
  headersAt?: number;
  /** First content the model produced (non-empty text or reasoning, or a tool call starting), not the first byte or a heartbeat. */
  firstContentAt?: number;
  endedAt?: number;
  status?: number;
  outcome: AttemptOutcome;
  errorCode?: ErrorCode;
  stopReason?: StopReason;
  /**
   * Names of the tools the model proposed calling, in order (a proposal, not an execution:
   * metadata only, never arguments); at most {@link MAX_PROPOSED_TOOL_CALLS}, each cut to 128 characters.
   */
  toolCallsProposed?: string[];
  /** Undefined = unknown (the provider reported none), never zero — unless the attempt is {@link unbilled}. */
  usage?: Usage;
  /**
   * The operation costs nothing at the provider (a token count): it reports no usage and none is
   * owed, so a missing `usage` is "none", not unknown, and nothing waits for reconciliation.
   */
  unbilled?: true;
  /** Characters of output seen (text, reasoning, tool arguments): the estimate when usage is unknown. */
  outputChars?: number;
  /** Request features dropped under the revision's declared downgrades. */
  downgraded?: readonly RequestFeature[];
  /** What the attempt proves about the backend having accepted the work (retry reads only this). */
  evidence?: Evidence;
  /** What settling its reservation booked, set by the settle phase as it writes it (absent: nothing was reserved). */
  charge?: AttemptCharge;
}

/** An attempt's settlement as the call ledger records it (the budget ledger stays the authority on money). */
export interface AttemptCharge {
  /** `known`: settled at the provider's usage; `unknown`: held for reconciliation; `none`: released, nothing done. */
  readonly usage: "known" | "unknown" | "none";
  /** The amount settled (integer micro-units); 0 when released or unknown. */
  readonly costMicros: number;
  readonly currency: string | undefined;
}

/**
 * Unguessable attempt id that sorts by creation time: 48 bits of milliseconds, then 80 random
 * bits, as 32 hex digits. Time order keeps the ledger's attempt index appending at its end rather
 * than touching a random page on every reservation.
 */
export function newAttemptId(now: number = Date.now()): string {
  const random = crypto.getRandomValues(new Uint8Array(10));
  let hex = Math.max(0, Math.floor(now)).toString(16).padStart(12, "0").slice(-12);
  for (const b of random) hex += b.toString(16).padStart(2, "0");
  return `att_${hex}`;
}

/**
 * What an attempt proves about the backend having accepted (and possibly billed) the work. Retry
 * and fallback read only this, never error text.
 *
 * - `known_zero`: the backend provably did not accept the request: its protocol declares the
 *   status as a refusal before processing (e.g. a 429 rate-limit answer).
 * - `unknown`: it may have accepted it: a 5xx after acceptance, a timeout or a connection failure
 *   once the request may have been written, a cut stream. Never retried.
 * - `client_error`: the request itself was refused (4xx other than the declared ones).
 * - `success`.
 *
 * A connection failure without response headers is `unknown`: workerd's fetch reports a refused
 * connection and a reset after the body was written with the same error (no structured field
 * tells them apart), and treating a reset as known-zero would bill twice. Backends with
 * `connectCheck` open a TCP connection first: when THAT fails, nothing was sent — known-zero.
 */
export type EvidenceClass = "known_zero" | "unknown" | "client_error" | "success";

/** Why an attempt got its class, for records and tests. */
export type EvidenceReason =
  | "ok"
  | "rejected_before_processing"
  | "connect_failed"
  | "status_after_acceptance"
  | "status_client_error"
  | "network_error"
  | "timeout"
  | "client_cancelled"
  | "protocol_error"
  | "stream_cut"
  | "not_attempted"
  /** The backend's credential could not be had (an access token could not be minted): nothing was sent. */
  | "credential_unavailable";

export interface Evidence {
  readonly class: EvidenceClass;
  readonly reason: EvidenceReason;
  readonly status?: number | undefined;
  /** Seconds the backend asked to wait (`retry-after`, or `retry-after-ms` to the millisecond), when it said. */
  readonly retryAfterSeconds?: number | undefined;
}

/**
 * Where an attempt's usage came from, as records name it: the provider reported it, the gateway
 * estimated it, or it is unknown (none was read).
 */
export type UsageSourceLabel = "reported" | "estimated" | "unknown";

/** The attempt's usage source for records (an unbilled attempt's missing usage is none owed, still not reported). */
export function usageSourceOf(a: Readonly<AttemptRecord>): UsageSourceLabel {
  if (a.usage === undefined) return "unknown";
  return a.usage.source === "provider" ? "reported" : "estimated";
}

/** How many proposed tool calls an attempt record keeps (a model's output is not bounded by anything else here). */
export const MAX_PROPOSED_TOOL_CALLS = 64;

/** Notes a tool call the model proposed on the attempt's record, within the bounds above. */
export function noteProposedToolCall(a: AttemptRecord, name: string): void {
  const list = (a.toolCallsProposed ??= []);
  if (list.length < MAX_PROPOSED_TOOL_CALLS) list.push(name.slice(0, 128));
}
