import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { HealthMonitor } from "../../../durable-objects/health-monitor.ts";
import { a2aAgentStatuses, a2aHealthId, a2aProbeTarget, AgentHealth } from "../../../src/a2a/agent-health.ts";
import { a2aAgentSchema, type A2aAgentConfig } from "../../../src/config/a2a-agents-schema.ts";
import { loadConfig } from "../../../src/config/load-config.ts";
import { HealthCache } from "../../../src/traffic/health-cache.ts";
import type { HealthClient, HealthView } from "../../../src/traffic/health-client.ts";
import { initialHealth, type ProbeTarget } from "../../../src/traffic/health.ts";
import { issuesOf } from "../support/config-issues.ts";
import { bundled, FakeClock, textsWith } from "../support/fixtures.ts";
import { cardV1 } from "./cards.ts";

const CARD_URL = "https://agents.example.com/echo/.well-known/agent-card.json";

const agent = (over: Record<string, unknown> = {}): A2aAgentConfig => a2aAgentSchema.parse({ name: "echo", card: CARD_URL, ...over });

function gatewayWith(agents: unknown[]) {
  const g = bundled("gateway");
  g.a2a = { stateSecret: "A2A_STATE_SECRET", agents };
  return textsWith({ gateway: g });
}

describe("a2a.agents[].healthCheck", () => {
  it("is optional, with the MCP servers' defaults and bounds", () => {
    expect(agent().healthCheck).toBeUndefined();
    expect(agent({ healthCheck: {} }).healthCheck).toEqual({ intervalMs: 30_000, timeoutMs: 5_000 });
    const cfg = loadConfig(gatewayWith([{ name: "echo", card: CARD_URL, healthCheck: { intervalMs: 1000, timeoutMs: 100 } }]));
    expect(cfg.gateway.a2a.agents[0]!.healthCheck).toEqual({ intervalMs: 1000, timeoutMs: 100 });
    const issues = issuesOf(() => loadConfig(gatewayWith([{ name: "echo", card: CARD_URL, healthCheck: { intervalMs: 999, timeoutMs: 60_001, extra: 1 } }])));
    expect(issues.map((i) => i.path)).toEqual(expect.arrayContaining(["a2a.agents[0].healthCheck.intervalMs", "a2a.agents[0].healthCheck.timeoutMs"]));
  });

  it("is refused beside an inline card: there is no URL to probe, and a probe never sends a message", () => {
    const issues = issuesOf(() => loadConfig(gatewayWith([{ name: "echo", card: cardV1(), healthCheck: {} }])));
    expect(issues).toEqual([expect.objectContaining({ path: "a2a.agents[0].healthCheck", message: expect.stringMatching(/inline card is not probed/) })]);
  });
});

describe("a2aProbeTarget", () => {
  it("is a GET of the card URL, in the agent's own HealthMonitor namespace", () => {
    expect(a2aHealthId("echo")).toBe("a2a:echo");
    expect(a2aProbeTarget(agent())).toBeUndefined();
    expect(a2aProbeTarget(agent({ healthCheck: { intervalMs: 2000, timeoutMs: 300 } }))).toEqual({
      url: CARD_URL,
      method: "GET",
      headers: { accept: "application/json", "a2a-version": "1.0" },
      timeoutMs: 300,
      intervalMs: 2000,
      jitterRatio: 0.2,
    });
  });

  it("sends the agent's credential only where its card fetch does (onCardFetch)", () => {
    const credential = { secret: "ECHO_TOKEN", scheme: "bearer" };
    expect(a2aProbeTarget(agent({ credential, healthCheck: {} }))!.credential).toBeUndefined();
    expect(a2aProbeTarget(agent({ credential: { ...credential, onCardFetch: true }, healthCheck: {} }))!.credential).toEqual({ authorizationSecret: "ECHO_TOKEN", scheme: "bearer" });
  });
});

describe("the agent's HealthMonitor", () => {
  const DAY_MS = 86_400_000;
  /** On the allowlisted simulator address of the test config, probed by hand (a day's interval keeps the real alarm away). */
  const probed = (name: string, over: Record<string, unknown> = {}): ProbeTarget => ({
    ...a2aProbeTarget(agent({ name, card: "http://127.0.0.1:9901/.well-known/agent-card.json", healthCheck: { timeoutMs: 1000 }, ...over }))!,
    intervalMs: DAY_MS,
  });

  it("probes with a GET of the card, no message and no credential, and turns unhealthy after three failures", async () => {
    const id = a2aHealthId("probe-me");
    const stub = env.HEALTH_MONITOR.getByName(id);
    const seen: Array<{ url: string; method: string | undefined; headers: Record<string, string>; body: unknown }> = [];
    let status = 200;
    await stub.watch(probed("probe-me"));
    await runInDurableObject(stub, async (instance: HealthMonitor) => {
      instance.probeFetch = async (url, init) => (seen.push({ url, method: init.method, headers: init.headers as Record<string, string>, body: init.body }), new Response("{}", { status }));
    });
    await runDurableObjectAlarm(stub);
    expect(await stub.state()).toMatchObject({ status: "healthy", lastReason: "ok" });
    status = 503;
    for (let i = 0; i < 3; i++) await runDurableObjectAlarm(stub);
    expect(await stub.state()).toMatchObject({ status: "unhealthy", consecutiveFailures: 3, lastReason: "http_503" });
    expect(seen).toHaveLength(4);
    for (const s of seen) {
      expect(s).toMatchObject({ url: "http://127.0.0.1:9901/.well-known/agent-card.json", method: "GET", body: undefined });
      expect(s.headers).toEqual({ accept: "application/json", "a2a-version": "1.0" });
    }
  });

  it("sends the agent's named credential when the card needs it, read from the object's env", async () => {
    const id = a2aHealthId("probe-cred");
    const stub = env.HEALTH_MONITOR.getByName(id);
    const seen: Array<Record<string, string>> = [];
    await stub.watch(probed("probe-cred", { credential: { secret: "SIMULATOR_API_KEY", scheme: "x-api-key", onCardFetch: true } }));
    await runInDurableObject(stub, async (instance: HealthMonitor) => {
      instance.probeFetch = async (_url, init) => (seen.push(init.headers as Record<string, string>), new Response("{}"));
    });
    await runDurableObjectAlarm(stub);
    expect(seen).toEqual([{ accept: "application/json", "a2a-version": "1.0", "x-api-key": env.SIMULATOR_API_KEY }]);
  });
});

/** A HealthClient over fixed views, recording what is watched. */
class FakeMonitors implements HealthClient {
  readonly views = new Map<string, HealthView>();
  readonly watched: Array<[string, ProbeTarget]> = [];
  async watch(id: string, target: ProbeTarget): Promise<HealthView> {
    this.watched.push([id, target]);
    return this.state(id);
  }
  async state(id: string): Promise<HealthView> {
    return this.views.get(id) ?? { ...initialHealth(), watching: false, targetKey: undefined, nextProbeAt: undefined };
  }
  async unwatch(): Promise<void> {}
  set(id: string, status: HealthView["status"], over: Partial<HealthView> = {}): void {
    this.views.set(id, { ...initialHealth(), status, watching: true, targetKey: "k", nextProbeAt: undefined, ...over });
  }
}

describe("AgentHealth", () => {
  const agents = [agent({ name: "probed", healthCheck: {} }), agent({ name: "plain" })];

  it("starts an agent's probes with its first use and reads unhealthy only from its monitor (fail open)", async () => {
    const clock = new FakeClock();
    const monitors = new FakeMonitors();
    const health = new AgentHealth(new HealthCache(monitors, clock, { ttlMs: 1000 }), agents);
    const pending: Array<Promise<unknown>> = [];
    const gate = health.forRequest((p) => pending.push(p));
    expect(health.probed("probed")).toBe(true);
    expect(health.probed("plain")).toBe(false);

    expect(gate.isHealthy("probed")).toBe(true); // unknown before any verdict
    await Promise.all(pending.splice(0));
    expect(monitors.watched.map(([id]) => id)).toEqual(["a2a:probed"]);
    expect(monitors.watched[0]![1]).toMatchObject({ url: CARD_URL, method: "GET" });

    monitors.set("a2a:probed", "unhealthy");
    clock.t += 1001;
    gate.isHealthy("probed"); // stale: refreshed in the background
    await Promise.all(pending.splice(0));
    expect(gate.isHealthy("probed")).toBe(false);
    expect(gate.status("probed")).toBe("unhealthy");
    expect(monitors.watched).toHaveLength(1); // once per isolate per target

    monitors.set("a2a:plain", "unhealthy");
    expect(gate.isHealthy("plain")).toBe(true); // not probed: never asked
    expect(gate.isHealthy("nobody")).toBe(true);
    expect(monitors.watched).toHaveLength(1);
  });

  it("is unknown for every agent when health is disabled", () => {
    const health = new AgentHealth(undefined, agents);
    expect(health.probed("probed")).toBe(false);
    expect(health.forRequest(() => {}).status("probed")).toBe("unknown");
  });
});

describe("a2aAgentStatuses", () => {
  it("reads each agent's monitor and card registry, failing open when one cannot be read", async () => {
    const monitors = new FakeMonitors();
    monitors.set("a2a:down", "unhealthy", { lastReason: "network_error: refused", lastProbeAt: 1_800_000_000_000, consecutiveFailures: 4 });
    const list = [agent({ name: "down", healthCheck: {} }), agent({ name: "fresh", healthCheck: {} }), agent({ name: "plain" }), a2aAgentSchema.parse({ name: "inline", card: cardV1() })];
    const statuses = await a2aAgentStatuses(list, true, monitors, async (name) => {
      if (name === "plain") throw new Error("unreachable");
      return name === "down" ? { card: { fetchedAt: 1_800_000_000_000 }, lastFailure: { at: 1_800_000_001_000, reasons: ["not JSON"] } } : { card: undefined, lastFailure: undefined };
    });
    expect(statuses).toEqual([
      {
        name: "down",
        probed: true,
        status: "unhealthy",
        lastReason: "network_error: refused",
        lastProbeAt: new Date(1_800_000_000_000).toISOString(),
        consecutiveFailures: 4,
        card: { source: "fetched", fetchedAt: new Date(1_800_000_000_000).toISOString(), lastFailure: { at: new Date(1_800_000_001_000).toISOString(), reasons: ["not JSON"] } },
      },
      { name: "fresh", probed: true, status: "unknown", lastReason: null, lastProbeAt: null, consecutiveFailures: 0, card: { source: "fetched", fetchedAt: null, lastFailure: null } },
      { name: "plain", probed: false, status: "unknown", lastReason: null, lastProbeAt: null, consecutiveFailures: 0, card: { source: "fetched", fetchedAt: null, lastFailure: null, error: "registry unreachable" } },
      { name: "inline", probed: false, status: "unknown", lastReason: null, lastProbeAt: null, consecutiveFailures: 0, card: { source: "inline" } },
    ]);
    expect((await a2aAgentStatuses(list.slice(0, 1), false, monitors, async () => ({ card: undefined, lastFailure: undefined })))[0]).toMatchObject({ probed: false, status: "unknown" });
  });
});
