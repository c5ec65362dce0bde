import { extractWWWAuthenticateParams } from "@modelcontextprotocol/client";
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from "jose";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../local-stack/ports.ts";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { startCountingToolServer, type CountingToolServer } from "./support/counting-tool-server.ts";
import { startLoopbackServer, type LoopbackServer } from "./support/loopback-server.ts";
import { ADMIN_TOKEN, backendsFor, bundledConfig, DEMO_KEY, expectNothingLeft, type Simulator } from "./support/stack.ts";

const ISSUER = "https://login.example.com/";
/** One call of `search` costs 0.01 USD. */
const PRICE_MICROS = 10_000;
/** Project `platform/agents-a` may spend three calls a day; each task of `platform/agents-b` two. */
const PROJECT_CALLS = 3;
const TASK_CALLS = 2;

/**
 * OAuth access tokens with a project claim, end to end: the token's `charge_to` claim charges its
 * caller to a project of its tenant exactly as an API key's `chargeTo` does — the project's budget
 * holds it, its tasks bind to the project and take the project's task cap — and a claim the tenant
 * has no project for is refused before anything is charged or sent.
 */
describe("OAuth access tokens charged to a team or project", () => {
  let sim: Simulator;
  let tools: CountingToolServer;
  let jwks: LoopbackServer;
  let gateway: RunningGateway;
  let resource: string;
  let privateKey: CryptoKey;

  beforeAll(async () => {
    const pair = await generateKeyPair("RS256", { extractable: true });
    privateKey = pair.privateKey;
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: "e2e-charge", alg: "RS256", use: "sig" };
    jwks = await startLoopbackServer(async (_req, _body, res) => void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: [jwk] })));
    [sim, tools] = await Promise.all([startSimulatorProcess({ apiKey: SIMULATOR_API_KEY }), startCountingToolServer({ search: { run: async () => ({ content: [{ type: "text", text: "ran search" }] }) } })]);
    const publicPort = await freePort();
    resource = `http://127.0.0.1:${publicPort}/mcp`;
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.mcp = {
      servers: [{ name: "tools", url: tools.url, era: "stateless" }],
    };
    g.auth = {
      oauth: {
        resource,
        issuers: [{ name: "agents", issuer: ISSUER, jwksUrl: `${jwks.origin}/jwks.json`, algorithms: ["RS256"], tenant: "demo", claims: { chargeTo: "charge_to" } }],
        requiredScopes: ["mcp:tools"],
      },
    };
    const p = bundledConfig("publication");
    const demo = p.tenants.find((t: any) => t.id === "demo");
    demo.teams[0].projects.push(
      { id: "agents-a", limits: { money: { limit: (PROJECT_CALLS * PRICE_MICROS) / 1_000_000, currency: "USD", period: "1d" } } },
      { id: "agents-b", taskLimits: { money: { limit: (TASK_CALLS * PRICE_MICROS) / 1_000_000, currency: "USD" } } },
    );
    p.mcp = {
      policy: { revision: "mcp-charge-1", rules: [{ id: "demo-tools", effect: "allow", principals: { tenants: ["demo"] }, servers: ["*"], names: ["*"] }] },
      prices: [{ id: "priced", servers: ["*"], names: ["*"], price: { version: "tools-1", currency: "USD", perCall: PRICE_MICROS / 1_000_000 } }],
    };
    gateway = await startGateway({ adminToken: ADMIN_TOKEN, publicPort, config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) } });
  });

  afterAll(async () => {
    try {
      if (gateway) await expectNothingLeft(gateway.adminUrl);
    } finally {
      await Promise.all([gateway?.stop(), sim?.stop(), tools?.http.close(), jwks?.close()]);
    }
  });

  const accessToken = (sub: string, chargeTo: unknown) => {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ scope: "mcp:tools", ...(chargeTo === undefined ? {} : { charge_to: chargeTo }) })
      .setProtectedHeader({ alg: "RS256", kid: "e2e-charge", typ: "at+jwt" })
      .setIssuer(ISSUER)
      .setAudience(resource)
      .setSubject(sub)
      .setIssuedAt(now)
      .setExpirationTime(now + 300)
      .sign(privateKey);
  };
  /** A raw 2026-07-28 tools/call of `search`, naming a task in `_meta` when given. */
  const search = async (bearer: string, taskId?: string) => {
    const res = await fetch(`${gateway.publicUrl}/mcp/tools`, {
      method: "POST",
      headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "search" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 9,
        method: "tools/call",
        params: { name: "search", arguments: {}, _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}, ...(taskId ? { "sluice.dev/taskId": taskId } : {}) } },
      }),
    });
    return { status: res.status, res, body: (await res.json()) as any };
  };
  const admin = async (path: string): Promise<any> => (await fetch(`${gateway.adminUrl}${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json();
  const money = async (scope: string) => (await admin(`/admin/budgets/demo/balance?scope=${encodeURIComponent(scope)}`)).balances[0]?.money;

  it("holds a token with a project claim to that project's budget: the spend shows on the project, and an exhausted project refuses the call unsent", async () => {
    const alice = await accessToken("alice", "platform/agents-a");
    for (let i = 0; i < PROJECT_CALLS; i++) expect((await search(alice)).body.result).toMatchObject({ content: [{ text: "ran search" }] });
    expect(tools.executions("search")).toBe(PROJECT_CALLS);
    // The project scope carries the spend, and so does the caller's own scope (no limit of its own).
    expect(await money("project:platform/agents-a")).toMatchObject({ limit: PROJECT_CALLS * PRICE_MICROS, spent: PROJECT_CALLS * PRICE_MICROS, held: 0, pending: 0 });
    const usage = await admin(`/admin/budgets/demo/usage?scope=${encodeURIComponent("key:agents:alice")}`);
    expect(usage.models).toEqual([expect.objectContaining({ model: "mcp:tools/search", attempts: PROJECT_CALLS, settledMicros: PROJECT_CALLS * PRICE_MICROS })]);
    // Another subject of the same project shares its budget: refused, never sent.
    const over = await search(await accessToken("carol", "platform/agents-a"));
    expect(over.status).toBe(429);
    expect(over.body.error).toMatchObject({ code: -32000, data: { code: "budget_exceeded" } });
    expect(over.body.error.message).toMatch(/project:platform\/agents-a/);
    expect(tools.executions("search")).toBe(PROJECT_CALLS);
    // A token of another project is not held to it.
    expect((await search(await accessToken("alice", "platform/agents-b"))).body.result).toBeDefined();
    // The access line names the charge target beside the caller.
    expect(gateway.output()).toMatch(/"kind":"request".*"tenant":"demo","key":"agents:alice","chargeTo":"platform\/agents-a"/);
  });

  it("binds a token's task to its project and caps it by the project's taskLimits; another project's token or key presenting it is refused task_not_yours", async () => {
    const bob = await accessToken("bob", "platform/agents-b");
    const first = await search(bob, "oauth-job-1");
    expect(first.body.result._meta["sluice.dev/task"]).toEqual({ taskId: "oauth-job-1", spent: { money: PRICE_MICROS }, remaining: { money: (TASK_CALLS - 1) * PRICE_MICROS } });
    const before = tools.executions("search");
    // A token of another project of the same tenant, and an API key of another project: not theirs.
    for (const other of [await accessToken("bob", "platform/playground"), DEMO_KEY]) {
      const refused = await search(other, "oauth-job-1");
      expect(refused.status).toBe(403);
      expect(refused.body.error).toMatchObject({ code: -32000, data: { code: "task_not_yours" } });
    }
    expect(tools.executions("search")).toBe(before);
    // Another subject of the same project may go on with it, up to the project's task cap.
    expect((await search(await accessToken("dave", "platform/agents-b"), "oauth-job-1")).body.result).toBeDefined();
    const capped = await search(bob, "oauth-job-1");
    expect(capped.body.error).toMatchObject({ data: { code: "budget_exceeded" } });
    expect(capped.body.error.message).toMatch(/task:oauth-job-1/);
    expect(tools.executions("search")).toBe(before + 1);
    // The call ledger records the task's calls with their caller's charge target (written off the
    // request path: poll until all three are in); the refused foreign calls are not the task's
    // (their access lines keep them), and the task names the project it is bound to.
    const deadline = Date.now() + 15_000;
    let task: any;
    while (!(task?.calls?.length >= 3) && Date.now() < deadline) task = await admin("/admin/tasks/oauth-job-1?tenant=demo");
    // (Sorted: two calls may start within the same millisecond.)
    expect(task.calls.map((c: any) => `${c.key} ${c.chargeTo} ${c.errorCode ?? "ok"}`).sort()).toEqual(["agents:bob platform/agents-b ok", "agents:dave platform/agents-b ok", "agents:bob platform/agents-b budget_exceeded"].sort());
    expect(task.task).toMatchObject({ project: "platform/agents-b", calls: 3 });
  });

  it("refuses a claim naming a project the tenant lacks with 403 tool_not_allowed, and a missing or malformed claim 401 invalid_token: never served uncharged", async () => {
    const before = tools.executions("search");
    for (const unknown of ["platform/nope", "sales"]) {
      const r = await search(await accessToken("erin", unknown));
      expect(r.status).toBe(403);
      expect(r.body.error).toMatchObject({ code: -32000, data: { code: "tool_not_allowed", retryable: false } });
      expect(r.body.error.message).toContain(`'${unknown}', which tenant 'demo' does not have`);
      // Not a scope problem: no challenge sends the client to its issuer for a step-up.
      expect(r.res.headers.get("www-authenticate")).toBeNull();
    }
    for (const bad of [undefined, "Platform/Agents-A", 7, "platform/agents-a/extra"]) {
      const r = await search(await accessToken("erin", bad));
      expect(r.status).toBe(401);
      expect(r.body.error.data.code).toBe("invalid_token");
      expect(extractWWWAuthenticateParams(r.res)).toMatchObject({ error: "invalid_token" });
    }
    expect(tools.executions("search")).toBe(before);
  });
});
