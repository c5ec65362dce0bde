import { describe, expect, it } from "vitest";
import { parseTraceparent } from "../../../src/context/trace-context.ts";
import { metricsExport, nanos, traceExport } from "../../../src/telemetry/otlp.ts";
import { MetricRegistry } from "../../../src/telemetry/metric-registry.ts";
import { SEMCONV_SCHEMA_URL } from "../../../src/telemetry/semconv.ts";
import { requestSpans } from "../../../src/telemetry/spans.ts";
import { attemptRecord, requestRecord } from "./fixtures.ts";

const client = parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")!;

describe("spans of a request", () => {
  it("hang the request under the client's span, one span per phase, each attempt under invoke", () => {
    const r = requestRecord({}, client);
    const spans = requestSpans(r, [attemptRecord({ spanId: "1111111111111111" })]);
    const root = spans[0]!;
    expect(root).toMatchObject({ traceId: client.traceId, parentSpanId: client.spanId, kind: "server", name: "chat sluice-chat", startMs: 1_000, endMs: 1_900, error: undefined });
    expect(root.attributes).toMatchObject({ "gen_ai.operation.name": "chat", "gen_ai.request.model": "sluice-chat", "gen_ai.response.model": "chat-small", "sluice.request_id": "req_1", "sluice.publication_revision": "demo-1" });
    const phases = spans.filter((s) => s.kind === "internal");
    expect(phases.map((s) => s.name)).toEqual(["sluice.authenticate", "sluice.decode", "sluice.authorize", "sluice.decide", "sluice.reserve", "sluice.admit", "sluice.invoke", "sluice.respond"]);
    expect(phases.every((s) => s.parentSpanId === root.spanId && s.traceId === client.traceId)).toBe(true);
    expect(phases.find((s) => s.name === "sluice.admit")).toMatchObject({ startMs: 1_006, endMs: 1_010 });
    expect(phases.at(-1)).toMatchObject({ startMs: 1_200, endMs: 1_900 });
    const attempt = spans.find((s) => s.kind === "client")!;
    expect(attempt).toMatchObject({ spanId: "1111111111111111", parentSpanId: phases.find((s) => s.name === "sluice.invoke")!.spanId, name: "chat sim-small" });
    expect(attempt.attributes).toMatchObject({ "gen_ai.provider.name": "openai", "sluice.attempt_id": "att_1", "sluice.evidence.class": "success", "gen_ai.usage.output_tokens": 33 });
    expect(attempt.events.map((e) => e.name)).toEqual(["sluice.response_headers", "sluice.first_content"]);
  });

  it("sets error status from the gateway's error code, on the request and the phase it ended in", () => {
    const spans = requestSpans(requestRecord({ outcome: "error", errorCode: "budget_exceeded", phase: "reserve", phases: [{ phase: "authenticate", at: 1_000 }, { phase: "reserve", at: 1_004 }] }), []);
    expect(spans[0]!.error).toBe("budget_exceeded");
    expect(spans.map((s) => s.error)).toEqual(["budget_exceeded", undefined, "budget_exceeded"]);
  });

  it("names an MCP request's span as the MCP conventions do, with the tool and the policy's rule", () => {
    const r = requestRecord({ entrypoint: "mcp", route: "tools/call", mcp: { method: "tools/call", jsonrpcId: 7, protocolVersion: "2026-07-28", server: "github", target: "search", decision: { allowed: true, rule: "r1", policyRevision: "p1", reason: "allowed by rule r1" }, toolError: true } });
    const [root] = requestSpans(r, []);
    expect(root!.name).toBe("tools/call search");
    expect(root!.attributes).toMatchObject({ "mcp.method.name": "tools/call", "gen_ai.tool.name": "search", "gen_ai.operation.name": "execute_tool", "jsonrpc.request.id": "7", "sluice.mcp.policy_rule": "r1", "error.type": "tool_error" });
    expect(root!.attributes["gen_ai.request.model"]).toBeUndefined();
  });

  it("names an A2A call's span by method and agent, with the agent's task and context as correlations", () => {
    const r = requestRecord({ entrypoint: "a2a/helpdesk", route: "SendMessage", a2a: { method: "SendMessage", jsonrpcId: "r1", generation: "1.0", agent: "helpdesk", skill: "triage", a2aTaskId: "t-9", contextId: "c-1", decision: { allowed: true, rule: "r2", policyRevision: "a1", reason: "allowed by rule r2" } } });
    const [root] = requestSpans(r, []);
    expect(root!.name).toBe("SendMessage helpdesk");
    expect(root!.attributes).toMatchObject({ "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helpdesk", "jsonrpc.request.id": "r1", "sluice.a2a.skill": "triage", "sluice.a2a.task_id": "t-9", "sluice.a2a.context_id": "c-1", "sluice.a2a.policy_rule": "r2" });
    expect(root!.attributes["gen_ai.request.model"]).toBeUndefined();
  });

  it("encodes OTLP JSON: hex ids, nanosecond strings, span kinds, status, the pinned schema URL", () => {
    const spans = requestSpans(requestRecord({}, client), [attemptRecord()]);
    const body = traceExport(spans, { serviceName: "sluice", serviceVersion: "0.1.0" }) as any;
    const rs = body.resourceSpans[0];
    expect(rs.schemaUrl).toBe(SEMCONV_SCHEMA_URL);
    expect(rs.resource.attributes).toContainEqual({ key: "service.name", value: { stringValue: "sluice" } });
    const root = rs.scopeSpans[0].spans[0];
    expect(root).toMatchObject({ traceId: client.traceId, parentSpanId: client.spanId, kind: 2, startTimeUnixNano: "1000000000", endTimeUnixNano: "1900000000", status: { code: 0 } });
    expect(root.attributes).toContainEqual({ key: "sluice.attempts", value: { intValue: "1" } });
    expect(nanos(1_796_000_000_123)).toBe("1796000000123000000");
  });

  it("encodes metrics as cumulative sums, gauges and histograms with their bounds", () => {
    const reg = new MetricRegistry();
    reg.counter({ name: "a.count", promName: "a_total", unit: "1", help: "h", labels: [{ key: "k", domain: (v) => v }] }).add(["x"], 3);
    reg.histogram({ name: "a.hist", promName: "a_seconds", unit: "s", help: "h", labels: [], bounds: [1] }).observe([], 2);
    reg.counter({ name: "a.cost", promName: "a_cost_total", unit: "{currency}", help: "h", labels: [], scale: 1_000_000 }).add([], 2_469);
    reg.gauge({ name: "a.observed", promName: "a_observed_total", unit: "1", help: "h", labels: [], monotonic: true, read: (set) => set([], 7) });
    reg.gauge({ name: "a.now", promName: "a_now", unit: "1", help: "h", labels: [], read: (set) => set([], 2) });
    const body = metricsExport(reg, { serviceName: "sluice", serviceVersion: "0.1.0" }, 1_000, 2_000) as any;
    const [sum, hist, cost, observed, gauge] = body.resourceMetrics[0].scopeMetrics[0].metrics;
    // Money is exported in its currency's unit; a total read from its owner is a cumulative sum, not a gauge.
    expect(cost).toMatchObject({ name: "a.cost", sum: { isMonotonic: true, dataPoints: [{ asDouble: 0.002469 }] } });
    expect(observed).toMatchObject({ name: "a.observed", sum: { aggregationTemporality: 2, isMonotonic: true, dataPoints: [{ asDouble: 7 }] } });
    expect(gauge).toMatchObject({ name: "a.now", gauge: { dataPoints: [{ asDouble: 2 }] } });
    expect(sum).toMatchObject({ name: "a.count", sum: { aggregationTemporality: 2, isMonotonic: true, dataPoints: [{ asDouble: 3, attributes: [{ key: "k", value: { stringValue: "x" } }] }] } });
    expect(hist.histogram.dataPoints[0]).toMatchObject({ count: "1", sum: 2, bucketCounts: ["0", "1"], explicitBounds: [1] });
  });
});
