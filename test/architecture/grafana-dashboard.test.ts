import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { exportedSamples } from "./support/exported-metrics.ts";
import { promqlNames } from "./support/promql-names.ts";

const ROOT = resolve(import.meta.dirname, "..", "..");
const DASHBOARD = "container/grafana/dashboards/sluice.json";

interface Query {
  readonly where: string;
  readonly expr: string;
}

/** Every PromQL expression of the dashboard: panel targets (rows' nested panels too) and query variables. */
function queries(dashboard: any): Query[] {
  const out: Query[] = [];
  const walk = (panels: any[]) => {
    for (const p of panels ?? []) {
      for (const t of p.targets ?? []) out.push({ where: `panel "${p.title}" ${t.refId}`, expr: t.expr });
      walk(p.panels);
    }
  };
  walk(dashboard.panels);
  for (const v of dashboard.templating?.list ?? []) {
    if (v.type !== "query") continue;
    const q = typeof v.query === "string" ? v.query : v.query.query;
    // label_values(metric, label) is Grafana's, not PromQL: the metric and its label must exist.
    const lv = /^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$/.exec(q);
    if (!lv) throw new Error(`variable ${v.name}: only label_values(metric, label) is checked, got ${q}`);
    out.push({ where: `variable ${v.name}`, expr: `sum by (${lv[2]}) (${lv[1]})` });
  }
  return out;
}

/** What a query names that the registry does not export: metrics, labels of a selector, grouping labels. */
function problems(q: Query, exported: ReadonlyMap<string, ReadonlySet<string>>): string[] {
  const names = promqlNames(q.expr);
  const out = names.unknown.map((f) => `${q.where}: unknown function ${f}`);
  const labelsHere = new Set<string>();
  for (const s of names.selectors) {
    if (s.metric === undefined) {
      out.push(`${q.where}: a selector without a metric name`);
      continue;
    }
    const labels = exported.get(s.metric);
    if (!labels) {
      out.push(`${q.where}: ${s.metric} is not exported`);
      continue;
    }
    for (const l of labels) labelsHere.add(l);
    for (const l of s.labels) if (!labels.has(l)) out.push(`${q.where}: ${s.metric} has no label ${l}`);
  }
  for (const l of names.grouping) if (!labelsHere.has(l)) out.push(`${q.where}: grouping by ${l}, a label of none of its metrics`);
  return out;
}

const dashboard = JSON.parse(readFileSync(resolve(ROOT, DASHBOARD), "utf8"));
// The tenant label is the one that depends on configuration; with it on, the registry has every label.
const exported = exportedSamples(true);

describe(`${DASHBOARD} queries only what the gateway exports`, () => {
  it("has queries for every part the issue lists", () => {
    const all = queries(dashboard).map((q) => q.expr).join("\n");
    for (const metric of [
      "sluice_requests_total",
      "gen_ai_server_request_duration_seconds_bucket",
      "gen_ai_server_time_to_first_token_seconds_bucket",
      "gen_ai_server_time_per_output_token_seconds_bucket",
      "sluice_tokens_total",
      "sluice_cost_total",
      "sluice_breaker_state",
      "sluice_backend_health",
      "sluice_admission_decisions_total",
      "sluice_ledger_settlements_total",
      "mcp_server_operation_duration_seconds_count",
    ])
      expect(all, metric).toContain(metric);
  });

  it("every metric and label a query names is exported", () => {
    const qs = queries(dashboard);
    expect(qs.length).toBeGreaterThan(20);
    expect(qs.flatMap((q) => problems(q, exported))).toEqual([]);
  });

  it("the check itself catches a made-up metric, a made-up label, a grouping label and an unknown function", () => {
    const check = (expr: string) => problems({ where: "probe", expr }, exported);
    expect(check('sum by (sluice_entrypoint) (rate(sluice_requests_total{sluice_outcome="error"}[$__rate_interval]))')).toEqual([]);
    expect(check("rate(sluice_cost_micros_total[5m])")).toEqual(["probe: sluice_cost_micros_total is not exported"]);
    expect(check('sluice_admission_decisions_total{sluice_tenant="a"}')).toEqual(["probe: sluice_admission_decisions_total has no label sluice_tenant"]);
    expect(check("sum by (sluice_backend) (sluice_requests_total)")).toEqual(["probe: grouping by sluice_backend, a label of none of its metrics"]);
    expect(check("made_up(sluice_requests_total)")).toEqual(["probe: unknown function made_up"]);
  });

  it("every panel reads the dashboard's data source variable, and the provisioned data source is Prometheus", () => {
    const walk = (panels: any[]): any[] => panels.flatMap((p) => [p, ...walk(p.panels ?? [])]);
    for (const p of walk(dashboard.panels).filter((p) => p.type !== "row")) expect(p.datasource, p.title).toEqual({ type: "prometheus", uid: "${datasource}" });
    const source = readFileSync(resolve(ROOT, "container/grafana/provisioning/datasources/prometheus.yaml"), "utf8");
    expect(source).toMatch(/type: prometheus/);
    expect(source).toMatch(/url: http:\/\/prometheus:9090/);
  });
});
