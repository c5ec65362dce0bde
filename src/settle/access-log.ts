import type { RecordSink } from "../context/request-context.ts";

/** Most requests whose attempt lines may wait for their request's line at once (a bound, never reached by a request that ends). */
const MAX_WAITING_REQUESTS = 4_096;

/**
 * The logging phase: one JSON line per finished attempt and one per finished request, on stdout.
 * Ids, names and figures only, never a key, a prompt or a provider secret.
 *
 * A request's attempt lines are written together with its own line, in one write when the request
 * ends: each write is a call out of the isolate, and the profile showed the access log's writes
 * among the largest costs of a request. Attempt lines come first, in the order the attempts ended.
 * Lines are kept per request, so under a runtime that files logs by invocation every line stays
 * with the request it belongs to.
 */
export function accessLogSink(enabled: boolean, write: (lines: string) => void = (lines) => console.log(lines)): RecordSink {
  if (!enabled) return { attemptFinished() {}, requestFinished() {} };
  const waiting = new Map<string, string[]>();
  return {
    attemptFinished(a) {
      const line = JSON.stringify({
        kind: "attempt",
        requestId: a.requestId,
        attemptId: a.id,
        snapshotRevision: a.snapshotRevision,
        model: a.logicalModel,
        modelRevision: a.modelRevision,
        backend: a.backendName,
        status: a.status,
        outcome: a.outcome,
        errorCode: a.errorCode,
        stopReason: a.stopReason,
        headersMs: a.headersAt === undefined ? undefined : a.headersAt - a.startedAt,
        ttftMs: a.firstContentAt === undefined ? undefined : a.firstContentAt - a.startedAt,
        durationMs: a.endedAt === undefined ? undefined : a.endedAt - a.startedAt,
        usage: a.usage ?? "unknown",
        downgraded: a.downgraded,
      });
      const lines = waiting.get(a.requestId);
      if (lines) lines.push(line);
      else {
        // Bounded whatever happens: the terminal ends every request once, so this is a guard only.
        if (waiting.size >= MAX_WAITING_REQUESTS) {
          const [oldest, held] = waiting.entries().next().value!;
          waiting.delete(oldest);
          write(held.join("\n"));
        }
        waiting.set(a.requestId, [line]);
      }
    },
    requestFinished(r) {
      const line = JSON.stringify({
        kind: "request",
        requestId: r.requestId,
        parentRequestId: r.parentRequestId,
        tenant: r.tenant,
        key: r.key,
        entrypoint: r.entrypoint,
        route: r.route,
        stream: r.stream,
        phase: r.phase,
        outcome: r.outcome,
        errorCode: r.errorCode,
        attempts: r.attempts,
        durationMs: r.endedAt === undefined ? undefined : r.endedAt - r.receivedAt,
      });
      const lines = waiting.get(r.requestId);
      if (lines === undefined) return write(line);
      waiting.delete(r.requestId);
      lines.push(line);
      write(lines.join("\n"));
    },
  };
}
