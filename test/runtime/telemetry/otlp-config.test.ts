import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/load-config.ts";
import { ConfigValidationError } from "../../../src/config/parse-file.ts";
import { ALLOWED_TARGETS, FORBIDDEN_TARGETS } from "../support/egress-targets.ts";
import { bundled, textsWith } from "../support/fixtures.ts";

const withEndpoint = (endpoint: string, extra: Record<string, unknown> = {}) => {
  const g = bundled("gateway");
  g.observability.otlp = { endpoint, ...extra };
  return textsWith({ gateway: g });
};

describe("the OTLP endpoint at config load", () => {
  it.each(FORBIDDEN_TARGETS)("is refused at $url ($what), naming the key", ({ url }) => {
    let issues: readonly unknown[] = [];
    try {
      loadConfig(withEndpoint(url));
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigValidationError);
      issues = (err as ConfigValidationError).issues;
    }
    expect(issues).toContainEqual(expect.objectContaining({ file: "gateway.yaml", path: "observability.otlp.endpoint" }));
  });

  it.each(ALLOWED_TARGETS.filter((t) => t.url.startsWith("https:")))("is accepted at $url ($what), without a trailing slash", ({ url }) => {
    expect(loadConfig(withEndpoint(`${url}/`)).gateway.observability.otlp?.endpoint).toBe(url.replace(/\/+$/, ""));
  });

  it("fills the export defaults", () => {
    expect(loadConfig(withEndpoint("https://otel.example.com")).gateway.observability.otlp).toEqual({
      endpoint: "https://otel.example.com",
      traces: true,
      metrics: true,
      maxQueueSpans: 4096,
      batchSpans: 512,
      flushIntervalMs: 5000,
      metricsIntervalMs: 60000,
      timeoutMs: 10000,
    });
  });
});
