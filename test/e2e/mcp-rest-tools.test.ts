import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import type { IncomingHttpHeaders } from "node:http";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { secretsNamed } from "../../cli/config-dir.ts";
import { loadConfig } from "../../src/config/load-config.ts";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { startLoopbackServer, type LoopbackServer } from "./support/loopback-server.ts";
import { ADMIN_TOKEN, backendsFor, bundledConfig, DEMO_KEY, type Simulator } from "./support/stack.ts";

const API_TOKEN = "rest-api-token-e2e";

/** What the API was sent, one entry per request. */
interface Received {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/**
 * A tool defined in gateway.yaml from an HTTP API, end to end: the official SDK 2.x client lists
 * and calls it on `/mcp`; a loopback API started here records what the gateway sent it.
 */
describe("REST tools through the gateway", () => {
  let sim: Simulator;
  let api: LoopbackServer;
  let gateway: RunningGateway;
  let texts: { gateway: string; publication: string; backends: string };
  const received: Received[] = [];

  beforeAll(async () => {
    sim = await startSimulatorProcess({ apiKey: SIMULATOR_API_KEY });
    api = await startLoopbackServer(async (req, body, res) => {
      received.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: body.toString("utf8") });
      const item = /^\/v1\/items\/([^/?]+)/.exec(req.url ?? "")?.[1];
      if (req.method === "GET" && item === "42") {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ id: 42, title: "The answer", owner: { login: "ada", email: "ada@example.com" }, internal: "not for clients" }));
      } else if (req.method === "POST" && req.url === "/v1/items") {
        res.writeHead(201, { "content-type": "application/json" }).end(JSON.stringify({ id: 7, created: JSON.parse(body.toString("utf8")) }));
      } else {
        res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ message: "No such item" }));
      }
    });
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.mcp = {
      servers: [
        {
          name: "items",
          url: `${api.origin}/v1`,
          credential: { secret: "ITEMS_API_TOKEN", scheme: "bearer" },
          rest: {
            tools: [
              {
                name: "get_item",
                description: "One item by id",
                inputSchema: { type: "object", properties: { id: { type: "string", maxLength: 20 }, verbose: { type: "boolean" } }, required: ["id"], additionalProperties: false },
                method: "GET",
                path: "/items/{id}",
                query: { verbose: "{verbose}" },
                response: { fields: ["id", "title", "owner.login"] },
              },
              {
                name: "create_item",
                inputSchema: { type: "object", properties: { title: { type: "string" }, tags: { type: "array", items: { type: "string" } } }, required: ["title"] },
                method: "POST",
                path: "/items",
                body: "arguments",
              },
            ],
          },
        },
      ],
    };
    const p = bundledConfig("publication");
    p.mcp = { policy: { revision: "rest-1", rules: [{ id: "demo-items", effect: "allow", principals: { tenants: ["demo"] }, servers: ["items"], names: ["*"] }] } };
    texts = { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) };
    gateway = await startGateway({ adminToken: ADMIN_TOKEN, secrets: { ITEMS_API_TOKEN: API_TOKEN }, config: texts });
  });

  afterAll(async () => {
    await gateway?.stop();
    await api?.close();
    await sim?.stop();
  });

  const connect = async () => {
    const client = new Client({ name: "sluice-e2e", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${gateway.publicUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${DEMO_KEY}`, cookie: "session=caller" } } }));
    return client;
  };

  it("names the API's credential among the secrets `sluice serve` binds", () => {
    expect(secretsNamed(loadConfig(texts)).find((n) => n.name === "ITEMS_API_TOKEN")?.namedBy).toBe("gateway.yaml: mcp.servers[0].credential.secret (items)");
  });

  it("lists the configured tools under the server's name, with their schemas", async () => {
    const client = await connect();
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(["items.create_item", "items.get_item"]);
    expect(tools.find((t) => t.name === "items.get_item")).toMatchObject({ description: "One item by id", inputSchema: { type: "object", required: ["id"], properties: { id: { type: "string" } } } });
    expect(received).toEqual([]);
    await client.close();
  });

  it("calls the API with the configured credential, never the caller's, and trims the answer", async () => {
    received.length = 0;
    const client = await connect();
    const result = await client.callTool({ name: "items.get_item", arguments: { id: "42", verbose: true } });
    expect(result).toMatchObject({ structuredContent: { id: 42, title: "The answer", owner: { login: "ada" } }, content: [{ type: "text", text: '{"id":42,"title":"The answer","owner":{"login":"ada"}}' }] });
    expect(result.isError).toBeFalsy();
    expect(received).toHaveLength(1);
    const sent = received[0]!;
    expect(sent.method).toBe("GET");
    expect(sent.url).toBe("/v1/items/42?verbose=true");
    expect(sent.headers.authorization).toBe(`Bearer ${API_TOKEN}`);
    expect(JSON.stringify(sent.headers)).not.toContain(DEMO_KEY);
    expect(sent.headers.cookie).toBeUndefined();
    expect(Object.keys(sent.headers).filter((h) => h.startsWith("mcp-"))).toEqual([]);

    const created = await client.callTool({ name: "items.create_item", arguments: { title: "New", tags: ["a"] } });
    expect(created).toMatchObject({ structuredContent: { id: 7, created: { title: "New", tags: ["a"] } } });
    expect(received[1]).toMatchObject({ method: "POST", url: "/v1/items", body: '{"title":"New","tags":["a"]}' });
    await client.close();
  });

  it("reports the API's 4xx as a tool error, and refuses bad arguments and traversal before the API sees them", async () => {
    received.length = 0;
    const client = await connect();
    expect(await client.callTool({ name: "items.get_item", arguments: { id: "404" } })).toMatchObject({ isError: true, content: [{ type: "text", text: "HTTP 404: No such item" }] });
    expect(received).toHaveLength(1);
    await expect(client.callTool({ name: "items.get_item", arguments: { id: 42 } })).rejects.toThrow(/Argument 'id' must be of type string/);
    await expect(client.callTool({ name: "items.get_item", arguments: { id: "42", other: 1 } })).rejects.toThrow(/Argument 'other' is not an argument of this tool/);
    await expect(client.callTool({ name: "items.get_item", arguments: { id: ".." } })).rejects.toThrow(/not a valid path segment/);
    await expect(client.callTool({ name: "items.get_item", arguments: { id: "a/../../admin" } })).rejects.toThrow(/not a valid path segment/);
    expect(received).toHaveLength(1);
    await client.close();
  });
});
