import { Hono } from "hono";
import { GatewayError } from "../errors/gateway-error.ts";
import { echo } from "../errors/echo.ts";
import { prometheusText } from "../telemetry/metric-registry.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { errorResponse } from "./error-response.ts";

/** The Prometheus text exposition of this isolate's metrics. */
export function metricsResponse(rt: GatewayRuntime): Response {
  return new Response(prometheusText(rt.telemetry.metrics.registry), {
    headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8", "cache-control": "no-store" },
  });
}

/**
 * The metrics listener: `GET /metrics` only, without a token, for scrapers that cannot send one.
 * The config lets it bind loopback addresses only; the admin listener serves the same text behind
 * the bearer token at `/admin/metrics`.
 */
export function createMetricsApp(runtimeOf: (env: Env) => Promise<GatewayRuntime>): Hono<{ Bindings: Env }> {
  const app = new Hono<{ Bindings: Env }>();
  app.get("/metrics", async (c) => metricsResponse(await runtimeOf(c.env)));
  app.notFound((c) => errorResponse(new GatewayError("not_found", `Unknown metrics URL: ${echo(c.req.method)} ${echo(new URL(c.req.url).pathname)}.`), "openai-chat"));
  return app;
}
