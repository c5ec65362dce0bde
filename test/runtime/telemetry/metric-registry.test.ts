import { describe, expect, it } from "vitest";
import { firstDistinct, MetricRegistry, oneOf, OTHER, prometheusText } from "../../../src/telemetry/metric-registry.ts";

describe("metric registry", () => {
  it("records only label values of their domain; the rest fold into 'other'", () => {
    const reg = new MetricRegistry();
    const c = reg.counter({ name: "t.requests", promName: "t_requests_total", unit: "1", help: "h", labels: [{ key: "model", domain: oneOf(["a", "b"]) }] });
    c.add(["a"]);
    c.add(["a"], 2);
    c.add(["caller-chose-this"]);
    c.add(["and-this"]);
    expect([...c.all()].map((s) => [s.values[0], s.state])).toEqual([
      ["a", 3],
      [OTHER, 2],
    ]);
  });

  it("firstDistinct keeps the first N values and folds later ones, even after the cap", () => {
    const d = firstDistinct(2);
    expect(["x", "y", "z", "x", "w"].map(d)).toEqual(["x", "y", OTHER, "x", OTHER]);
    const within = firstDistinct(5, oneOf(["t1", "t2"]));
    expect(["t1", "evil", "t2"].map(within)).toEqual(["t1", OTHER, "t2"]);
  });

  it("caps the series of an instrument: past the cap every new label set is one folded series, and folds are counted", () => {
    const reg = new MetricRegistry(3);
    const c = reg.counter({ name: "t.c", promName: "t_c_total", unit: "1", help: "h", labels: [{ key: "k", domain: (v) => v }] });
    for (const v of ["1", "2", "3", "4", "5"]) c.add([v]);
    expect([...c.all()].map((s) => s.values[0])).toEqual(["1", "2", "3", OTHER]);
    expect(reg.folded).toBe(2);
  });

  it("renders the Prometheus text format: cumulative buckets, +Inf, sum, count, escaped label values", () => {
    const reg = new MetricRegistry();
    const h = reg.histogram({ name: "t.d", promName: "t_d_seconds", unit: "s", help: "duration", labels: [{ key: "gen_ai.request.model", domain: (v) => v }], bounds: [0.1, 1] });
    h.observe(['m"1'], 0.05);
    h.observe(['m"1'], 0.5);
    h.observe(['m"1'], 3);
    h.observe(['m"1'], -1);
    reg.gauge({ name: "t.g", promName: "t_g", unit: "1", help: "g", labels: [], read: (set) => set([], 7) });
    expect(prometheusText(reg)).toBe(
      [
        "# HELP t_d_seconds duration",
        "# TYPE t_d_seconds histogram",
        't_d_seconds_bucket{gen_ai_request_model="m\\"1",le="0.1"} 1',
        't_d_seconds_bucket{gen_ai_request_model="m\\"1",le="1"} 2',
        't_d_seconds_bucket{gen_ai_request_model="m\\"1",le="+Inf"} 3',
        't_d_seconds_sum{gen_ai_request_model="m\\"1"} 3.55',
        't_d_seconds_count{gen_ai_request_model="m\\"1"} 3',
        "# HELP t_g g",
        "# TYPE t_g gauge",
        "t_g 7",
        "",
      ].join("\n"),
    );
  });

  it("refuses to register one name twice", () => {
    const reg = new MetricRegistry();
    reg.counter({ name: "x", promName: "x_total", unit: "1", help: "h", labels: [] });
    expect(() => reg.counter({ name: "x", promName: "y_total", unit: "1", help: "h", labels: [] })).toThrow(/twice/);
  });
});
