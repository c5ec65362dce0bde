import type { ErrorCode } from "../errors/gateway-error.ts";
import type { RequestFeature } from "../protocol/features.ts";
import type { Evidence } from "./evidence.ts";
import type { StopReason, Usage } from "../protocol/neutral.ts";

/**
 * How an attempt ended. The later retry policy reads these classes, never error text:
 * - `connect_failed`: the request never reached the backend (known zero).
 * - `network_error`, `timeout`, `stream_cut`: it may have been accepted (unknown).
 */
export type AttemptOutcome =
  | "in_progress"
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
  readonly startedAt: number;
  headersAt?: number;
  /** First content the model produced (non-empty text or reasoning, or a tool call starting), not the first byte or a heartbeat. */
  firstContentAt?: number;
  endedAt?: number;
  status?: number;
  outcome: AttemptOutcome;
  errorCode?: ErrorCode;
  stopReason?: StopReason;
  /** Undefined = unknown (the provider reported none), never zero. */
  usage?: Usage;
  /** Characters of output seen (text, reasoning, tool arguments): the estimate when usage is unknown. */
  outputChars?: number;
  /** Request features dropped under the revision's declared downgrades. */
  downgraded?: readonly RequestFeature[];
  /** What the attempt proves about the backend having accepted the work (retry reads only this). */
  evidence?: Evidence;
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
