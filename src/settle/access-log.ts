import { usageSourceOf, type AttemptRecord } from "../context/attempt-record.ts";
import type { RequestRecord } from "../context/request-record.ts";
import { clippedContent } from "../context/clipped-content.ts";

/** Reads one finished request with its attempts (the shape `assembledSink` hands its readers). */
export interface AccessLog {
  finished(request: Readonly<RequestRecord>, attempts: readonly Readonly<AttemptRecord>[]): void;
}

/**
 * The logging phase: one JSON line per finished request, on stdout, with the attempts it sent
 * nested in it. The line carries the whole chain once — request, trace, publication revision,
 * entrypoint, decision, caller call id — and each attempt its own part of it: attempt id and
 * span, snapshot revision, logical model and revision, backend, evidence and reason code; so one
 * line explains a request however many attempts it took. (One line rather than one per attempt:
 * the chain is written once, and on workerd each console line costs as much as building it.)
 * Ids, names and figures only: never a key or a provider secret, and a prompt or completion only
 * on a `kind: "content"` line for a request its entrypoint's content policy sampled, redacted and
 * cut (docs/observability.md, "Logs").
 */
export function accessLog(enabled: boolean, write: (line: string) => void = (line) => console.log(line)): AccessLog {
  if (!enabled) return { finished() {} };
  return {
    finished(r, attempts) {
      const sent = attempts.filter((a) => a.outcome !== "not_sent");
      const last = sent.at(-1);
      write(
        JSON.stringify({
          kind: "request",
          requestId: r.requestId,
          traceId: r.trace.traceId,
          spanId: r.trace.spanId,
          parentRequestId: r.parentRequestId,
          // An explain (or a sub-request made for one): decided, never dispatched, never billed.
          explain: r.explain === true ? true : undefined,
          publicationRevision: r.publicationRevision,
          tenant: r.tenant,
          key: r.key,
          chargeTo: r.chargeTo,
          entrypoint: r.entrypoint,
          route: r.route,
          // How the route was chosen: every signal read, with its value or why it is unknown.
          decision: r.decision,
          plugins: r.plugins.length > 0 ? r.plugins : undefined,
          callId: r.callId,
          protocol: r.protocol,
          stream: r.stream,
          model: last?.logicalModel,
          modelRevision: last?.modelRevision,
          snapshotRevision: last?.snapshotRevision,
          phase: r.phase,
          outcome: r.outcome,
          errorCode: r.errorCode,
          durationMs: r.endedAt === undefined ? undefined : r.endedAt - r.receivedAt,
          // Of that, the wait for upstreams (when any); the rest was the gateway's own time.
          upstreamMs: r.upstreamMs,
          // An MCP call's audit: the method, the server and tool it reached, the policy's decision
          // (rule, revision, reason) and whether the tool reported failure.
          mcp: r.mcp,
          // An A2A call's audit: method, agent, skill, generation, the agent's task and context ids
          // (correlations only), the policy's decision and the charge.
          a2a: r.a2a,
          // A token count: the figure answered, reported or estimated, and why an estimate.
          tokenCount: r.tokenCount,
          // A Looper run: the algorithm, its sub-calls (each its own line, under this request) and the answer accepted.
          looper: r.looper,
          attribution: r.attribution,
          workload: r.workload,
          attempts: sent.map((a) => ({
            attemptId: a.id,
            spanId: a.spanId,
            snapshotRevision: a.snapshotRevision,
            model: a.logicalModel,
            modelRevision: a.modelRevision,
            pool: a.pool,
            backend: a.backendName,
            // Which protocol and codec version read the answer, and whether its usage was reported.
            protocol: a.backendProtocol,
            codecVersion: a.codecVersion,
            status: a.status,
            outcome: a.outcome,
            evidence: a.evidence ? { class: a.evidence.class, reason: a.evidence.reason } : undefined,
            errorCode: a.errorCode,
            stopReason: a.stopReason,
            toolCallsProposed: a.toolCallsProposed,
            headersMs: a.headersAt === undefined ? undefined : a.headersAt - a.startedAt,
            ttftMs: a.firstContentAt === undefined ? undefined : a.firstContentAt - a.startedAt,
            durationMs: a.endedAt === undefined ? undefined : a.endedAt - a.startedAt,
            usage: a.usage ?? (a.unbilled ? "none" : "unknown"),
            usageSource: usageSourceOf(a),
            downgraded: a.downgraded,
            // What its settlement booked (integer micro-units of the currency), when it reserved anything.
            costMicros: a.charge?.costMicros,
            currency: a.charge?.currency,
          })),
        }),
      );
      const content = r.content;
      if (content) write(JSON.stringify({ kind: "content", requestId: r.requestId, traceId: r.trace.traceId, publicationRevision: r.publicationRevision, entrypoint: r.entrypoint, route: r.route, callId: r.callId, ...clippedContent(content) }));
    },
  };
}
