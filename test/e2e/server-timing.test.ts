import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { A2A_STATE_SECRET, cardsServed, startA2aV1Agent, type A2aTestAgent } from "./support/a2a-agents.ts";
import { startModernMcpTestServer, type ModernMcpTestServer } from "./support/mcp-modern-server.ts";
import { ADMIN_TOKEN, backendsFor, bundledConfig, DEMO_KEY, type Simulator } from "./support/stack.ts";

/** A `Server-Timing` value's entries, name → duration in ms; throws on anything not `name;dur=<number>`. */
function entries(value: string | null): Record<string, number> {
  if (value === null) throw new Error("no Server-Timing header");
  const out: Record<string, number> = {};
  for (const part of value.split(",")) {
    const m = /^\s*([a-z]+);dur=(\d+(?:\.\d{1,2})?)\s*$/.exec(part);
    if (!m) throw new Error(`not a Server-Timing entry: ${part}`);
    out[m[1]!] = Number(m[2]);
  }
  return out;
}

/** Sends a request and measures, on the client, the time until the response headers arrived. */
async function timedFetch(url: string, init: RequestInit): Promise<{ res: Response; clientMs: number }> {
  const started = performance.now();
  const res = await fetch(url, init);
  return { res, clientMs: performance.now() - started };
}

/** The gateway's clock reads whole milliseconds: each of its two readings may round a fraction up. */
const CLOCK_SLACK_MS = 1;

/**
 * `Server-Timing` on every public answer, and the overhead histogram: the gateway's own time and
 * the time it waited for upstreams, as a client sees them against its own measurement.
 */
describe("Server-Timing and the gateway's overhead", () => {
  let sim: Simulator;
  let mcp: ModernMcpTestServer;
  let agent: A2aTestAgent;
  let gateway: RunningGateway;

  beforeAll(async () => {
    [sim, mcp, agent] = await Promise.all([startSimulatorProcess({ apiKey: SIMULATOR_API_KEY }), startModernMcpTestServer(), startA2aV1Agent()]);
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.mcp = { servers: [{ name: "modern", url: mcp.url, era: "stateless" }] };
    g.a2a = { stateSecret: A2A_STATE_SECRET.name, agents: [{ name: "echo-v1", card: agent.cardUrl }] };
    const p = bundledConfig("publication");
    p.mcp = { policy: { revision: "mcp-1", rules: [{ id: "demo-tools", effect: "allow", principals: { tenants: ["demo"] }, servers: ["*"], names: ["*"] }] } };
    p.a2a = { policy: { revision: "a2a-1", rules: [{ id: "demo-agents", effect: "allow", principals: { tenants: ["demo"] }, agents: ["*"], skills: ["*"] }] } };
    gateway = await startGateway({
      adminToken: ADMIN_TOKEN,
      secrets: { [A2A_STATE_SECRET.name]: A2A_STATE_SECRET.value },
      config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) },
    });
    await cardsServed(gateway.publicUrl, DEMO_KEY, ["echo-v1"]);
  });

  afterAll(async () => {
    await gateway?.stop();
    await Promise.all([sim?.stop(), mcp?.stop(), agent?.close()]);
  });

  const chat = (content: string, stream: boolean, key = DEMO_KEY) =>
    timedFetch(`${gateway.publicUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "sluice-chat", stream, messages: [{ role: "user", content }] }),
    });

  it("splits a buffered chat into the gateway's time and the provider's, within what the client measured", async () => {
    const { res, clientMs } = await chat("hello [[sim latency-ms=150]]", false);
    expect(res.status).toBe(200);
    await res.json();
    const t = entries(res.headers.get("server-timing"));
    expect(Object.keys(t)).toEqual(["gw", "upstream", "ttfb"]);
    // The simulator held its answer 150 ms: the provider's wait, not the gateway's.
    expect(t.upstream).toBeGreaterThanOrEqual(150);
    expect(t.ttfb).toBeGreaterThanOrEqual(150);
    expect(t.ttfb).toBeLessThanOrEqual(t.upstream!);
    expect(t.gw! + t.upstream!).toBeLessThanOrEqual(clientMs + CLOCK_SLACK_MS);
  });

  it("gives a stream what is known as its headers go out: the provider's first byte among the wait", async () => {
    const { res, clientMs } = await chat("hello [[sim latency-ms=120]]", true);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const t = entries(res.headers.get("server-timing"));
    await res.text();
    expect(Object.keys(t)).toEqual(["gw", "upstream", "ttfb"]);
    expect(t.ttfb).toBeGreaterThanOrEqual(120);
    expect(t.upstream).toBeGreaterThanOrEqual(t.ttfb!);
    expect(t.gw! + t.upstream!).toBeLessThanOrEqual(clientMs + CLOCK_SLACK_MS);
  });

  it("times an MCP tools/call with the server's wait", async () => {
    const meta = { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} };
    const { res, clientMs } = await timedFetch(`${gateway.publicUrl}/mcp`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "modern.echo" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "modern.echo", arguments: { text: "timed" }, _meta: meta } }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ result: { content: [{ type: "text", text: "timed" }] } });
    const t = entries(res.headers.get("server-timing"));
    expect(Object.keys(t)).toEqual(["gw", "upstream"]);
    expect(t.gw! + t.upstream!).toBeLessThanOrEqual(clientMs + CLOCK_SLACK_MS);
  });

  it("times an A2A message with the agent's wait", async () => {
    const { res, clientMs } = await timedFetch(`${gateway.publicUrl}/a2a/echo-v1`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json", "a2a-version": "1.0" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 3, method: "SendMessage", params: { message: { messageId: "m-timed", role: "ROLE_USER", parts: [{ text: "timed" }], metadata: { skill: "summarize" } } } }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { result?: unknown }).result).toBeDefined();
    const t = entries(res.headers.get("server-timing"));
    expect(Object.keys(t)).toEqual(["gw", "upstream"]);
    expect(t.gw! + t.upstream!).toBeLessThanOrEqual(clientMs + CLOCK_SLACK_MS);
  });

  it("gives the gateway's own refusals its time alone", async () => {
    const refused = await chat("hello", false, "sk-not-a-key");
    expect(refused.res.status).toBe(401);
    await refused.res.text();
    const t = entries(refused.res.headers.get("server-timing"));
    expect(Object.keys(t)).toEqual(["gw"]);
    expect(t.gw).toBeLessThanOrEqual(refused.clientMs + CLOCK_SLACK_MS);
    // A refusal at the door, before any engine request (no such route).
    const unknown = await timedFetch(`${gateway.publicUrl}/v1/nothing-here`, { method: "POST", body: "{}" });
    expect(unknown.res.status).toBe(404);
    await unknown.res.text();
    expect(Object.keys(entries(unknown.res.headers.get("server-timing")))).toEqual(["gw"]);
  });

  it("observes the overhead histogram for model and MCP requests, less than their whole duration", async () => {
    const scrape = async () => await (await fetch(`${gateway.adminUrl}/admin/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
    const series = (text: string, sample: string, where: RegExp) =>
      text
        .split("\n")
        .filter((l) => l.startsWith(`${sample}{`) && where.test(l))
        .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
    // The stream's request is observed when its stream has ended, after the answer was read.
    await expect.poll(async () => series(await scrape(), "sluice_gateway_overhead_seconds_count", /sluice_kind="model",[^}]*sluice_outcome="success"/)).toBeGreaterThanOrEqual(2);
    const text = await scrape();
    expect(series(text, "sluice_gateway_overhead_seconds_count", /sluice_kind="mcp"/)).toBeGreaterThanOrEqual(1);
    expect(series(text, "sluice_gateway_overhead_seconds_count", /sluice_kind="a2a"/)).toBeGreaterThanOrEqual(1);
    expect(series(text, "sluice_gateway_overhead_seconds_count", /sluice_kind="model",[^}]*sluice_outcome="error"/)).toBeGreaterThanOrEqual(1);
    // The two chats waited at least 270 ms on the simulator; none of it is the gateway's.
    const overhead = series(text, "sluice_gateway_overhead_seconds_sum", /sluice_kind="model",[^}]*sluice_outcome="success"/);
    const duration = series(text, "gen_ai_server_request_duration_seconds_sum", /error_type=""/);
    expect(duration).toBeGreaterThanOrEqual(0.27);
    expect(overhead).toBeLessThanOrEqual(duration - 0.27);
  });
});
