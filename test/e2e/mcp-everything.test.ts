import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { Client as LegacyClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as LegacyTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateMessageRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, type RunningGateway } from "../../local-stack/stack.ts";
import { startEverythingServer, type EverythingServer } from "./support/mcp-everything-server.ts";
import { ADMIN_TOKEN, bundledConfig, DEMO_KEY } from "./support/stack.ts";

const SESSION_SECRET = "mcp-session-secret-for-the-everything-tests-0123";

/**
 * The MCP reference server (`@modelcontextprotocol/server-everything`, stateful era) through the
 * gateway, end to end through real processes on loopback: the official SDK 1.x client (2025 era,
 * the gateway's sealed sessions) and the SDK 2.x client (2026-07-28), on `/mcp/everything` and
 * on the virtual `/mcp`.
 */
describe("server-everything through the gateway", () => {
  let everything: EverythingServer;
  let gateway: RunningGateway;

  beforeAll(async () => {
    everything = await startEverythingServer();
    const g = bundledConfig("gateway");
    // The bundled backends (never called here) point at a loopback simulator address the egress guard must list.
    const backends = (bundledConfig("backends").backends as { baseUrl: string }[]).map((b) => new URL(b.baseUrl).host);
    g.security.egress = { allow: [new URL(everything.url).host, ...backends] };
    g.mcp = { servers: [{ name: "everything", url: everything.url, era: "stateful" }], sessions: { secrets: ["MCP_SESSION_SECRET"] } };
    const p = bundledConfig("publication");
    p.mcp = {
      policy: {
        revision: "everything-1",
        rules: [
          ...(["tool", "prompt", "resource"] as const).map((kind) => ({ id: `all-${kind}s`, effect: "allow", principals: { tenants: ["demo"] }, servers: ["everything"], kind, names: ["*"] })),
          // get-env answers with the server process's environment: never to a caller.
          { id: "no-env", effect: "deny", servers: ["everything"], names: ["get-env"] },
        ],
      },
    };
    gateway = await startGateway({
      adminToken: ADMIN_TOKEN,
      secretNames: ["MCP_SESSION_SECRET"],
      secrets: { MCP_SESSION_SECRET: SESSION_SECRET },
      config: { gateway: stringify(g), publication: stringify(p) },
    });
  });

  afterAll(async () => {
    await gateway?.stop();
    await everything?.stop();
  });

  const legacy = async (path = "/mcp/everything") => {
    const client = new LegacyClient({ name: "sluice-e2e-everything", version: "1.0.0" });
    await client.connect(new LegacyTransport(new URL(`${gateway.publicUrl}${path}`), { requestInit: { headers: { authorization: `Bearer ${DEMO_KEY}` } } }));
    return client;
  };
  const modern = async (path = "/mcp/everything") => {
    const client = new Client({ name: "sluice-e2e-everything", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${gateway.publicUrl}${path}`), { requestInit: { headers: { authorization: `Bearer ${DEMO_KEY}` } } }));
    return client;
  };

  describe("SDK 1.x client (2025 era)", () => {
    it("lists and calls its tools on /mcp/everything, and refuses the one the policy denies", async () => {
      const client = await legacy();
      const tools = (await client.listTools()).tools.map((t) => t.name);
      expect(tools).toEqual(expect.arrayContaining(["echo", "get-sum", "get-tiny-image", "trigger-long-running-operation"]));
      expect(tools).not.toContain("get-env");
      expect(await client.callTool({ name: "echo", arguments: { message: "through the gateway" } })).toMatchObject({ content: [{ type: "text", text: "Echo: through the gateway" }] });
      expect(await client.callTool({ name: "get-sum", arguments: { a: 2, b: 3 } })).toMatchObject({ content: [{ type: "text", text: "The sum of 2 and 3 is 5." }] });
      expect(await client.callTool({ name: "get-tiny-image", arguments: {} })).toMatchObject({ content: expect.arrayContaining([expect.objectContaining({ type: "image", mimeType: "image/png" })]) });
      await expect(client.callTool({ name: "get-env", arguments: {} })).rejects.toThrow(/denied by rule no-env/);
      await client.close();
    });

    it("lists and gets its prompts, lists and reads its resources and templates", async () => {
      const client = await legacy();
      expect((await client.listPrompts()).prompts.map((p) => p.name)).toEqual(expect.arrayContaining(["simple-prompt", "args-prompt"]));
      expect(await client.getPrompt({ name: "args-prompt", arguments: { city: "Lisbon" } })).toMatchObject({ messages: [{ role: "user", content: { type: "text", text: "What's weather in Lisbon?" } }] });
      const resources = (await client.listResources()).resources;
      expect(resources.length).toBeGreaterThan(0);
      const first = resources[0]!;
      expect((await client.readResource({ uri: first.uri })).contents[0]).toMatchObject({ uri: first.uri });
      const templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
      expect(templates).toContain("demo://resource/dynamic/text/{resourceId}");
      expect((await client.readResource({ uri: "demo://resource/dynamic/text/7" })).contents[0]).toMatchObject({ uri: "demo://resource/dynamic/text/7", text: expect.stringMatching(/^Resource 7: /) });
      await client.close();
    });

    it("calls its tools under their namespaced names on the virtual /mcp", async () => {
      const client = await legacy("/mcp");
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual(expect.arrayContaining(["everything.echo", "everything.get-sum"]));
      expect(await client.callTool({ name: "everything.get-sum", arguments: { a: 40, b: 2 } })).toMatchObject({ content: [{ type: "text", text: "The sum of 40 and 2 is 42." }] });
      await client.close();
    });

    it("relays the progress of a call that asked for it", async () => {
      const client = await legacy();
      const progress: number[] = [];
      const result = await client.callTool({ name: "trigger-long-running-operation", arguments: { duration: 0.3, steps: 3 } }, undefined, { onprogress: (p) => void progress.push(p.progress) });
      expect(result).toMatchObject({ content: [{ type: "text", text: "Long running operation completed. Duration: 0.3 seconds, Steps: 3." }] });
      expect(progress).toEqual([1, 2, 3]);
      // The caller's progress token reached the server, which reports progress against it.
      const call = everything.seen.findLast((s) => s.method === "tools/call" && s.body?.params?.name === "trigger-long-running-operation")!;
      expect(call.body.params._meta.progressToken).toBeDefined();
      await client.close();
    });

    it("relays the server's sampling request to a client that declared sampling, and its answer back", async () => {
      const client = new LegacyClient({ name: "sluice-e2e-everything", version: "1.0.0" }, { capabilities: { sampling: {} } });
      client.setRequestHandler(CreateMessageRequestSchema, async (req) => ({ role: "assistant", model: "e2e-model", content: { type: "text", text: `seen: ${(req.params.messages[0]!.content as { text: string }).text}` } }));
      await client.connect(new LegacyTransport(new URL(`${gateway.publicUrl}/mcp/everything`), { requestInit: { headers: { authorization: `Bearer ${DEMO_KEY}` } } }));
      // The server offers the tool only to a client that declared sampling: the gateway declared it upstream for this client.
      expect((await client.listTools()).tools.map((t) => t.name)).toContain("trigger-sampling-request");
      const result = await client.callTool({ name: "trigger-sampling-request", arguments: { prompt: "hello", maxTokens: 5 } });
      expect(JSON.stringify(result)).toContain("seen: Resource trigger-sampling-request context: hello");
      await client.close();
    });

    it("cancels a running call upstream when the client cancels it", async () => {
      const client = await legacy();
      const stop = new AbortController();
      const call = client.callTool({ name: "trigger-long-running-operation", arguments: { duration: 20, steps: 2 } }, undefined, { signal: stop.signal });
      const started = () => everything.seen.findLast((s) => s.method === "tools/call" && s.body?.params?.name === "trigger-long-running-operation" && s.body.params.arguments.duration === 20);
      for (const end = Date.now() + 10_000; !started(); await new Promise((r) => setTimeout(r, 25))) if (Date.now() > end) throw new Error("the call never reached the server");
      stop.abort();
      await expect(call).rejects.toThrow();
      const id = started()!.body.id;
      for (const end = Date.now() + 10_000; !everything.seen.some((s) => s.method === "notifications/cancelled" && s.body.params.requestId === id); await new Promise((r) => setTimeout(r, 25))) {
        if (Date.now() > end) throw new Error("the server was never told");
      }
      await client.close();
    });
  });

  describe("SDK 2.x client (2026-07-28)", () => {
    it("lists and calls its tools, gets its prompts and reads its resources on /mcp/everything", async () => {
      const client = await modern();
      const tools = (await client.listTools()).tools.map((t) => t.name);
      expect(tools).toEqual(expect.arrayContaining(["echo", "get-sum"]));
      expect(tools).not.toContain("get-env");
      expect(await client.callTool({ name: "echo", arguments: { message: "2026 client, 2025 server" } })).toMatchObject({ content: [{ type: "text", text: "Echo: 2026 client, 2025 server" }] });
      expect(await client.callTool({ name: "get-sum", arguments: { a: 1.5, b: 2 } })).toMatchObject({ content: [{ type: "text", text: "The sum of 1.5 and 2 is 3.5." }] });
      await expect(client.callTool({ name: "get-env", arguments: {} })).rejects.toThrow(/denied by rule no-env/);
      expect(await client.getPrompt({ name: "simple-prompt" })).toMatchObject({ messages: [{ role: "user", content: { type: "text", text: "This is a simple prompt without arguments." } }] });
      expect((await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate)).toContain("demo://resource/dynamic/blob/{resourceId}");
      expect((await client.readResource({ uri: "demo://resource/dynamic/blob/3" })).contents[0]).toMatchObject({ uri: "demo://resource/dynamic/blob/3", blob: expect.any(String) });
      await client.close();
    });

    it("calls its tools under their namespaced names on the virtual /mcp", async () => {
      const client = await modern("/mcp");
      expect(await client.callTool({ name: "everything.echo", arguments: { message: "virtual" } })).toMatchObject({ content: [{ type: "text", text: "Echo: virtual" }] });
      await client.close();
    });

    it("relays the progress of a call that asked for it", async () => {
      const client = await modern();
      const before = everything.seen.length;
      const progress: number[] = [];
      const result = await client.callTool({ name: "trigger-long-running-operation", arguments: { duration: 0.3, steps: 3 } }, { onprogress: (p: { progress: number }) => void progress.push(p.progress) });
      expect(result).toMatchObject({ content: [{ type: "text", text: "Long running operation completed. Duration: 0.3 seconds, Steps: 3." }] });
      expect(progress).toEqual([1, 2, 3]);
      const call = everything.seen.slice(before).find((s) => s.method === "tools/call")!;
      expect(call.body.params._meta.progressToken).toBeDefined();
      await client.close();
    });

  });
});
