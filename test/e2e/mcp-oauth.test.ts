import { Client, discoverOAuthProtectedResourceMetadata, extractWWWAuthenticateParams, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { Client as LegacyClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as LegacyTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from "jose";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../local-stack/ports.ts";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { startLoopbackServer, type LoopbackServer } from "./support/loopback-server.ts";
import { startModernMcpTestServer, type ModernMcpTestServer } from "./support/mcp-modern-server.ts";
import { ADMIN_TOKEN, backendsFor, bundledConfig, DEMO_KEY, type Simulator } from "./support/stack.ts";

const ISSUER = "https://login.example.com/";
const META = { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} };

/**
 * The MCP endpoint as an OAuth 2.1 resource server, end to end: a JWKS served by the test on
 * loopback, the gateway fetching it through its egress guard, the official SDK 2.x client
 * presenting a signed access token, and a 2026-07-28 server upstream that must never see it.
 */
describe("MCP through the gateway with OAuth access tokens", () => {
  let sim: Simulator;
  let modern: ModernMcpTestServer;
  let jwks: LoopbackServer;
  let gateway: RunningGateway;
  let resource: string;
  let privateKey: CryptoKey;
  const jwksHits: { url: string | undefined; authorization: string | undefined }[] = [];

  beforeAll(async () => {
    const pair = await generateKeyPair("RS256", { extractable: true });
    privateKey = pair.privateKey;
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: "e2e-1", alg: "RS256", use: "sig" };
    jwks = await startLoopbackServer(async (req, _body, res) => {
      jwksHits.push({ url: req.url, authorization: req.headers.authorization });
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: [jwk] }));
    });
    [sim, modern] = await Promise.all([startSimulatorProcess({ apiKey: SIMULATOR_API_KEY }), startModernMcpTestServer()]);
    const publicPort = await freePort();
    resource = `http://127.0.0.1:${publicPort}/mcp`;
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.mcp = {
      servers: [{ name: "modern", url: modern.url, era: "stateless" }],
      sessions: { secrets: ["MCP_SESSION_SECRET"] },
    };
    g.auth = {
      oauth: {
        resource,
        issuers: [{ name: "corp", issuer: ISSUER, jwksUrl: `${jwks.origin}/jwks.json`, algorithms: ["RS256"], tenant: "demo" }],
        requiredScopes: ["mcp:tools"],
      },
    };
    const p = bundledConfig("publication");
    // Token callers are keys `corp:<subject>` to the policy: alice is allowed, bob is not.
    p.mcp = { policy: { revision: "mcp-oauth-1", rules: [{ id: "alice-and-demo", effect: "allow", principals: { tenants: ["demo"], keys: ["corp:alice", "demo"] }, servers: ["*"], names: ["*"] }] } };
    gateway = await startGateway({
      adminToken: ADMIN_TOKEN,
      publicPort,
      secretNames: ["MCP_SESSION_SECRET"],
      secrets: { MCP_SESSION_SECRET: "mcp-session-secret-for-the-oauth-e2e-0123456789" },
      config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) },
    });
  });

  afterAll(async () => {
    await gateway?.stop();
    await Promise.all([sim?.stop(), modern?.stop(), jwks?.close()]);
  });

  const accessToken = (claims: { sub?: string; scope?: string; aud?: string; expiresIn?: number } = {}) => {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ scope: claims.scope ?? "mcp:tools" })
      .setProtectedHeader({ alg: "RS256", kid: "e2e-1", typ: "at+jwt" })
      .setIssuer(ISSUER)
      .setAudience(claims.aud ?? resource)
      .setSubject(claims.sub ?? "alice")
      .setIssuedAt(now)
      .setExpirationTime(now + (claims.expiresIn ?? 300))
      .sign(privateKey);
  };

  const connect = async (bearer: string, path = "/mcp") => {
    const client = new Client({ name: "sluice-e2e-oauth", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${gateway.publicUrl}${path}`), { requestInit: { headers: { authorization: `Bearer ${bearer}` } } }));
    return client;
  };

  const listTools = (headers: Record<string, string>) =>
    fetch(`${gateway.publicUrl}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list", ...headers },
      body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/list", params: { _meta: META } }),
    });

  const metadataUrl = () => `${gateway.publicUrl}/.well-known/oauth-protected-resource/mcp`;

  it("serves RFC 9728 protected resource metadata at the path-inserted and the root well-known URL, found by the SDK's discovery", async () => {
    const expected = { resource, authorization_servers: [ISSUER], scopes_supported: ["mcp:tools"], bearer_methods_supported: ["header"], resource_name: "Sluice MCP gateway" };
    for (const url of [metadataUrl(), `${gateway.publicUrl}/.well-known/oauth-protected-resource`]) {
      const res = await fetch(url);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/application\/json/);
      expect(await res.json()).toEqual(expected);
    }
    // The SDK builds the well-known URL from the server URL itself (no header to go by).
    expect(await discoverOAuthProtectedResourceMetadata(resource)).toMatchObject(expected);
  });

  it("answers a request without a credential 401 with WWW-Authenticate naming the metadata and the scope", async () => {
    const res = await listTools({});
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe(`Bearer scope="mcp:tools", resource_metadata="${metadataUrl()}"`);
    expect(extractWWWAuthenticateParams(res)).toEqual({ resourceMetadataUrl: new URL(metadataUrl()), scope: "mcp:tools" });
    expect(await res.json()).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32000, data: { code: "missing_api_key" } } });
  });

  it("answers a token that is not accepted (another audience, expired) 401 invalid_token with the same pointer", async () => {
    for (const bad of [await accessToken({ aud: "https://elsewhere.example.com/mcp" }), await accessToken({ expiresIn: -120 })]) {
      const res = await listTools({ authorization: `Bearer ${bad}` });
      expect(res.status).toBe(401);
      expect(extractWWWAuthenticateParams(res)).toMatchObject({ error: "invalid_token", resourceMetadataUrl: new URL(metadataUrl()), scope: "mcp:tools" });
      expect(((await res.json()) as any).error.data.code).toBe("invalid_token");
    }
  });

  it("answers a valid token without the required scope 403 insufficient_scope, naming the scope", async () => {
    const res = await listTools({ authorization: `Bearer ${await accessToken({ scope: "openid profile" })}` });
    expect(res.status).toBe(403);
    expect(extractWWWAuthenticateParams(res)).toMatchObject({ error: "insufficient_scope", scope: "mcp:tools", resourceMetadataUrl: new URL(metadataUrl()) });
    expect(await res.json()).toMatchObject({ error: { code: -32000, data: { code: "insufficient_scope" } } });
  });

  it("lets the SDK 2.x client list and call tools with a valid token; the upstream server never sees the token", async () => {
    const token = await accessToken();
    const seenBefore = modern.seen.length;
    const client = await connect(token);
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(["modern.echo", "modern.confirm", "modern.count"]);
    expect(await client.callTool({ name: "modern.echo", arguments: { text: "with a token" } })).toMatchObject({ content: [{ type: "text", text: "with a token" }] });
    await client.close();
    const upstream = modern.seen.slice(seenBefore);
    expect(upstream.map((s) => s.body?.method)).toEqual(expect.arrayContaining(["tools/list", "tools/call"]));
    for (const s of upstream) expect(s.headers.authorization).toBeUndefined();
    expect(JSON.stringify(upstream)).not.toContain(token);
    expect(JSON.stringify(upstream)).not.toContain(token.split(".")[2]);
    // The keys came from the test's JWKS server, fetched by the gateway without any caller credential.
    expect(jwksHits.length).toBeGreaterThanOrEqual(1);
    expect(jwksHits.every((h) => h.url === "/jwks.json" && h.authorization === undefined)).toBe(true);
    // The access line names the token's caller as the policy saw it.
    expect(gateway.output()).toMatch(/"kind":"request".*"tenant":"demo","key":"corp:alice"/);
  });

  it("serves a stateful-era (SDK 1.x) client with a token too: its session is bound to the token's principal", async () => {
    const token = await accessToken();
    const client = new LegacyClient({ name: "sluice-e2e-oauth-legacy", version: "1.0.0" });
    const transport = new LegacyTransport(new URL(resource), { requestInit: { headers: { authorization: `Bearer ${token}` } } });
    await client.connect(transport);
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(["modern.echo", "modern.confirm", "modern.count"]);
    expect(await client.callTool({ name: "modern.echo", arguments: { text: "2025 client, token" } })).toMatchObject({ content: [{ type: "text", text: "2025 client, token" }] });
    // The same session under another subject's token is not that caller's session.
    const other = await fetch(resource, {
      method: "POST",
      headers: { authorization: `Bearer ${await accessToken({ sub: "bob" })}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-session-id": transport.sessionId!, "mcp-protocol-version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });
    expect(other.status).toBe(404);
    await client.close();
  });

  it("matches the policy on the token's subject: bob sees no tools and is refused a call", async () => {
    const client = await connect(await accessToken({ sub: "bob" }));
    expect((await client.listTools()).tools).toEqual([]);
    await expect(client.callTool({ name: "modern.echo", arguments: { text: "x" } })).rejects.toThrow(/no rule allows it/);
    await client.close();
  });

  it("still serves API keys beside the tokens", async () => {
    const client = await connect(DEMO_KEY, "/mcp/modern");
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(["echo", "confirm", "count"]);
    expect(await client.callTool({ name: "echo", arguments: { text: "with a key" } })).toMatchObject({ content: [{ type: "text", text: "with a key" }] });
    await client.close();
    const wrongKey = await listTools({ authorization: "Bearer sk-not-a-key" });
    expect(wrongKey.status).toBe(401);
    expect(extractWWWAuthenticateParams(wrongKey)).toMatchObject({ error: "invalid_token", resourceMetadataUrl: new URL(metadataUrl()) });
  });
});
