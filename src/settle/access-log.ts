import type { RecordSink } from "../context/request-context.ts";

/**
 * The logging phase: one JSON line per finished attempt and one per finished request, on stdout.
 * Ids, names and figures only, never a key, a prompt or a provider secret.
 */
export function accessLogSink(enabled: boolean, write: (line: string) => void = (line) => console.log(line)): RecordSink {
  if (!enabled) return { attemptFinished() {}, requestFinished() {} };
  return {
    attemptFinished(a) {
      write(
        JSON.stringify({
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
        }),
      );
    },
    requestFinished(r) {
      write(
        JSON.stringify({
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
        }),
      );
    },
  };
}
