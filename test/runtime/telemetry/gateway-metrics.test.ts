import { describe, expect, it } from "vitest";
import { GatewayMetrics, type MetricDomains } from "../../../src/telemetry/gateway-metrics.ts";
import { Counter, Histogram, prometheusText } from "../../../src/telemetry/metric-registry.ts";
import { attemptRecord, requestRecord } from "./fixtures.ts";

const domains: MetricDomains = {
  entrypoints: ["sluice-chat"],
  models: ["chat-small", "chat-large"],
  routes: ["default", "premium"],
  tenants: ["demo", "other-tenant"],
  tenantLabel: { enabled: false, maxTenants: 2 },
  maxSnapshotNames: 50,
};
const gauges = {
  inFlight: () => 2,
  draining: () => false,
  admission: () => ({ inFlight: 1, queued: 0, admitted: 9, waited: 1, refused: { queue_full: 1, deadline: 0, cancelled: 0 } }),
  snapshotRevision: () => 3,
  ledger: () => ({ leases: 1, attemptsOpen: 0, settlementsQueued: 4 }),
  breakers: () => [["sim-local", "open"]] as const,
  health: () => [["sim-local", "healthy"]] as const,
  credentialMints: () => ({ minted: 3, failed: 1 }),
};

const instrument = (m: GatewayMetrics, name: string) => m.registry.read().find((i) => i.name === name)!;
const values = (m: GatewayMetrics) => {
  const out = new Set<string>();
  for (const i of m.registry.read()) for (const s of (i as Counter).all()) for (const v of s.values) out.add(v);
  return out;
};

describe("gateway metrics", () => {
  it("counts a request, its attempts, tokens by kind, time to first token from the first content", () => {
    const m = new GatewayMetrics(domains, gauges);
    m.finished(requestRecord(), [attemptRecord()]);
    const requests = instrument(m, "sluice.requests") as Counter;
    expect([...requests.all()].map((s) => [s.values, s.state])).toEqual([[["sluice-chat", "openai-chat", "success", "", "default", "stable"], 1]]);
    const ttft = instrument(m, "gen_ai.server.time_to_first_token") as Histogram;
    const [series] = [...ttft.all()];
    expect(series!.values).toEqual(["chat", "sluice", "sluice-chat", "chat-small", "true"]);
    expect(series!.state.sum).toBeCloseTo(0.25);
    const tpot = [...(instrument(m, "gen_ai.server.time_per_output_token") as Histogram).all()][0]!;
    expect(tpot.state.sum).toBeCloseTo(0.64 / 32);
    const tokens = instrument(m, "sluice.tokens") as Counter;
    expect(Object.fromEntries([...tokens.all()].map((s) => [s.values[1], s.state]))).toEqual({ input: 12, output: 33, cached_input: 4, cache_write_input: 0, reasoning: 5 });
    const text = prometheusText(m.registry);
    expect(text).toContain('sluice_attempts_total{sluice_backend="sim-local",sluice_pool="sim-small",sluice_model="chat-small",sluice_attempt_outcome="success",sluice_evidence="success"} 1');
    expect(text).toContain("sluice_requests_in_flight 2");
    // Totals the admission controller keeps are counters, read at each scrape.
    expect(text).toContain("# TYPE sluice_admission_decisions_total counter");
    expect(text).toContain('sluice_admission_decisions_total{sluice_decision="refused_queue_full"} 1');
    expect(text).toContain('sluice_admission_decisions_total{sluice_decision="admitted"} 9');
    // With the tenant label off, no series carries a tenant at all.
    expect(text).not.toContain("sluice_tenant");
    expect(text).toContain("sluice_snapshot_revision 3");
    expect(text).toContain('sluice_breaker_state{sluice_backend="sim-local",sluice_state="open"} 1');
    expect(text).toContain('sluice_breaker_state{sluice_backend="sim-local",sluice_state="closed"} 0');
    expect(text).toContain('sluice_backend_health{sluice_backend="sim-local",sluice_health="healthy"} 1');
    expect(text).toContain("# TYPE sluice_credential_mints_total counter");
    expect(text).toContain('sluice_credential_mints_total{sluice_result="minted"} 3');
    expect(text).toContain('sluice_credential_mints_total{sluice_result="failed"} 1');
  });

  it("tells retries from fallbacks, and counts an attempt that may have run without usage as unknown usage", () => {
    const m = new GatewayMetrics(domains, gauges);
    m.finished(requestRecord({ outcome: "error", errorCode: "upstream_timeout" }), [
      attemptRecord({ id: "a1", outcome: "timeout", usage: undefined, evidence: { class: "unknown", reason: "timeout" }, errorCode: "upstream_timeout" }),
      attemptRecord({ id: "a2", outcome: "upstream_status", status: 429, usage: undefined, evidence: { class: "known_zero", reason: "rejected_before_processing" } }),
      attemptRecord({ id: "a3", logicalModel: "chat-large", outcome: "not_sent" }),
      attemptRecord({ id: "a4", logicalModel: "chat-large", outcome: "stream_cut", usage: undefined, evidence: { class: "unknown", reason: "stream_cut" } }),
    ]);
    const sum = (name: string) => [...(instrument(m, name) as Counter).all()].reduce((n, s) => n + s.state, 0);
    expect(sum("sluice.retries")).toBe(1);
    expect(sum("sluice.fallbacks")).toBe(1);
    expect(sum("sluice.usage.unknown")).toBe(2);
    expect(sum("sluice.attempts")).toBe(3);
    expect([...(instrument(m, "gen_ai.server.time_to_first_token") as Histogram).all()]).toEqual([]);
    // A token count's attempt owes no usage: it is an attempt, never an unknown usage.
    m.finished(requestRecord(), [attemptRecord({ id: "a5", usage: undefined, firstContentAt: undefined, unbilled: true, evidence: { class: "success", reason: "ok" } })]);
    expect(sum("sluice.usage.unknown")).toBe(2);
    expect(sum("sluice.attempts")).toBe(4);
  });

  it("label values never grow with what callers choose: models, ids, tenants, headers", () => {
    const m = new GatewayMetrics(domains, gauges);
    m.finished(requestRecord(), [attemptRecord()]);
    m.finished(requestRecord({ entrypoint: undefined, outcome: "error", errorCode: "model_not_found" }), []);
    const before = values(m);
    for (let i = 0; i < 200; i++) {
      const caller = `caller-${i}-${crypto.randomUUID()}`;
      // Whatever a caller sends ends up, at most, in these fields of the records.
      m.finished(requestRecord({ requestId: caller, entrypoint: undefined, route: caller, tenant: caller, key: caller, outcome: "error", errorCode: "model_not_found" }), []);
      m.finished(requestRecord({ requestId: caller, tenant: caller, key: caller, callId: caller, errorCode: caller as never }), [attemptRecord({ id: caller, requestId: caller })]);
    }
    expect(values(m)).toEqual(before);
  });

  it("a revision published at runtime adds its entrypoint, model and route names; what was counted before keeps its labels", () => {
    const m = new GatewayMetrics(domains, gauges);
    const later = { entrypoint: "added-later", route: "new-rule" };
    m.finished(requestRecord(later), [attemptRecord({ logicalModel: "new-model" })]);
    m.admitPublication({ entrypoints: ["sluice-chat", "added-later"], models: ["new-model"], routes: ["new-rule"], tenants: [] });
    m.finished(requestRecord(later), [attemptRecord({ logicalModel: "new-model" })]);
    const requests = instrument(m, "sluice.requests") as Counter;
    expect([...requests.all()].map((s) => [s.values[0], s.values[4], s.state])).toEqual([
      ["other", "other", 1],
      ["added-later", "new-rule", 1],
    ]);
    const attempts = instrument(m, "sluice.attempts") as Counter;
    expect([...attempts.all()].map((s) => s.values[2])).toEqual(["other", "new-model"]);
  });

  it("exports the ledger's cost in units of its currency, summed exactly from micro-units", () => {
    const m = new GatewayMetrics(domains, gauges);
    m.settlement({ result: "settled", model: "chat-small", costMicros: 2_469, currency: "USD", overrun: false });
    m.settlement({ result: "settled", model: "chat-small", costMicros: 1, currency: "USD", overrun: false });
    m.settlement({ result: "settled", model: "chat-large", costMicros: 1_500_000, currency: "EUR", overrun: true });
    const text = prometheusText(m.registry);
    expect(text).toContain("# TYPE sluice_cost_total counter");
    expect(text).toContain('sluice_cost_total{sluice_currency="USD",sluice_model="chat-small"} 0.00247');
    expect(text).toContain('sluice_cost_total{sluice_currency="EUR",sluice_model="chat-large"} 1.5');
    expect(text).toContain('sluice_ledger_overruns_total{sluice_model="chat-large"} 1');
    expect(text).not.toContain("micros");
  });

  it("tenant as a label only when opted in, capped, the rest folded", () => {
    const m = new GatewayMetrics({ ...domains, tenantLabel: { enabled: true, maxTenants: 1 } }, gauges);
    for (const tenant of ["demo", "other-tenant", "demo", "not-configured"]) m.finished(requestRecord({ tenant }), []);
    const requests = instrument(m, "sluice.requests") as Counter;
    expect(Object.fromEntries([...requests.all()].map((s) => [s.values[5], s.state]))).toEqual({ demo: 2, other: 2 });
  });

  it("counts a Looper run's steps by role and a cascade's escalations", () => {
    const m = new GatewayMetrics(domains, gauges);
    const looper = {
      algorithm: "cascade" as const,
      steps: 3,
      accepted: "chat-large",
      calls: [
        { requestId: "req_1", model: "chat-small", role: "candidate" as const, score: 0.2, accepted: false },
        { requestId: "req_2", model: "chat-large", role: "verifier" as const, score: 0.2, accepted: false },
        { requestId: "req_3", model: "chat-large", role: "candidate" as const, accepted: true },
      ],
    };
    m.finished(requestRecord({ looper }), []);
    const text = prometheusText(m.registry);
    expect(text).toContain('sluice_looper_steps_total{sluice_entrypoint="sluice-chat",sluice_looper_algorithm="cascade",sluice_looper_role="candidate"} 2');
    expect(text).toContain('sluice_looper_steps_total{sluice_entrypoint="sluice-chat",sluice_looper_algorithm="cascade",sluice_looper_role="verifier"} 1');
    expect(text).toContain('sluice_looper_escalations_total{sluice_entrypoint="sluice-chat",sluice_looper_algorithm="cascade"} 1');
  });

  it("tells the canary's requests from the stable ones by a bounded label, and maps both to revisions in a gauge", () => {
    let canary: string | undefined = "demo-2@7";
    const m = new GatewayMetrics(domains, { ...gauges, canaryRevision: () => canary, publicationRevisions: () => ({ stable: 6, canary: canary ? 7 : undefined }) });
    m.finished(requestRecord({ publicationRevision: "demo-2@7" }), [attemptRecord()]);
    m.finished(requestRecord({ publicationRevision: "demo-1@6" }), [attemptRecord()]);
    m.finished(requestRecord({ publicationRevision: "demo-1@6" }), [attemptRecord()]);
    const requests = instrument(m, "sluice.requests") as Counter;
    expect(Object.fromEntries([...requests.all()].map((s) => [s.values.at(-1), s.state]))).toEqual({ canary: 1, stable: 2 });
    const tokens = instrument(m, "sluice.tokens") as Counter;
    expect([...tokens.all()].filter((s) => s.values[1] === "output").map((s) => [s.values[2], s.state])).toEqual([["canary", 33], ["stable", 66]]);
    const duration = instrument(m, "gen_ai.server.request.duration") as Histogram;
    expect(new Set([...duration.all()].map((s) => s.values.at(-1)))).toEqual(new Set(["canary", "stable"]));
    let text = prometheusText(m.registry);
    expect(text).toContain('sluice_publication_revision{sluice_publication="stable"} 6');
    expect(text).toContain('sluice_publication_revision{sluice_publication="canary"} 7');
    // No revision number ever becomes a label value.
    expect([...values(m)].some((v) => v.includes("@"))).toBe(false);
    canary = undefined;
    m.finished(requestRecord({ publicationRevision: "demo-2@7" }), [attemptRecord()]);
    expect(Object.fromEntries([...requests.all()].map((s) => [s.values.at(-1), s.state]))).toEqual({ canary: 1, stable: 3 });
    text = prometheusText(m.registry);
    expect(text).toContain('sluice_publication_revision{sluice_publication="canary"} 0');
  });

  it("observes the gateway's own time per caller request: the duration less the upstream wait, a sub-request's inside its parent's", () => {
    const m = new GatewayMetrics(domains, gauges);
    m.finished(requestRecord({ receivedAt: 1_000, endedAt: 1_900, upstreamMs: 880 }), [attemptRecord()]);
    m.finished(requestRecord({ requestId: "req_sub", parentRequestId: "req_1", receivedAt: 1_100, endedAt: 1_500, upstreamMs: 390 }), [attemptRecord({ id: "att_s" })]);
    // A refusal at authenticate: no upstream, all of it the gateway's.
    m.finished(requestRecord({ requestId: "req_2", entrypoint: undefined, stream: false, outcome: "error", errorCode: "invalid_api_key", receivedAt: 2_000, endedAt: 2_003, attempts: [] }), []);
    m.finished(requestRecord({ requestId: "req_3", entrypoint: undefined, stream: false, receivedAt: 3_000, endedAt: 3_050, upstreamMs: 45, mcp: { method: "tools/call", jsonrpcId: 1, protocolVersion: "2026-07-28" } }), []);
    const overhead = instrument(m, "sluice.gateway.overhead") as Histogram;
    const series = Object.fromEntries([...overhead.all()].map((s) => [s.values.join("|"), s.state]));
    expect(Object.keys(series).sort()).toEqual(["mcp|other|false|success|stable", "model|other|false|error|stable", "model|sluice-chat|true|success|stable"]);
    expect(series["model|sluice-chat|true|success|stable"]!.count).toBe(1);
    expect(series["model|sluice-chat|true|success|stable"]!.sum).toBeCloseTo(0.02);
    expect(series["model|other|false|error|stable"]!.sum).toBeCloseTo(0.003);
    expect(series["mcp|other|false|success|stable"]!.sum).toBeCloseTo(0.005);
    expect(prometheusText(m.registry)).toContain('sluice_gateway_overhead_seconds_count{sluice_kind="model",sluice_entrypoint="sluice-chat",sluice_stream="true",sluice_outcome="success",sluice_publication="stable"} 1');
  });
});
