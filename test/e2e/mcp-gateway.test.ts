import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { Client as LegacyClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as LegacyTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../local-stack/ports.ts";
import { rawSocket } from "./support/raw-http.ts";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { startModernMcpTestServer, type ModernMcpTestServer } from "./support/mcp-modern-server.ts";
import { startMcpTestServer, type McpTestServer } from "./support/mcp-test-server.ts";
import { ADMIN_TOKEN, backendsFor, bundledConfig, DEMO_KEY, type Simulator } from "./support/stack.ts";

/** The simulator (for the model side), both MCP servers, and a gateway.yaml fronting the two. */
async function startUpstreams() {
  const [sim, modern, legacy] = await Promise.all([startSimulatorProcess({ apiKey: SIMULATOR_API_KEY }), startModernMcpTestServer(), startMcpTestServer()]);
  const gatewayYaml = bundledConfig("gateway");
  gatewayYaml.security.egress = { allow: ["127.0.0.1"] };
  gatewayYaml.mcp = {
    servers: [
      { name: "modern", url: modern.url, era: "stateless" },
      { name: "legacy", url: legacy.url, era: "stateful" },
    ],
  };
  return { sim, modern, legacy, gatewayYaml, stop: () => Promise.all([sim.stop(), modern.stop(), legacy.stop()]) };
}

/**
 * The MCP endpoint end to end: the official SDK 2.x client (2026-07-28) through the gateway to a
 * 2026-07-28 server (SDK 2.x) and a stateful-era server (SDK 1.x), both on loopback.
 */
describe("MCP through the gateway", () => {
  let sim: Simulator;
  let modern: ModernMcpTestServer;
  let legacy: McpTestServer;
  let gateway: RunningGateway;
  let stopUpstreams: () => Promise<unknown>;

  beforeAll(async () => {
    const up = await startUpstreams();
    ({ sim, modern, legacy } = up);
    stopUpstreams = up.stop;
    const g = up.gatewayYaml;
    const p = bundledConfig("publication");
    p.mcp = {
      policy: {
        revision: "mcp-1",
        rules: [
          { id: "demo-tools", effect: "allow", principals: { tenants: ["demo"] }, servers: ["*"], names: ["*"] },
          { id: "demo-prompts", effect: "allow", principals: { tenants: ["demo"] }, servers: ["modern"], kind: "prompt", names: ["greet"] },
          { id: "demo-docs", effect: "allow", principals: { tenants: ["demo"] }, servers: ["modern"], kind: "resource", names: ["docs://*"] },
          { id: "no-secret-doc", effect: "deny", servers: ["modern"], kind: "resource", names: ["docs://secret"] },
          { id: "no-count", effect: "deny", servers: ["legacy"], names: ["count"] },
          { id: "short-echo", effect: "deny", servers: ["legacy"], names: ["echo"], arguments: { text: { pattern: ".{20,}" } } },
        ],
      },
    };
    gateway = await startGateway({ adminToken: ADMIN_TOKEN, config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) } });
  });

  afterAll(async () => {
    await gateway?.stop();
    await stopUpstreams?.();
  });

  const connect = async (path = "/mcp", key = DEMO_KEY) => {
    // The SDK 2.x client speaks the 2025 era unless asked to negotiate (`auto` probes server/discover).
    const client = new Client({ name: "sluice-e2e", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${gateway.publicUrl}${path}`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
    return client;
  };

  it("lists every allowed tool of both eras' servers under its server's name, and calls them", async () => {
    const client = await connect();
    const tools = (await client.listTools()).tools.map((t) => t.name).sort();
    // legacy.count is denied outright, so it is not listed; legacy.echo is listed (only long texts are denied).
    expect(tools).toEqual(["legacy.confirm", "legacy.consent", "legacy.echo", "legacy.sample", "legacy.slow", "legacy.touch", "modern.confirm", "modern.count", "modern.echo"]);
    expect(await client.callTool({ name: "modern.echo", arguments: { text: "to the modern server" } })).toMatchObject({ content: [{ type: "text", text: "to the modern server" }] });
    expect(await client.callTool({ name: "legacy.echo", arguments: { text: "short" } })).toMatchObject({ content: [{ type: "text", text: "short" }] });
    await client.close();
  });

  it("refuses a denied tool called by name, and an argument a rule denies, naming the rule", async () => {
    const client = await connect();
    await expect(client.callTool({ name: "legacy.count", arguments: { n: 2 } })).rejects.toThrow(/denied by rule no-count/);
    await expect(client.callTool({ name: "legacy.echo", arguments: { text: "x".repeat(30) } })).rejects.toThrow(/denied by rule short-echo/);
    await expect(client.callTool({ name: "nosuch.echo", arguments: {} })).rejects.toThrow(/Unknown tool/);
    await client.close();
  });

  it("serves one server at /mcp/<server> with its names unchanged", async () => {
    const client = await connect("/mcp/legacy");
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(["touch", "echo", "confirm", "consent", "sample", "slow"]);
    expect(await client.callTool({ name: "echo", arguments: { text: "direct" } })).toMatchObject({ content: [{ type: "text", text: "direct" }] });
    await client.close();
  });

  it("serves a server's prompts and resources at /mcp/<server>, filtered and re-authorized by the policy", async () => {
    const client = await connect("/mcp/modern");
    expect((await client.listPrompts()).prompts.map((p) => p.name)).toEqual(["greet"]);
    expect(await client.getPrompt({ name: "greet", arguments: { name: "Ada" } })).toMatchObject({ messages: [{ role: "user", content: { type: "text", text: "Hello, Ada" } }] });
    expect((await client.listResources()).resources.map((r) => r.uri)).toEqual(["docs://readme"]);
    expect(await client.readResource({ uri: "docs://readme" })).toMatchObject({ contents: [{ uri: "docs://readme", text: "the readme" }] });
    await expect(client.readResource({ uri: "docs://secret" })).rejects.toThrow(/denied by rule no-secret-doc/);
    await client.close();
  });

  it("serves every server's prompts and resources on the virtual server, named by server, and reads them back by those names", async () => {
    const client = await connect();
    expect((await client.listPrompts()).prompts.map((p) => p.name)).toEqual(["modern.greet"]);
    expect(await client.getPrompt({ name: "modern.greet", arguments: { name: "Ada" } })).toMatchObject({ messages: [{ content: { text: "Hello, Ada" } }] });
    expect((await client.listResources()).resources.map((r) => r.uri)).toEqual(["modern+docs://readme"]);
    expect(await client.readResource({ uri: "modern+docs://readme" })).toMatchObject({ contents: [{ uri: "modern+docs://readme", text: "the readme" }] });
    await expect(client.readResource({ uri: "modern+docs://secret" })).rejects.toThrow(/denied by rule no-secret-doc/);
    await expect(client.readResource({ uri: "docs://readme" })).rejects.toThrow(/<server>\+<uri>/);
    await expect(client.getPrompt({ name: "nosuch.greet" })).rejects.toThrow(/<server>\.<prompt>/);
    await client.close();
  });

  it("refuses header and body mismatches, a forged Mcp-Name, GET, and a caller without a key", async () => {
    const meta = { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} };
    const post = (headers: Record<string, string>, body: unknown, method = "POST") =>
      fetch(`${gateway.publicUrl}/mcp`, {
        method,
        headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", ...headers },
        ...(method === "POST" ? { body: JSON.stringify(body) } : {}),
      });
    const call = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "legacy.count", arguments: { n: 1 }, _meta: meta } };
    // The header names an allowed tool; the body names a denied one: the body decides, the header only mismatches.
    const forged = await post({ "mcp-method": "tools/call", "mcp-name": "modern.echo" }, call);
    expect(forged.status).toBe(400);
    expect(await forged.json()).toMatchObject({ jsonrpc: "2.0", error: { code: -32020, data: { code: "mcp_header_mismatch" } } });
    const wrongMethod = await post({ "mcp-method": "tools/list", "mcp-name": "legacy.count" }, call);
    expect(((await wrongMethod.json()) as any).error.code).toBe(-32020);
    const version = await post({ "mcp-method": "tools/list", "mcp-protocol-version": "2099-01-01" }, { jsonrpc: "2.0", id: 2, method: "tools/list", params: { _meta: { ...meta, "io.modelcontextprotocol/protocolVersion": "2099-01-01" } } });
    expect(version.status).toBe(400);
    expect(((await version.json()) as any).error).toMatchObject({ code: -32022, data: { details: [{ supported: ["2026-07-28"] }] } });
    const unknown = await post({ "mcp-method": "tools/destroy" }, { jsonrpc: "2.0", id: 3, method: "tools/destroy", params: { _meta: meta } });
    expect(unknown.status).toBe(404);
    expect((await post({}, undefined, "GET")).status).toBe(405);
    const noKey = await fetch(`${gateway.publicUrl}/mcp`, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list" }, body: JSON.stringify({ jsonrpc: "2.0", id: 4, method: "tools/list", params: { _meta: meta } }) });
    expect(noKey.status).toBe(401);
    expect(((await noKey.json()) as any).error.data.code).toBe("missing_api_key");
  });

  it("logs and counts MCP requests like any other, under their endpoint and method", async () => {
    const client = await connect("/mcp/modern");
    await client.callTool({ name: "echo", arguments: { text: "counted" } });
    await client.close();
    const metrics = await (await fetch(`${gateway.adminUrl}/admin/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
    expect(metrics).toMatch(/sluice_requests_total\{sluice_entrypoint="mcp\/modern",sluice_protocol="other",sluice_outcome="success",error_type="",sluice_route="tools\/call",sluice_publication="stable"\} [1-9]/);
    expect(gateway.output()).toMatch(/"kind":"request".*"entrypoint":"mcp\/modern","route":"tools\/call"/);
    expect(metrics).toMatch(/mcp_server_operation_duration_seconds_count\{mcp_method_name="tools\/call",sluice_mcp_server="modern",gen_ai_tool_name="echo",error_type=""\} [1-9]/);
    // One audit line per call: the decision (rule, revision) beside the execution's result.
    const refused = await connect();
    await expect(refused.callTool({ name: "legacy.count", arguments: { n: 1 } })).rejects.toThrow();
    await refused.close();
    const line = gateway
      .output()
      .split("\n")
      .filter((l) => l.includes('"route":"tools/call"') && l.includes('"outcome":"error"'))
      .map((l) => JSON.parse(l))
      .at(-1);
    expect(line).toMatchObject({ errorCode: "tool_not_allowed", mcp: { method: "tools/call", server: "legacy", target: "count", decision: { allowed: false, rule: "no-count", policyRevision: "mcp-1" } } });
  });

  it("a client that goes away cancels the call upstream: a stateful server gets notifications/cancelled", async () => {
    const meta = { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} };
    // A raw connection the test resets: workerd notices a reset client at once (a quiet close
    // only when it next writes), which is what a client that goes away looks like to the gateway.
    const body = JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: "slow", arguments: {}, _meta: meta } });
    const socket = await rawSocket(gateway.publicUrl);
    socket.on("error", () => {});
    socket.write(
      `POST /mcp/legacy HTTP/1.1\r\nhost: ${new URL(gateway.publicUrl).host}\r\nauthorization: Bearer ${DEMO_KEY}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: slow\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    const until = async (what: string, ok: () => boolean) => {
      const end = Date.now() + 10_000;
      while (!ok()) {
        if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    };
    await until("the call to reach the server", () => legacy.seen.some((s) => s.method === "tools/call" && s.body?.params?.name === "slow"));
    socket.resetAndDestroy();
    await until("the server to be told", () => legacy.seen.some((s) => s.method === "notifications/cancelled")).catch((err: unknown) => {
      throw new Error(`${String(err)}; seen ${JSON.stringify(legacy.seen.map((s) => s.method))}; gateway ${gateway.output().slice(-1500)}`);
    });
    const notice = legacy.seen.find((s) => s.method === "notifications/cancelled")!;
    const slow = legacy.seen.find((s) => s.method === "tools/call" && s.body?.params?.name === "slow")!;
    expect(notice.body.params.requestId).toBe(slow.body.id);
    expect(notice.headers["mcp-session-id"]).toBe(slow.headers["mcp-session-id"]);
  });

  it("sends nothing of the caller's upstream: no key, no session, no trace header", async () => {
    const client = await connect();
    await client.callTool({ name: "legacy.echo", arguments: { text: "headers" } });
    await client.close();
    const seen = legacy.seen.at(-1)!.headers;
    expect(seen.authorization).toBeUndefined();
    expect(JSON.stringify(seen)).not.toContain(DEMO_KEY);
  });
});

describe("MCP through the gateway for stateful-era (2025) clients", () => {
  let sim: Simulator;
  let modern: ModernMcpTestServer;
  let legacy: McpTestServer;
  let gateway: RunningGateway;
  let stopUpstreams: () => Promise<unknown>;
  let publicPort: number;
  const SESSION_SECRET = "mcp-session-secret-for-the-e2e-tests-0123456789";
  let start: () => Promise<RunningGateway>;

  beforeAll(async () => {
    const up = await startUpstreams();
    ({ sim, modern, legacy } = up);
    stopUpstreams = up.stop;
    const g = up.gatewayYaml;
    g.mcp.sessions = { secrets: ["MCP_SESSION_SECRET"] };
    const p = bundledConfig("publication");
    p.mcp = { policy: { revision: "mcp-1", rules: [{ id: "demo-tools", effect: "allow", principals: { tenants: ["demo"] }, servers: ["*"], names: ["echo"] }] } };
    publicPort = await freePort();
    start = () =>
      startGateway({
        adminToken: ADMIN_TOKEN,
        publicPort,
        secretNames: ["MCP_SESSION_SECRET"],
        secrets: { MCP_SESSION_SECRET: SESSION_SECRET },
        config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) },
      });
    gateway = await start();
  });

  afterAll(async () => {
    await gateway?.stop();
    await stopUpstreams?.();
  });

  it("initializes a session, lists and calls tools, and the session survives a gateway restart", async () => {
    const client = new LegacyClient({ name: "sluice-e2e-legacy", version: "1.0.0" });
    const transport = new LegacyTransport(new URL(`http://127.0.0.1:${publicPort}/mcp`), { requestInit: { headers: { authorization: `Bearer ${DEMO_KEY}` } } });
    await client.connect(transport);
    const sessionId = transport.sessionId;
    expect(sessionId).toMatch(/^s1\./);
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(["legacy.echo", "modern.echo"]);
    expect(await client.callTool({ name: "modern.echo", arguments: { text: "2025 client, 2026 server" } })).toMatchObject({ content: [{ type: "text", text: "2025 client, 2026 server" }] });
    // A new gateway process on the same port, with the same secret: no shared store, same session.
    await gateway.stop();
    gateway = await start();
    expect(await client.callTool({ name: "legacy.echo", arguments: { text: "after restart" } })).toMatchObject({ content: [{ type: "text", text: "after restart" }] });
    expect(transport.sessionId).toBe(sessionId);
    expect(gateway.output()).not.toContain('"route":"initialize"');
    await client.close();
  });

  it("answers the gateway's refusals inside a session in-band, so the SDK reads them as JSON-RPC errors", async () => {
    const client = new LegacyClient({ name: "sluice-e2e-legacy-refusals", version: "1.0.0" });
    await client.connect(new LegacyTransport(new URL(`http://127.0.0.1:${publicPort}/mcp`), { requestInit: { headers: { authorization: `Bearer ${DEMO_KEY}` } } }));
    // A tool the policy does not list, and a call whose name is not a string.
    for (const [params, code, rpc] of [
      [{ name: "legacy.confirm", arguments: { action: "x" } }, "tool_not_allowed", -32000],
      [{ name: 42 }, "invalid_request", -32602],
    ] as const) {
      const err = await client.request({ method: "tools/call", params: params as never }, CallToolResultSchema).catch((e: unknown) => e);
      expect(err, JSON.stringify(params)).toBeInstanceOf(McpError);
      expect((err as McpError).code).toBe(rpc);
      expect((err as McpError).data).toMatchObject({ code });
    }
    // The session is still good.
    expect(await client.callTool({ name: "legacy.echo", arguments: { text: "still here" } })).toMatchObject({ content: [{ type: "text", text: "still here" }] });
    await client.close();
  });

  it("answers 404 to a session id that is not this caller's, tampered with, or sealed with another secret", async () => {
    const init = await fetch(`http://127.0.0.1:${publicPort}/mcp`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } } }),
    });
    expect(init.status).toBe(200);
    expect(((await init.json()) as any).result.protocolVersion).toBe("2025-06-18");
    const sid = init.headers.get("mcp-session-id")!;
    const list = (session: string, key = DEMO_KEY) =>
      fetch(`http://127.0.0.1:${publicPort}/mcp`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-session-id": session, "mcp-protocol-version": "2025-06-18" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
      });
    expect((await list(sid)).status).toBe(200);
    expect((await list(sid.slice(0, -3) + (sid.endsWith("AAA") ? "BBB" : "AAA"))).status).toBe(404);
    expect((await list("s1.not-a-key.aaaaaaaaaaaaaaaa.bbbb")).status).toBe(404);
    expect((await list(sid, "sk-sluice-limited")).status).toBe(404);
  });
});
