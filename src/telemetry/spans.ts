import type { AttemptRecord } from "../context/attempt-record.ts";
import type { DecisionRecord, RequestRecord } from "../context/request-record.ts";
import { newSpanId } from "../context/trace-context.ts";
import { GATEWAY_PROVIDER, OPERATION_CHAT, providerName } from "./semconv.ts";

/** An attribute value as spans carry it. */
export type AttributeValue = string | number | boolean | readonly string[];

/** A finished span, in epoch milliseconds; the OTLP encoder turns it into the wire form. */
export interface SpanData {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  readonly name: string;
  readonly kind: "server" | "client" | "internal";
  readonly startMs: number;
  readonly endMs: number;
  readonly attributes: Readonly<Record<string, AttributeValue | undefined>>;
  readonly events: readonly { readonly name: string; readonly atMs: number }[];
  readonly links: readonly { readonly traceId: string; readonly spanId: string }[];
  /** Error status with the gateway's error code as its message; unset otherwise. */
  readonly error: string | undefined;
}

/**
 * The spans of one finished request, cut from its record: the request (server span), one span per
 * runtime phase it entered (authenticate … respond; respond covers a stream to its end), and one
 * client span per attempt under the invoke phase. Names and `gen_ai.*` attributes follow the
 * pinned conventions (`semconv.ts`); nothing from the request's content is recorded.
 */
export function requestSpans(r: Readonly<RequestRecord>, attempts: readonly Readonly<AttemptRecord>[]): SpanData[] {
  const t = r.trace;
  const end = r.endedAt ?? r.receivedAt;
  const sent = attempts.filter((a) => a.outcome !== "not_sent");
  const last = sent.at(-1);
  const spans: SpanData[] = [];
  const mcp = r.mcp;
  const a2a = r.a2a;
  spans.push({
    traceId: t.traceId,
    spanId: t.spanId,
    parentSpanId: t.parentSpanId,
    // An MCP request is named as the MCP conventions ask: `{mcp.method.name} {target}`.
    // An A2A call likewise: `{method} {agent}`.
    name: mcp ? `${mcp.method}${mcp.target ? ` ${mcp.target}` : ""}` : a2a ? `${a2a.method} ${a2a.agent}` : `${OPERATION_CHAT} ${r.entrypoint ?? "unknown"}`,
    kind: "server",
    startMs: r.receivedAt,
    endMs: end,
    attributes: {
      "gen_ai.operation.name": OPERATION_CHAT,
      "gen_ai.provider.name": GATEWAY_PROVIDER,
      "gen_ai.request.model": r.entrypoint,
      "gen_ai.response.model": last?.logicalModel,
      "gen_ai.usage.input_tokens": last?.usage?.inputTokens,
      "gen_ai.usage.output_tokens": last?.usage?.outputTokens,
      "error.type": r.errorCode,
      "sluice.request_id": r.requestId,
      "sluice.parent_request_id": r.parentRequestId,
      // An explain (or its embedding): decided, never dispatched, never billed.
      "sluice.explain": r.explain === true ? true : undefined,
      "sluice.call_id": r.callId,
      "sluice.tenant": r.tenant,
      "sluice.key": r.key,
      "sluice.entrypoint": r.entrypoint,
      "sluice.route": r.route,
      ...decisionAttributes(r.decision),
      "sluice.protocol": r.protocol,
      "sluice.stream": r.stream,
      "sluice.publication_revision": r.publicationRevision,
      "sluice.outcome": r.outcome,
      "sluice.phase": r.phase,
      "sluice.attempts": sent.length,
      ...(mcp
        ? {
            "gen_ai.operation.name": mcp.method === "tools/call" ? "execute_tool" : undefined,
            "gen_ai.provider.name": undefined,
            "gen_ai.request.model": undefined,
            "mcp.method.name": mcp.method,
            "mcp.protocol.version": mcp.protocolVersion,
            "jsonrpc.request.id": mcp.jsonrpcId === undefined ? undefined : String(mcp.jsonrpcId),
            "gen_ai.tool.name": mcp.method === "tools/call" ? mcp.target : undefined,
            "sluice.mcp.server": mcp.server,
            "sluice.mcp.policy_rule": mcp.decision?.rule,
            "sluice.mcp.policy_revision": mcp.decision?.policyRevision,
            "error.type": r.errorCode ?? (mcp.toolError ? "tool_error" : undefined),
          }
        : {}),
      ...(a2a
        ? {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": undefined,
            "gen_ai.request.model": undefined,
            "gen_ai.agent.name": a2a.agent,
            "jsonrpc.request.id": String(a2a.jsonrpcId),
            "sluice.a2a.method": a2a.method,
            "sluice.a2a.generation": a2a.generation,
            "sluice.a2a.skill": a2a.skill,
            // The agent's protocol state, a correlation only (the business task is `sluice.task_id`'s).
            "sluice.a2a.task_id": a2a.a2aTaskId,
            "sluice.a2a.context_id": a2a.contextId,
            "sluice.a2a.policy_rule": a2a.decision?.rule,
            "sluice.a2a.policy_revision": a2a.decision?.policyRevision,
          }
        : {}),
    },
    events: [],
    links: t.linked ? [{ traceId: t.linked.traceId, spanId: t.linked.spanId }] : [],
    error: r.outcome === "success" ? undefined : (r.errorCode ?? r.outcome),
  });
  let invokeSpan: string | undefined;
  r.phases.forEach((p, i) => {
    const spanId = newSpanId();
    if (p.phase === "invoke") invokeSpan = spanId;
    const next = r.phases[i + 1];
    spans.push({
      traceId: t.traceId,
      spanId,
      parentSpanId: t.spanId,
      name: `sluice.${p.phase}`,
      kind: "internal",
      startMs: p.at,
      endMs: next ? next.at : end,
      attributes: { "sluice.request_id": r.requestId },
      events: [],
      links: [],
      // The phase the request ended in carries its failure.
      error: !next && r.outcome !== "success" ? (r.errorCode ?? r.outcome) : undefined,
    });
  });
  for (const a of sent) {
    const events: { name: string; atMs: number }[] = [];
    if (a.headersAt !== undefined) events.push({ name: "sluice.response_headers", atMs: a.headersAt });
    if (a.firstContentAt !== undefined) events.push({ name: "sluice.first_content", atMs: a.firstContentAt });
    spans.push({
      traceId: t.traceId,
      spanId: a.spanId ?? newSpanId(),
      parentSpanId: invokeSpan ?? t.spanId,
      name: `${OPERATION_CHAT} ${a.upstreamModel}`,
      kind: "client",
      startMs: a.startedAt,
      endMs: a.endedAt ?? end,
      attributes: {
        "gen_ai.operation.name": OPERATION_CHAT,
        "gen_ai.provider.name": providerName(a.backendProtocol),
        "gen_ai.request.model": a.upstreamModel,
        "gen_ai.usage.input_tokens": a.usage?.inputTokens,
        "gen_ai.usage.output_tokens": a.usage?.outputTokens,
        "gen_ai.response.finish_reasons": a.stopReason ? [a.stopReason] : undefined,
        "http.response.status_code": a.status,
        "error.type": a.errorCode,
        "sluice.attempt_id": a.id,
        "sluice.request_id": a.requestId,
        "sluice.backend": a.backendName,
        "sluice.pool": a.pool,
        "sluice.model": a.logicalModel,
        "sluice.model_revision": a.modelRevision,
        "sluice.snapshot_revision": a.snapshotRevision,
        "sluice.attempt.outcome": a.outcome,
        "sluice.evidence.class": a.evidence?.class,
        "sluice.evidence.reason": a.evidence?.reason,
        "sluice.usage": a.usage ? "reported" : a.unbilled ? "none" : "unknown",
      },
      events,
      links: [],
      error: a.outcome === "success" ? undefined : (a.errorCode ?? a.outcome),
    });
  }
  return spans;
}

/**
 * The decision record on the request's span: its name, the decisions passed by, the signals that
 * were unknown, and every signal's value (or unknown reason) as JSON under its own name. Signal
 * names are the publication's, a bounded set.
 */
function decisionAttributes(d: DecisionRecord | undefined): Record<string, string | readonly string[] | undefined> {
  if (d === undefined) return {};
  const out: Record<string, string | readonly string[] | undefined> = { "sluice.decision.name": d.name };
  if (d.skipped.length > 0) out["sluice.decision.skipped"] = d.skipped;
  const unknown: string[] = [];
  for (const [name, v] of Object.entries(d.signals)) {
    out[`sluice.decision.signal.${name}`] = JSON.stringify(v.state === "known" ? v.value : { unknown: v.reason });
    if (v.state === "unknown" && v.reason !== "not_applicable") unknown.push(name);
  }
  if (unknown.length > 0) out["sluice.decision.unknown"] = unknown;
  return out;
}
