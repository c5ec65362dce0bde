import type { AttemptRecord } from "../context/attempt-record.ts";
import type { RequestContent, RequestRecord } from "../context/request-context.ts";

/** Reads one finished request with its attempts (the shape `assembledSink` hands its readers). */
export interface AccessLog {
  finished(request: Readonly<RequestRecord>, attempts: readonly Readonly<AttemptRecord>[]): void;
}

/**
 * The logging phase: when a request ends, one JSON line per attempt it sent, then one for the
 * request, on stdout. Every line carries the whole chain — request, trace and span, publication
 * and snapshot revisions, entrypoint, decision, logical model and revision, attempt, caller call
 * id, evidence and the reason code — so one line explains itself. Ids, names and figures only:
 * never a key or a provider secret, and a prompt or completion only on a `kind: "content"` line
 * for a request its entrypoint's content policy sampled, redacted and cut (docs/observability.md).
 */
export function accessLog(enabled: boolean, write: (line: string) => void = (line) => console.log(line)): AccessLog {
  if (!enabled) return { finished() {} };
  return {
    finished(r, attempts) {
      const chain = {
        requestId: r.requestId,
        traceId: r.trace.traceId,
        publicationRevision: r.publicationRevision,
        entrypoint: r.entrypoint,
        route: r.route,
        callId: r.callId,
      };
      let last: Readonly<AttemptRecord> | undefined;
      for (const a of attempts) {
        if (a.outcome === "not_sent") continue;
        last = a;
        write(
          JSON.stringify({
            kind: "attempt",
            ...chain,
            spanId: a.spanId,
            attemptId: a.id,
            snapshotRevision: a.snapshotRevision,
            model: a.logicalModel,
            modelRevision: a.modelRevision,
            pool: a.pool,
            backend: a.backendName,
            status: a.status,
            outcome: a.outcome,
            evidence: a.evidence ? { class: a.evidence.class, reason: a.evidence.reason } : undefined,
            errorCode: a.errorCode,
            stopReason: a.stopReason,
            headersMs: a.headersAt === undefined ? undefined : a.headersAt - a.startedAt,
            ttftMs: a.firstContentAt === undefined ? undefined : a.firstContentAt - a.startedAt,
            durationMs: a.endedAt === undefined ? undefined : a.endedAt - a.startedAt,
            usage: a.usage ?? "unknown",
            downgraded: a.downgraded,
          }),
        );
      }
      write(
        JSON.stringify({
          kind: "request",
          ...chain,
          spanId: r.trace.spanId,
          parentRequestId: r.parentRequestId,
          tenant: r.tenant,
          key: r.key,
          protocol: r.protocol,
          stream: r.stream,
          model: last?.logicalModel,
          modelRevision: last?.modelRevision,
          snapshotRevision: last?.snapshotRevision,
          phase: r.phase,
          outcome: r.outcome,
          errorCode: r.errorCode,
          attempts: r.attempts,
          durationMs: r.endedAt === undefined ? undefined : r.endedAt - r.receivedAt,
        }),
      );
      const content = r.content;
      if (content) write(JSON.stringify({ kind: "content", ...chain, prompt: clip(content.prompt, content), completion: clip(content.completion, content) }));
    },
  };
}

/**
 * Content as the content log writes it: every redaction pattern applied, then cut to the
 * policy's length (the cut is marked). Redacting before cutting means a secret that straddles
 * the cut is still found whole.
 */
function clip(text: string, policy: RequestContent): { readonly text: string; readonly truncated: boolean } {
  let t = text;
  for (const re of policy.redact) t = t.replace(re, "[redacted]");
  const truncated = text.length > policy.maxChars || t.length > policy.maxChars;
  return { text: truncated ? t.slice(0, policy.maxChars) : t, truncated };
}
