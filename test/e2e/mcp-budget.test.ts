import { createHash } from "node:crypto";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../local-stack/ports.ts";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { slowly, startCountingToolServer } from "./support/counting-tool-server.ts";
import type { LoopbackServer } from "./support/loopback-server.ts";
import { ADMIN_TOKEN, backendsFor, bundledConfig, expectNothingLeft, type Simulator } from "./support/stack.ts";

const KEYS = { budget: "sk-e2e-tools", zero: "sk-e2e-tools-zero", rate: "sk-e2e-tools-rate", cut: "sk-e2e-tools-cut" } as const;
const sha = (k: string) => createHash("sha256").update(k).digest("hex");
/** One call of `search` costs 0.01 USD; the key's budget holds exactly five. */
const PRICE_MICROS = 10_000;
const BUDGET_CALLS = 5;

/**
 * The test's tool server: `search` runs (slowly, so concurrent calls overlap), `fails` runs and
 * reports `isError`, `cut` (unlisted) runs and then drops the connection without an answer, and
 * any other name is an unknown tool (-32602: refused, never run).
 */
function startCountingServer() {
  const ran = (name: string, extra: Record<string, unknown> = {}) => ({ content: [{ type: "text", text: `ran ${name}` }], ...extra });
  return startCountingToolServer({
    search: { run: async () => (await slowly(150), ran("search")) },
    fails: { run: async () => ran("fails", { isError: true }) },
    limited: { run: async () => ran("limited") },
    cut: { unlisted: true, run: async () => "cut" },
  });
}

describe("MCP tool prices, limits and retries through the gateway", () => {
  let sim: Simulator;
  let tools: Awaited<ReturnType<typeof startCountingServer>>;
  let server: LoopbackServer;
  let gateway: RunningGateway;

  beforeAll(async () => {
    [sim, tools] = await Promise.all([startSimulatorProcess({ apiKey: SIMULATOR_API_KEY }), startCountingServer()]);
    server = tools.http;
    // Nothing listens there: with the connect check, a call to it is provably never sent.
    const deadPort = await freePort();
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.mcp = {
      servers: [
        { name: "tools", url: tools.url, era: "stateless" },
        { name: "down", url: `http://127.0.0.1:${deadPort}/mcp`, era: "stateless", connectCheck: true },
      ],
    };
    const p = bundledConfig("publication");
    const demo = p.tenants.find((t: any) => t.id === "demo");
    demo.apiKeys.push(
      { id: "tools", sha256: sha(KEYS.budget), entrypoints: ["*"], limits: { money: { limit: (BUDGET_CALLS * PRICE_MICROS) / 1_000_000, currency: "USD", period: "1d" } } },
      { id: "tools-zero", sha256: sha(KEYS.zero), entrypoints: ["*"], limits: { money: { limit: 1, currency: "USD", period: "1d" } } },
      { id: "tools-rate", sha256: sha(KEYS.rate), entrypoints: ["*"] },
      { id: "tools-cut", sha256: sha(KEYS.cut), entrypoints: ["*"], limits: { money: { limit: 1, currency: "USD", period: "1d" } } },
    );
    p.mcp = {
      policy: { revision: "mcp-1", rules: [{ id: "demo-tools", effect: "allow", principals: { tenants: ["demo"] }, servers: ["*"], names: ["*"] }] },
      prices: [
        { id: "limited", servers: ["tools"], names: ["limited"], requests: { perMinute: 1, burst: 2 } },
        { id: "priced", servers: ["*"], names: ["*"], price: { version: "tools-2026-12", currency: "USD", perCall: PRICE_MICROS / 1_000_000 } },
      ],
    };
    gateway = await startGateway({ adminToken: ADMIN_TOKEN, config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) } });
  });

  afterAll(async () => {
    try {
      if (gateway) await expectNothingLeft(gateway.adminUrl);
    } finally {
      await Promise.all([gateway?.stop(), sim?.stop(), server?.close()]);
    }
  });

  const connect = async (key: string, path = "/mcp/tools") => {
    const client = new Client({ name: "sluice-e2e", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${gateway.publicUrl}${path}`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
    return client;
  };
  const admin = async (path: string): Promise<any> => (await fetch(`${gateway.adminUrl}${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json();
  const money = async (scope: string) => (await admin(`/admin/budgets/demo/balance?scope=${encodeURIComponent(scope)}`)).balances[0].money;
  /** The access lines of MCP requests the gateway wrote so far. */
  const mcpLines = () =>
    gateway
      .output()
      .split("\n")
      .filter((l) => l.startsWith("{") && l.includes('"kind":"request"') && l.includes('"mcp":'))
      .map((l) => JSON.parse(l) as { mcp: { server?: string; target?: string; charge?: { attemptId: string; settlement?: string; micros: number } } });
  /** A raw 2026-07-28 tools/call, for the exact JSON-RPC error. */
  const rawCall = async (key: string, name: string, path = "/mcp/tools") => {
    const res = await fetch(`${gateway.publicUrl}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": name },
      body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name, arguments: {}, _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } } }),
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  it("never lets concurrent priced calls exceed the budget, and the refused ones never reach the server", async () => {
    const client = await connect(KEYS.budget);
    const settled = await Promise.allSettled(Array.from({ length: 3 * BUDGET_CALLS }, () => client.callTool({ name: "search", arguments: {} })));
    const ok = settled.filter((s) => s.status === "fulfilled").length;
    const refused = settled.filter((s): s is PromiseRejectedResult => s.status === "rejected");
    expect(ok).toBeGreaterThan(0);
    expect(ok).toBeLessThanOrEqual(BUDGET_CALLS);
    // Exactly the admitted calls ran upstream.
    expect(tools.executions("search")).toBe(ok);
    for (const r of refused) expect(String(r.reason)).toMatch(/budget of key:tools for this period does not cover this request/);
    // Once the budget is spent, a call is refused with the model path's code, and nothing is sent.
    while (tools.executions("search") < BUDGET_CALLS) await client.callTool({ name: "search", arguments: {} });
    const over = await rawCall(KEYS.budget, "search");
    expect(over.status).toBe(429);
    expect(over.body.error).toMatchObject({ code: -32000, data: { code: "budget_exceeded" } });
    expect(tools.executions("search")).toBe(BUDGET_CALLS);
    expect(await money("key:tools")).toMatchObject({ limit: BUDGET_CALLS * PRICE_MICROS, spent: BUDGET_CALLS * PRICE_MICROS, held: 0, pending: 0 });
    await client.close();
    // The access line of a call records its charge: rule, reservation, amount, price version, settlement.
    expect(gateway.output()).toMatch(/"charge":\{"rule":"priced","attemptId":"att_[0-9a-f]{32}","micros":10000,"currency":"USD","priceVersion":"tools-2026-12","settlement":"charged"\}/);
    // The ledger's usage report names the tool and the price version.
    const usage = await admin("/admin/budgets/demo/usage?scope=key:tools");
    expect(JSON.stringify(usage)).toContain("mcp:tools/search");
  });

  it("charges a call whose tool reported failure, and releases calls proven not to have run", async () => {
    const client = await connect(KEYS.zero);
    // A scope the ledger has not seen yet shows no limits (they travel with its first reservation).
    const before = (await money("key:tools-zero"))?.spent ?? 0;
    // The tool ran and said it failed: the server answered, so the call is charged.
    expect(await client.callTool({ name: "fails", arguments: {} })).toMatchObject({ isError: true });
    expect(tools.executions("fails")).toBe(1);
    expect((await money("key:tools-zero")).spent).toBe(before + PRICE_MICROS);
    // An unknown tool (-32602): refused before it ran, released; the server's code kept, in-band.
    const unknown = await rawCall(KEYS.zero, "nosuch");
    expect(unknown.body.error.code).toBe(-32602);
    expect(unknown.body.error.data.code).toBe("invalid_request");
    // A server whose connection does not open: never sent, released (and tried once more, as it is known-zero).
    const down = await rawCall(KEYS.zero, "anything", "/mcp/down");
    expect(down.body.error.data.code).toBe("upstream_unreachable");
    expect(await money("key:tools-zero")).toMatchObject({ spent: before + PRICE_MICROS, held: 0, pending: 0 });
    const lines = mcpLines();
    expect(lines.find((l) => l.mcp.target === "nosuch")?.mcp.charge).toMatchObject({ micros: PRICE_MICROS, settlement: "released" });
    expect(lines.find((l) => l.mcp.server === "down")?.mcp.charge).toMatchObject({ micros: PRICE_MICROS, settlement: "released" });
    await client.close();
  });

  it("limits each key's calls of a rate-limited tool in a scope of the key and rule", async () => {
    const first = await rawCall(KEYS.rate, "limited");
    const second = await rawCall(KEYS.rate, "limited");
    expect([first.status, second.status]).toEqual([200, 200]);
    const third = await rawCall(KEYS.rate, "limited");
    expect(third.status).toBe(429);
    expect(third.body.error).toMatchObject({ code: -32000, data: { code: "request_rate_exceeded" } });
    expect(third.body.error.message).toContain("key:tools-rate/tools:limited");
    expect(tools.executions("limited")).toBe(2);
    // Another key has its own bucket.
    expect((await rawCall(KEYS.zero, "limited")).status).toBe(200);
  });

  it("never retries a call that may have run, and holds its price for reconciliation", async () => {
    const cut = await rawCall(KEYS.cut, "cut");
    expect(cut.body.error.data.code).toBe("upstream_unreachable");
    // The connection failed after the call went out: it ran once and was not sent again.
    expect(tools.executions("cut")).toBe(1);
    expect(await money("key:tools-cut")).toMatchObject({ spent: 0, held: PRICE_MICROS, pending: PRICE_MICROS });
    const charge = mcpLines().find((l) => l.mcp.target === "cut")?.mcp.charge;
    expect(charge?.settlement).toBe("pending_reconciliation");
    const { pending } = await admin("/admin/budgets/demo/reconciliations");
    expect(pending.map((a: { attemptId: string }) => a.attemptId)).toContain(charge?.attemptId);
  });
});
