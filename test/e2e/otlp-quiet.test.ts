/**
 * A gateway that receives no requests still pushes its metrics: the telemetry clock's alarm
 * (durable-objects/telemetry-clock.ts) ticks once per metrics interval under `sluice serve`.
 */
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, type RunningGateway } from "../../local-stack/stack.ts";
import { startOtlpReceiver, type OtlpReceiver } from "./support/otlp-receiver.ts";
import { ADMIN_TOKEN, bundledConfig } from "./support/stack.ts";

const INTERVAL_MS = 1_000;

async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 20_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("OTLP metrics without traffic", () => {
  let receiver: OtlpReceiver;
  let gateway: RunningGateway;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.observability.otlp = { endpoint: receiver.url, traces: false, metricsIntervalMs: INTERVAL_MS };
    gateway = await startGateway({ adminToken: ADMIN_TOKEN, config: { gateway: stringify(g) } });
  });

  afterAll(async () => {
    await gateway?.stop();
    await receiver?.stop();
  });

  it("pushes on its interval while no request arrives", async () => {
    // From here on nothing calls the gateway: the start's readiness probe was its last request.
    const metricPosts = () => receiver.posts.filter((p) => p.path === "/v1/metrics");
    const first = await until("a first metrics export", () => metricPosts()[0]);
    const pushedAt = [Date.now()];
    const seen = metricPosts().length;
    await until("two more exports, one interval apart", () => (metricPosts().length >= seen + 2 ? true : undefined), 10 * INTERVAL_MS);
    pushedAt.push(Date.now());
    // Cumulative from the same start, and the in-flight gauge says no request was being served.
    const last = metricPosts().at(-1)!;
    const names = (p: typeof first) => p.body.resourceMetrics[0].scopeMetrics[0].metrics.map((m: any) => m.name);
    expect(names(last)).toContain("sluice.requests.in_flight");
    expect(receiver.metricExports("sluice.requests.in_flight").at(-1)).toEqual([expect.objectContaining({ asDouble: 0 })]);
    // Not a burst: at least one interval passed for the two exports after the first.
    expect(pushedAt[1]! - pushedAt[0]!).toBeGreaterThanOrEqual(INTERVAL_MS);
  });
});
