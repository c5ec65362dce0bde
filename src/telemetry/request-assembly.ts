import type { AttemptRecord } from "../context/attempt-record.ts";
import type { RecordSink } from "../context/request-context.ts";
import type { RequestRecord } from "../context/request-record.ts";

/** Reads one finished request with its attempts (metrics, spans). */
export interface FinishedRequestReader {
  finished(request: Readonly<RequestRecord>, attempts: readonly Readonly<AttemptRecord>[], waitUntil: (p: Promise<unknown>) => void): void;
}

/**
 * A record sink that hands each finished request to its readers together with its attempts. The
 * terminal reports a request's attempts before the request (see `RecordSink`), so attempts wait
 * here, by request id, only until their request arrives. A request that never arrives cannot
 * happen (the terminal runs exactly once on every path); the map is still bounded, as a guard.
 */
export function assembledSink(readers: readonly FinishedRequestReader[], maxPending = 10_000): RecordSink {
  const pending = new Map<string, Readonly<AttemptRecord>[]>();
  return {
    attemptFinished(a) {
      const list = pending.get(a.requestId);
      if (list) list.push(a);
      else {
        if (pending.size >= maxPending) pending.delete(pending.keys().next().value!);
        pending.set(a.requestId, [a]);
      }
    },
    requestFinished(r, waitUntil) {
      const attempts = pending.get(r.requestId) ?? [];
      pending.delete(r.requestId);
      for (const reader of readers) reader.finished(r, attempts, waitUntil);
    },
  };
}

/** Several sinks as one, each receiving every record (the access log and the assembled readers). */
export function fanOutSink(sinks: readonly RecordSink[]): RecordSink {
  return {
    attemptFinished(a) {
      for (const s of sinks) s.attemptFinished(a);
    },
    requestFinished(r, waitUntil) {
      for (const s of sinks) s.requestFinished(r, waitUntil);
    },
  };
}
