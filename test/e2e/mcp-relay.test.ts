import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { Client as LegacyClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as LegacyTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateMessageRequestSchema, ElicitRequestSchema, McpError, ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { startModernMcpTestServer, type ModernMcpTestServer } from "./support/mcp-modern-server.ts";
import { startMcpTestServer, type McpTestServer } from "./support/mcp-test-server.ts";
import { ADMIN_TOKEN, backendsFor, bundledConfig, DEMO_KEY, type Simulator } from "./support/stack.ts";

/**
 * Server-to-client traffic through the gateway, in each bridging direction (docs/mcp.md,
 * "Bridging"): progress and elicitation reach the client that asked for them, or are refused
 * explicitly — never dropped, never left waiting.
 */
describe("MCP server-to-client traffic through the gateway", () => {
  let sim: Simulator;
  let modern: ModernMcpTestServer;
  let legacy: McpTestServer;
  let gateway: RunningGateway;

  beforeAll(async () => {
    [sim, modern, legacy] = await Promise.all([startSimulatorProcess({ apiKey: SIMULATOR_API_KEY }), startModernMcpTestServer(), startMcpTestServer()]);
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.mcp = {
      servers: [
        { name: "modern", url: modern.url, era: "stateless" },
        { name: "legacy", url: legacy.url, era: "stateful" },
      ],
      sessions: { secrets: ["MCP_SESSION_SECRET"] },
    };
    const p = bundledConfig("publication");
    p.mcp = {
      policy: {
        revision: "relay-1",
        rules: [
          { id: "all", effect: "allow", principals: { tenants: ["demo"] }, servers: ["*"], names: ["*"] },
          { id: "notes", effect: "allow", principals: { tenants: ["demo"] }, servers: ["legacy"], kind: "resource", names: ["notes://*"] },
        ],
      },
    };
    gateway = await startGateway({
      adminToken: ADMIN_TOKEN,
      secretNames: ["MCP_SESSION_SECRET"],
      secrets: { MCP_SESSION_SECRET: "mcp-session-secret-for-the-relay-tests-0123456789" },
      config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) },
    });
  });

  afterAll(async () => {
    await gateway?.stop();
    await Promise.all([sim?.stop(), modern?.stop(), legacy?.stop()]);
  });

  const auth = { requestInit: { headers: { authorization: `Bearer ${DEMO_KEY}` } } };

  /** The SDK 2.x client on 2026-07-28; `elicit` answers elicitation when given (and declares the capability). */
  const modernClient = async (elicit?: (message: string) => Record<string, unknown>) => {
    const client = new Client({ name: "relay-e2e", version: "1.0.0" }, { versionNegotiation: { mode: "auto" }, capabilities: elicit ? { elicitation: { form: {} } } : {} });
    if (elicit) client.setRequestHandler("elicitation/create", async (req) => ({ action: "accept" as const, content: elicit((req.params as { message: string }).message) as Record<string, string | number | boolean> }));
    await client.connect(new StreamableHTTPClientTransport(new URL(`${gateway.publicUrl}/mcp`), auth));
    return client;
  };

  /** The SDK 1.x client on the 2025 era (a sealed gateway session). */
  const legacyClient = async (elicit?: (message: string) => Record<string, unknown>) => {
    const client = new LegacyClient({ name: "relay-e2e-legacy", version: "1.0.0" }, { capabilities: elicit ? { elicitation: {} } : {} });
    if (elicit) client.setRequestHandler(ElicitRequestSchema, async (req) => ({ action: "accept", content: elicit(req.params.message) as Record<string, string | number | boolean> }));
    await client.connect(new LegacyTransport(new URL(`${gateway.publicUrl}/mcp`), auth));
    return client;
  };

  it("relays progress to both eras' clients, from both eras' servers, by the caller's own token", async () => {
    // The two SDKs take the progress callback in different argument positions.
    const clients = [
      { client: await modernClient(), call: (c: any, name: string, onprogress: (p: { progress: number }) => void) => c.callTool({ name, arguments: { n: 3 } }, { onprogress }) },
      { client: await legacyClient(), call: (c: any, name: string, onprogress: (p: { progress: number }) => void) => c.callTool({ name, arguments: { n: 3 } }, undefined, { onprogress }) },
    ];
    for (const { client, call } of clients) {
      for (const server of ["legacy", "modern"]) {
        const seen: number[] = [];
        const result = await call(client, `${server}.count`, (p) => void seen.push(p.progress));
        expect(result).toMatchObject({ content: [{ type: "text", text: "counted to 3" }] });
        expect(seen, `${server} server`).toEqual([1, 2, 3]);
      }
      await client.close();
    }
  });

  it("answers as plain JSON when nothing is streamed", async () => {
    const res = await fetch(`${gateway.publicUrl}/mcp`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "legacy.count" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "legacy.count", arguments: { n: 2 }, _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } } }),
    });
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await res.json()).toMatchObject({ id: 1, result: { content: [{ text: "counted to 2" }] } });
  });

  it("a stateful-era client with the capability answers a stateful server's elicitation, relayed within the request", async () => {
    const asked: string[] = [];
    const client = await legacyClient((m) => (asked.push(m), { confirm: true }));
    expect(await client.callTool({ name: "legacy.confirm", arguments: { action: "deploy" } })).toMatchObject({ content: [{ text: "confirmed deploy" }] });
    expect(asked).toEqual(["Really deploy?"]);
    await client.close();
  });

  it("passes a server's own URLElicitationRequiredError (-32042) to the client with its URLs", async () => {
    const client = await legacyClient();
    const err = await client.callTool({ name: "legacy.consent", arguments: {} }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(McpError);
    const e = err as McpError;
    expect(e.code).toBe(-32042);
    expect(e.message).toMatch(/MCP server legacy: .*Consent is required first\./);
    expect((e.data as { elicitations: unknown[] }).elicitations).toEqual([{ mode: "url", elicitationId: "consent-1", url: "https://auth.example.com/consent?client=test", message: "Grant access to your notes first" }]);
    await client.close();
  });

  it("relays what a stateful server asks on its session's GET stream, outside the request's own stream", async () => {
    const client = new LegacyClient({ name: "relay-e2e-sampling", version: "1.0.0" }, { capabilities: { sampling: {} } });
    client.setRequestHandler(CreateMessageRequestSchema, async () => ({ role: "assistant", model: "test-model", content: { type: "text", text: "hi there" } }));
    await client.connect(new LegacyTransport(new URL(`${gateway.publicUrl}/mcp`), auth));
    expect(await client.callTool({ name: "legacy.sample", arguments: {} })).toMatchObject({ content: [{ text: "sampled: hi there" }] });
    await client.close();
  });

  it("a stateful-era client answers a 2026 server's input_required: asked in the stream, sent again with the answer and state", async () => {
    const asked: string[] = [];
    const client = await legacyClient((m) => (asked.push(m), { confirm: true }));
    expect(await client.callTool({ name: "modern.confirm", arguments: { action: "ship" } })).toMatchObject({ content: [{ text: "confirmed ship" }] });
    expect(asked).toEqual(["Really ship?"]);
    const retry = modern.seen.filter((s) => s.body?.params?.name === "confirm").at(-1)!;
    expect(retry.body.params).toMatchObject({ inputResponses: { confirm: { action: "accept", content: { confirm: true } } }, requestState: "asked:ship" });
    await client.close();
  });

  it("a 2026 client gets a 2026 server's input_required as it is, and its retry's answers reach the server", async () => {
    const asked: string[] = [];
    const client = await modernClient((m) => (asked.push(m), { confirm: true }));
    expect(await client.callTool({ name: "modern.confirm", arguments: { action: "merge" } })).toMatchObject({ content: [{ text: "confirmed merge" }] });
    expect(asked).toEqual(["Really merge?"]);
    await client.close();
  });

  it("a stateful-era client's notifications/cancelled ends its request, and the server is told in its own session", async () => {
    const client = await legacyClient();
    const stop = new AbortController();
    const call = client.callTool({ name: "legacy.slow", arguments: {} }, undefined, { signal: stop.signal });
    const until = async (ok: () => boolean) => {
      for (const end = Date.now() + 10_000; !ok(); await new Promise((r) => setTimeout(r, 25))) if (Date.now() > end) throw new Error("timed out");
    };
    await until(() => legacy.seen.some((s) => s.method === "tools/call" && s.body?.params?.name === "slow"));
    const slow = legacy.seen.filter((s) => s.method === "tools/call" && s.body?.params?.name === "slow").at(-1)!;
    stop.abort();
    await expect(call).rejects.toThrow();
    await until(() => legacy.seen.some((s) => s.method === "notifications/cancelled" && s.body.params.requestId === slow.body.id));
    const notice = legacy.seen.find((s) => s.method === "notifications/cancelled" && s.body.params.requestId === slow.body.id)!;
    expect(notice.headers["mcp-session-id"]).toBe(slow.headers["mcp-session-id"]);
    await client.close();
  });

  it("a stateful-era client's log level reaches its own upstream session, and the server's log messages reach it", async () => {
    const client = await legacyClient();
    await client.setLoggingLevel("debug");
    const set = legacy.seen.filter((s) => s.method === "logging/setLevel").at(-1)!;
    expect(set.body.params).toEqual({ level: "debug" });
    // Its own session: not the one another client's calls run in.
    const other = await legacyClient();
    await other.callTool({ name: "legacy.echo", arguments: { text: "x" } });
    expect(legacy.seen.filter((s) => s.method === "tools/call").at(-1)!.headers["mcp-session-id"]).not.toBe(set.headers["mcp-session-id"]);
    await Promise.all([client.close(), other.close()]);
  });

  it("a 2026 client's subscriptions/listen gets what it asked for from a stateful server, renamed and stamped, until it leaves", async () => {
    const meta = { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} };
    const headers = (method: string) => ({ authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": method });
    const leave = new AbortController();
    const res = await fetch(`${gateway.publicUrl}/mcp`, {
      method: "POST",
      headers: headers("subscriptions/listen"),
      body: JSON.stringify({ jsonrpc: "2.0", id: "sub-1", method: "subscriptions/listen", params: { notifications: { resourceSubscriptions: ["legacy+notes://today"], toolsListChanged: true }, _meta: meta } }),
      signal: leave.signal,
    });
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffered = "";
    const next = async (): Promise<any> => {
      for (;;) {
        const at = buffered.indexOf("\n\n");
        if (at >= 0) {
          const event = buffered.slice(0, at);
          buffered = buffered.slice(at + 2);
          const data = event.split("\n").find((l) => l.startsWith("data: "));
          if (data) return JSON.parse(data.slice(6));
          continue;
        }
        const { value, done } = await reader.read();
        if (done) throw new Error("stream ended");
        buffered += value;
      }
    };
    expect(await next()).toEqual({ jsonrpc: "2.0", method: "notifications/subscriptions/acknowledged", params: { notifications: { toolsListChanged: true, promptsListChanged: false, resourcesListChanged: false, resourceSubscriptions: ["legacy+notes://today"] }, _meta: { "io.modelcontextprotocol/subscriptionId": "sub-1" } } });
    // The upstream subscription is in place once the server has seen it; then something changes.
    for (const end = Date.now() + 10_000; !legacy.seen.some((s) => s.method === "resources/subscribe"); await new Promise((r) => setTimeout(r, 25))) if (Date.now() > end) throw new Error("no subscribe upstream");
    const touched = await fetch(`${gateway.publicUrl}/mcp`, { method: "POST", headers: { ...headers("tools/call"), "mcp-name": "legacy.touch" }, body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "legacy.touch", arguments: {}, _meta: meta } }) });
    expect(touched.status).toBe(200);
    const got = [await next(), await next()].sort((a, b) => a.method.localeCompare(b.method));
    expect(got).toEqual([
      { jsonrpc: "2.0", method: "notifications/resources/updated", params: { uri: "legacy+notes://today", _meta: { "io.modelcontextprotocol/subscriptionId": "sub-1" } } },
      { jsonrpc: "2.0", method: "notifications/tools/list_changed", params: { _meta: { "io.modelcontextprotocol/subscriptionId": "sub-1" } } },
    ]);
    leave.abort();
    await reader.cancel().catch(() => undefined);
  });

  it("refuses a subscription to a resource the caller may not see", async () => {
    const res = await fetch(`${gateway.publicUrl}/mcp`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "subscriptions/listen" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "subscriptions/listen", params: { notifications: { resourceSubscriptions: ["modern+docs://secret"] }, _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } } }),
    });
    expect(res.status).toBe(403);
    expect(((await res.json()) as any).error.data.code).toBe("tool_not_allowed");
  });

  it("a stateful-era client subscribes in its session and hears the update on its GET stream", async () => {
    const client = await legacyClient();
    const updates: string[] = [];
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => void updates.push(n.params.uri));
    await client.subscribeResource({ uri: "legacy+notes://today" });
    // Its GET stream reaches the server's once the client opened it after initialize.
    for (const end = Date.now() + 10_000; updates.length === 0; await new Promise((r) => setTimeout(r, 50))) {
      if (Date.now() > end) throw new Error("no update reached the client");
      await client.callTool({ name: "legacy.touch", arguments: {} });
    }
    expect(updates[0]).toBe("legacy+notes://today");
    await client.close();
  });

  it("refuses explicitly where a direction cannot carry the request: no capability declared upstream, the server told at once", async () => {
    // A stateful-era client without the capability: the server is not told it may ask, and its SDK refuses to.
    const plain = await legacyClient();
    await expect(plain.callTool({ name: "legacy.confirm", arguments: { action: "x" } })).resolves.toMatchObject({ isError: true });
    // The same client, a 2026 server that needs the capability: refused with MissingRequiredClientCapability's code.
    await expect(plain.callTool({ name: "modern.confirm", arguments: { action: "x" } })).rejects.toMatchObject({ code: -32021 });
    await plain.close();
    // A 2026 client and a stateful server: not carried in this direction (docs/mcp.md), so nothing is declared upstream.
    const modernOne = await modernClient(() => ({ confirm: true }));
    await expect(modernOne.callTool({ name: "legacy.confirm", arguments: { action: "x" } })).resolves.toMatchObject({ isError: true });
    await modernOne.close();
  });
});
