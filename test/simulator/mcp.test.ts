/**
 * `POST /mcp`: the stateless-revision (2026-07-28) MCP server, proven with the official SDK 2.x
 * client, and its refusals of requests that break the revision, read raw.
 */

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ECHO_TOOL, MCP_PATH, MCP_VERSION } from "../../simulator/mcp.ts";
import type { Simulator } from "../../simulator/server.ts";
import { post, reset, start, stats } from "./helpers.ts";

const KEY = "test-key";

let sim: Simulator;
beforeAll(async () => {
  sim = await start({ apiKey: KEY });
});
afterAll(() => sim.close());
beforeEach(() => reset(sim));

/** A request of the revision: its `_meta` envelope and the headers that repeat the body. */
function message(method: string, params: Record<string, unknown> = {}, id: number | "notification" = 1) {
  const body = { jsonrpc: "2.0", ...(id === "notification" ? {} : { id }), method, params: { ...params, _meta: { "io.modelcontextprotocol/protocolVersion": MCP_VERSION, "io.modelcontextprotocol/clientCapabilities": {} } } };
  const name: Record<string, string> = typeof params.name === "string" ? { "mcp-name": params.name } : {};
  const headers: Record<string, string> = { authorization: `Bearer ${KEY}`, accept: "application/json, text/event-stream", "mcp-protocol-version": MCP_VERSION, "mcp-method": method, ...name };
  return { body, headers };
}

async function send(body: unknown, headers: Record<string, string>): Promise<{ status: number; json: any }> {
  const res = await post(sim, MCP_PATH, body, headers);
  const text = await res.text();
  return { status: res.status, json: text === "" ? undefined : JSON.parse(text) };
}

describe("MCP endpoint, 2026-07-28", () => {
  it("serves the official SDK 2.x client: discovery, the tool list and the echo tool", async () => {
    const client = new Client({ name: "simulator-test", version: "1.0.0" }, { versionNegotiation: { mode: { pin: MCP_VERSION } } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${sim.url}${MCP_PATH}`), { requestInit: { headers: { authorization: `Bearer ${KEY}` } } }));
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual([ECHO_TOOL]);
    expect(await client.callTool({ name: ECHO_TOOL, arguments: { text: "hello, tool" } })).toMatchObject({ content: [{ type: "text", text: "hello, tool" }] });
    // A tool's own failure is a result, not a protocol error.
    expect(await client.callTool({ name: ECHO_TOOL, arguments: {} })).toMatchObject({ isError: true });
    await client.close();
    const s = await stats(sim);
    expect(s.paths[MCP_PATH]).toBe(s.total);
    expect(s.outcomes).toMatchObject({ completed: s.total, rejected: 0 });
  });

  it("answers a tools/call in JSON with the result the revision asks for", async () => {
    const m = message("tools/call", { name: ECHO_TOOL, arguments: { text: "ünïcode" } }, 7);
    const res = await post(sim, MCP_PATH, m.body, m.headers);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toEqual({ jsonrpc: "2.0", id: 7, result: { resultType: "complete", content: [{ type: "text", text: "ünïcode" }] } });
  });

  it("reads Mcp-Name in its base64 form", async () => {
    const m = message("tools/call", { name: ECHO_TOOL, arguments: { text: "x" } });
    const encoded = `=?base64?${Buffer.from(ECHO_TOOL).toString("base64")}?=`;
    expect((await send(m.body, { ...m.headers, "mcp-name": encoded })).json.result.content[0].text).toBe("x");
  });

  it("refuses what breaks the revision, and counts the refusals as rejected", async () => {
    const call = message("tools/call", { name: ECHO_TOOL, arguments: { text: "x" } });
    const cases: { body: unknown; headers: Record<string, string>; status: number; code: number }[] = [
      // The headers must repeat the body.
      { ...call, headers: { ...call.headers, "mcp-method": "tools/list" }, status: 400, code: -32020 },
      { ...call, headers: { ...call.headers, "mcp-name": "other" }, status: 400, code: -32020 },
      { ...call, headers: { ...call.headers, "mcp-protocol-version": "2025-11-25" }, status: 400, code: -32020 },
      // The envelope: a version, a served one, and the client's capabilities.
      { body: { jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }, headers: message("tools/list").headers, status: 400, code: -32022 },
      { body: { jsonrpc: "2.0", id: 1, method: "tools/list", params: { _meta: { "io.modelcontextprotocol/protocolVersion": "2025-06-18", "io.modelcontextprotocol/clientCapabilities": {} } } }, headers: { ...message("tools/list").headers, "mcp-protocol-version": "2025-06-18" }, status: 400, code: -32022 },
      { body: { jsonrpc: "2.0", id: 1, method: "tools/list", params: { _meta: { "io.modelcontextprotocol/protocolVersion": MCP_VERSION } } }, headers: message("tools/list").headers, status: 400, code: -32602 },
      // JSON-RPC itself.
      { body: "{not json", headers: call.headers, status: 400, code: -32700 },
      { body: [call.body], headers: call.headers, status: 400, code: -32600 },
      // Answered in-band, as the server would: an unknown tool. Out of band: an unknown method.
      { ...message("tools/call", { name: "nosuch", arguments: {} }), status: 200, code: -32602 },
      { ...message("resources/list"), status: 404, code: -32601 },
    ];
    for (const c of cases) {
      const r = await send(c.body, c.headers);
      expect({ status: r.status, code: r.json.error?.code }).toEqual({ status: c.status, code: c.code });
      expect(r.json.result).toBeUndefined();
    }
    const s = await stats(sim);
    expect(s.outcomes).toMatchObject({ completed: 0, rejected: cases.length });
  });

  it("accepts a notification with 202 and no body", async () => {
    const n = message("notifications/cancelled", { requestId: 1 }, "notification");
    expect(await send(n.body, n.headers)).toEqual({ status: 202, json: undefined });
  });

  it("refuses a GET, and a request without the API key", async () => {
    const get = await fetch(`${sim.url}${MCP_PATH}`, { headers: { authorization: `Bearer ${KEY}`, accept: "text/event-stream" } });
    expect(get.status).toBe(405);
    await get.body?.cancel();
    const m = message("tools/list");
    const r = await send(m.body, { ...m.headers, authorization: "Bearer wrong" });
    expect(r.status).toBe(401);
    expect(r.json.error.code).toBe(-32000);
    expect((await stats(sim)).outcomes.rejected).toBe(2);
  });
});
