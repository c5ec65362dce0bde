import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { startLoopbackServer, type LoopbackServer } from "./support/loopback-server.ts";
import { startModernMcpTestServer, type ModernMcpTestServer } from "./support/mcp-modern-server.ts";
import { startMcpTestServer, type McpTestServer } from "./support/mcp-test-server.ts";
import { ADMIN_TOKEN, backendsFor, bundledConfig, DEMO_KEY, type Simulator } from "./support/stack.ts";

interface ServerStatus {
  readonly name: string;
  readonly kind: string;
  readonly probed: boolean;
  readonly status: string;
  readonly lastReason: string | null;
}

/**
 * Active health of MCP servers end to end: a 2026-07-28 server (SDK 2.x) and a stateful one
 * (SDK 1.x) probed healthy, and a server that answers every request 503 found unhealthy, then
 * left out of the merged list at once; what each server received shows the probes never call a tool.
 */
describe("MCP server health", () => {
  let sim: Simulator;
  let modern: ModernMcpTestServer;
  let legacy: McpTestServer;
  let down: LoopbackServer;
  const downSaw: string[] = [];
  let gateway: RunningGateway;

  beforeAll(async () => {
    [sim, modern, legacy] = await Promise.all([startSimulatorProcess({ apiKey: SIMULATOR_API_KEY }), startModernMcpTestServer(), startMcpTestServer()]);
    down = await startLoopbackServer(async (_req, body, res) => {
      downSaw.push(String((JSON.parse(body.toString("utf8") || "{}") as { method?: string }).method));
      res.writeHead(503, { "content-type": "text/plain" }).end("down for maintenance");
    });
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.health = { cacheTtlMs: 100 };
    const healthCheck = { intervalMs: 1000, timeoutMs: 500 };
    g.mcp = {
      servers: [
        { name: "modern", url: modern.url, era: "stateless", healthCheck },
        { name: "legacy", url: legacy.url, era: "stateful", healthCheck },
        { name: "down", url: `${down.origin}/mcp`, era: "stateless", healthCheck },
        { name: "unprobed", url: modern.url, era: "stateless" },
      ],
    };
    const p = bundledConfig("publication");
    p.mcp = { policy: { revision: "health-1", rules: [{ id: "all", effect: "allow", principals: { tenants: ["demo"] }, servers: ["*"], names: ["*"] }] } };
    gateway = await startGateway({ adminToken: ADMIN_TOKEN, config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) } });
  });

  afterAll(async () => {
    await gateway?.stop();
    await Promise.all([modern?.stop(), legacy?.stop(), down?.close(), sim?.stop()]);
  });

  const statuses = async (): Promise<ServerStatus[]> => {
    const res = await fetch(`${gateway.adminUrl}/admin/status`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    return ((await res.json()) as { mcpServers: ServerStatus[] }).mcpServers;
  };
  const until = async (pred: (s: ServerStatus[]) => boolean): Promise<ServerStatus[]> => {
    const end = Date.now() + 20_000;
    for (;;) {
      const s = await statuses();
      if (pred(s)) return s;
      if (Date.now() > end) throw new Error(`status never reached: ${JSON.stringify(s)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  const list = async () => {
    const client = new Client({ name: "sluice-e2e", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${gateway.publicUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${DEMO_KEY}` } } }));
    const result = await client.listTools();
    await client.close();
    return result;
  };

  it("reports servers as not probed before their first use, and unprobed ones always", async () => {
    const s = await statuses();
    expect(s.map((m) => [m.name, m.kind, m.probed, m.status])).toEqual([
      ["modern", "stateless", true, "unknown"],
      ["legacy", "stateful", true, "unknown"],
      ["down", "stateless", true, "unknown"],
      ["unprobed", "stateless", false, "unknown"],
    ]);
  });

  it("probes with discovery or initialize once used, and lists a server found down as partial without asking it", async () => {
    const first = await list();
    expect(first._meta?.["sluice/partial"]).toEqual([{ server: "down", reason: expect.stringMatching(/^upstream_/) }]);
    const s = await until((s) => s.find((m) => m.name === "down")?.status === "unhealthy" && s.filter((m) => m.status === "healthy").length === 2);
    expect(s.find((m) => m.name === "down")).toMatchObject({ probed: true, status: "unhealthy", lastReason: "http_503" });
    expect(s.find((m) => m.name === "legacy")).toMatchObject({ status: "healthy", lastReason: "ok" });

    // An isolate reads health from a cache at most health.cacheTtlMs old: list until it has the verdict.
    const lists = () => downSaw.filter((m) => m === "tools/list").length;
    const end = Date.now() + 10_000;
    for (;;) {
      const before = lists();
      const next = await list();
      const partial = next._meta?.["sluice/partial"] as { server: string; reason: string }[];
      if (partial[0]?.reason === "unhealthy") {
        expect(partial).toEqual([{ server: "down", reason: "unhealthy" }]);
        expect(next.tools.map((t) => t.name)).toContain("modern.echo");
        // Not asked at all, so not waited on.
        expect(lists()).toBe(before);
        break;
      }
      expect(Date.now()).toBeLessThan(end);
    }

    // Probes asked only for discovery or initialize (its session then ended), never a tool.
    expect(new Set(downSaw)).toEqual(new Set(["server/discover", "tools/list"]));
    expect(modern.seen.map((r) => r.body?.method).filter((m) => m !== "tools/list")).toEqual(expect.arrayContaining(["server/discover"]));
    expect(modern.seen.some((r) => r.body?.method === "tools/call")).toBe(false);
    const legacyMethods = legacy.seen.map((r) => r.method);
    expect(legacyMethods).toContain("initialize");
    expect(legacyMethods).not.toContain("tools/call");
    expect(legacy.seen.some((r) => r.method === undefined && typeof r.headers["mcp-session-id"] === "string")).toBe(true);
  });
});
