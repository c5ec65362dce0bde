import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshFetch } from "./support/raw-http.ts";
import { stringify } from "yaml";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { slowly, startCountingToolServer } from "./support/counting-tool-server.ts";
import type { LoopbackServer } from "./support/loopback-server.ts";
import { ADMIN_TOKEN, allowingSimulators, backendsFor, bundledConfig, expectNothingLeft, perProtocolConfig, startProtocolSimulator, type ProtocolSimulator, type Simulator } from "./support/stack.ts";

// Bursts of concurrent calls seconds apart: each takes a fresh connection (see freshFetch).
const fetch = freshFetch;

const KEYS = { agent: "sk-e2e-agent", sibling: "sk-e2e-sibling", strict: "sk-e2e-strict", rival: "sk-e2e-rival" } as const;
const sha = (k: string) => createHash("sha256").update(k).digest("hex");

/** K worst cases fit one task's tokens cap exactly: bound of the input bytes + 8, plus max_tokens. */
const K = 5;
// Slow enough that all 40 racing calls are admitted or refused before the first settles (a settled
// call frees what its actual usage did not spend); at 1 s a saturated machine let a sixth in.
const PROMPT = "step [[sim latency-ms=3000]]";
const MAX_TOKENS = 40;
const WORST = 8 + Buffer.byteLength(PROMPT) + MAX_TOKENS;

let sim: ProtocolSimulator;
let gateway: RunningGateway;

beforeAll(async () => {
  sim = await startProtocolSimulator();
  const { backends, publication: pub } = perProtocolConfig(sim.url, ["chat", "streaming", "stream-usage", "tools"], { version: "e2e-1", currency: "USD", inputPerMTok: 3, outputPerMTok: 15 });
  pub.tenants = [
    {
      id: "acme",
      limits: { money: { limit: 100, currency: "USD", period: "30d" } },
      teams: [{ id: "agents", projects: [{ id: "loop", taskLimits: { tokens: { limit: K * WORST } } }, { id: "sibling" }] }],
      endUsers: { header: "x-sluice-end-user", limits: { money: { limit: 1, currency: "USD", period: "1d" } } },
      apiKeys: [
        { id: "agent", sha256: sha(KEYS.agent), entrypoints: ["*"], chargeTo: "agents/loop" },
        { id: "sibling", sha256: sha(KEYS.sibling), entrypoints: ["*"], chargeTo: "agents/sibling" },
        { id: "strict", sha256: sha(KEYS.strict), entrypoints: ["*"], chargeTo: "agents/loop", requireAttribution: ["task", "endUser"] },
      ],
    },
    { id: "rival", limits: { money: { limit: 100, currency: "USD", period: "30d" } }, apiKeys: [{ id: "rival", sha256: sha(KEYS.rival), entrypoints: ["*"] }] },
  ];
  const gw = allowingSimulators(bundledConfig("gateway"), sim.url);
  gw.breaker = { enabled: false };
  gateway = await startGateway({ adminToken: ADMIN_TOKEN, secrets: sim.secrets, config: { backends: stringify(backends), publication: stringify(pub), gateway: stringify(gw) } });
});

afterAll(async () => {
  try {
    if (gateway) await expectNothingLeft(gateway.adminUrl);
  } finally {
    await Promise.all([gateway?.stop(), sim?.stop()]);
  }
});

const chat = (key: string, headers: Record<string, string> = {}) =>
  fetch(`${gateway.publicUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: "via-openai-chat", max_tokens: MAX_TOKENS, messages: [{ role: "user", content: PROMPT }] }),
  });
const served = async () => ((await (await fetch(`${sim.url}/__sim/stats`)).json()) as { total: number }).total;
const task = (id: string, more: Record<string, string> = {}) => ({ "x-sluice-task-id": id, ...more });

describe("per-task budgets and task binding", () => {
  it(`admits exactly ${K} of 40 parallel calls of one task whose cap fits ${K} worst cases`, async () => {
    const before = await served();
    const answers = await Promise.all(Array.from({ length: 40 }, () => chat(KEYS.agent, task("loop-1"))));
    const ok = answers.filter((r) => r.status === 200);
    expect(ok).toHaveLength(K);
    for (const r of answers.filter((a) => a.status !== 200)) {
      expect(r.status).toBe(429);
      expect(r.headers.get("x-sluice-error-code")).toBe("token_limit_exceeded");
      const body = (await r.json()) as any;
      expect(body.error.details[0]).toMatchObject({ scope: "task:loop-1", metric: "tokens" });
    }
    let used = 0;
    for (const r of ok) used += ((await r.json()) as any).usage.total_tokens as number;
    // The provider saw exactly the admitted calls, and they fit the task.
    expect((await served()) - before).toBe(K);
    expect(used).toBeLessThanOrEqual(K * WORST);
  });

  it("tells the caller the task's committed spend and what remains", async () => {
    const res = await chat(KEYS.agent, task("loop-2"));
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    expect(res.headers.get("x-sluice-task-spent")).toBe(`tokens=${WORST}`);
    expect(res.headers.get("x-sluice-task-remaining")).toBe(`tokens=${(K - 1) * WORST}`);
  });

  it("lowers the task's cap for one request by x-sluice-task-budget, in currency units", async () => {
    const res = await chat(KEYS.agent, task("loop-3", { "x-sluice-task-budget": "0.01" }));
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    // Money figures are amounts of the publication's currency, at most to the micro-unit.
    const spent = /money:USD=(\d+(?:\.\d{1,6})?)(?:,|$)/.exec(res.headers.get("x-sluice-task-spent") ?? "")?.[1];
    const remaining = /money:USD=(\d+(?:\.\d{1,6})?)(?:,|$)/.exec(res.headers.get("x-sluice-task-remaining") ?? "")?.[1];
    expect(Number(spent)).toBeGreaterThan(0);
    expect(Math.round(Number(spent) * 1e6) + Math.round(Number(remaining) * 1e6)).toBe(10_000);
    const bad = await chat(KEYS.agent, task("loop-3", { "x-sluice-task-budget": "lots" }));
    expect(bad.status).toBe(400);
    expect(bad.headers.get("x-sluice-error-code")).toBe("invalid_request");
    await bad.arrayBuffer();
  });

  it("scopes a task id by tenant: another tenant using it, or a child of it, gets its own task, and claiming it first takes nothing", async () => {
    const mine = await chat(KEYS.agent, task("owned-1"));
    expect(mine.status).toBe(200);
    await mine.arrayBuffer();
    // No refusal tells the rival that acme uses "owned-1": its call is served as on a new id.
    const before = await served();
    const same = await chat(KEYS.rival, task("owned-1"));
    expect(same.status).toBe(200);
    await same.arrayBuffer();
    const child = await chat(KEYS.rival, task("rival-child", { "x-sluice-parent-task-id": "owned-1" }));
    expect(child.status).toBe(200);
    await child.arrayBuffer();
    expect((await served()) - before).toBe(2);
    // An id the rival used first is still a new task for acme: nothing committed to it yet.
    const claimed = await chat(KEYS.rival, task("claimed-first"));
    expect(claimed.status).toBe(200);
    await claimed.arrayBuffer();
    const fresh = await chat(KEYS.agent, task("claimed-first"));
    expect(fresh.status).toBe(200);
    await fresh.arrayBuffer();
    expect(fresh.headers.get("x-sluice-task-spent")).toBe(`tokens=${WORST}`);
    expect(fresh.headers.get("x-sluice-task-remaining")).toBe(`tokens=${(K - 1) * WORST}`);
  });

  it("refuses a key of another project of the same tenant", async () => {
    const first = await chat(KEYS.agent, task("owned-2"));
    expect(first.status).toBe(200);
    await first.arrayBuffer();
    const other = await chat(KEYS.sibling, task("owned-2"));
    expect(other.status).toBe(403);
    expect(other.headers.get("x-sluice-error-code")).toBe("task_not_yours");
    await other.arrayBuffer();
  });

  it("refuses a request that leaves out required attribution instead of skipping the limit", async () => {
    const noTask = await chat(KEYS.strict, { "x-sluice-end-user": "u-1" });
    expect(noTask.status).toBe(400);
    expect(noTask.headers.get("x-sluice-error-code")).toBe("attribution_required");
    await noTask.arrayBuffer();
    const noUser = await chat(KEYS.strict, task("strict-1"));
    expect(noUser.status).toBe(400);
    expect(noUser.headers.get("x-sluice-error-code")).toBe("attribution_required");
    expect(((await noUser.json()) as any).error.message).toContain("x-sluice-end-user");
    const both = await chat(KEYS.strict, task("strict-1", { "x-sluice-end-user": "u-1" }));
    expect(both.status).toBe(200);
    await both.arrayBuffer();
  });
});

/** The test's tool server: `search` counts its executions, slow so that calls overlap. */
function startCountingServer() {
  return startCountingToolServer({ search: { run: async () => (await slowly(150), { content: [{ type: "text", text: "ran search" }] }) } });
}

describe("one task's cap across model calls and MCP tool calls", () => {
  const AGENT = "sk-e2e-mcp-agent";
  /** A tool call costs 0.01 USD; the task's cap is 0.03 USD. */
  const PRICE_MICROS = 10_000;
  let msim: Simulator;
  let tools: Awaited<ReturnType<typeof startCountingServer>>;
  let server: LoopbackServer;
  let gw: RunningGateway;

  beforeAll(async () => {
    [msim, tools] = await Promise.all([startSimulatorProcess({ apiKey: SIMULATOR_API_KEY }), startCountingServer()]);
    server = tools.http;
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.mcp = { servers: [{ name: "tools", url: tools.url, era: "stateless" }] };
    const p = bundledConfig("publication");
    const demo = p.tenants.find((t: any) => t.id === "demo");
    demo.teams[0].projects.push({ id: "agents", taskLimits: { money: { limit: (3 * PRICE_MICROS) / 1_000_000, currency: "USD" } } });
    demo.apiKeys.push({ id: "mcp-agent", sha256: sha(AGENT), entrypoints: ["*"], chargeTo: "platform/agents" });
    p.mcp = {
      policy: { revision: "mcp-1", rules: [{ id: "demo-tools", effect: "allow", principals: { tenants: ["demo"] }, servers: ["*"], names: ["*"] }] },
      prices: [{ id: "priced", servers: ["*"], names: ["*"], price: { version: "tools-1", currency: "USD", perCall: PRICE_MICROS / 1_000_000 } }],
    };
    gw = await startGateway({ adminToken: ADMIN_TOKEN, config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(msim.url)) } });
  });

  afterAll(async () => {
    try {
      if (gw) await expectNothingLeft(gw.adminUrl);
    } finally {
      await Promise.all([gw?.stop(), msim?.stop(), server?.close()]);
    }
  });

  /** A raw 2026-07-28 tools/call naming its task in `_meta`. */
  const toolCall = async (taskId: string) => {
    const res = await fetch(`${gw.publicUrl}/mcp/tools`, {
      method: "POST",
      headers: { authorization: `Bearer ${AGENT}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "search" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 7,
        method: "tools/call",
        params: { name: "search", arguments: {}, _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}, "sluice.dev/taskId": taskId } },
      }),
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  it("a model call and concurrent tool calls of one task never spend past its cap; tool results carry the task's figures", async () => {
    const model = await fetch(`${gw.publicUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${AGENT}`, "content-type": "application/json", "x-sluice-task-id": "mixed-1" },
      body: JSON.stringify({ model: "sluice-chat", max_tokens: 20, messages: [{ role: "user", content: "hi" }] }),
    });
    expect(model.status).toBe(200);
    await model.arrayBuffer();
    const modelMicros = Math.round(Number(/money:USD=(\d+(?:\.\d{1,6})?)(?:,|$)/.exec(model.headers.get("x-sluice-task-spent") ?? "")?.[1]) * 1e6);
    expect(modelMicros).toBeGreaterThan(0);
    expect(modelMicros).toBeLessThan(PRICE_MICROS);
    // What the model call committed leaves room for two tool calls, not three.
    const answers = await Promise.all(Array.from({ length: 10 }, () => toolCall("mixed-1")));
    const ran = answers.filter((a) => a.body.result !== undefined);
    expect(ran).toHaveLength(2);
    expect(tools.executions("search")).toBe(2);
    for (const a of answers.filter((x) => x.body.error !== undefined)) expect(a.body.error.data.code).toBe("budget_exceeded");
    for (const a of ran) {
      const figures = a.body.result._meta["sluice.dev/task"];
      expect(figures.taskId).toBe("mixed-1");
      expect(figures.spent.money + figures.remaining.money).toBe(3 * PRICE_MICROS);
      expect(figures.spent.money).toBeGreaterThan(PRICE_MICROS);
    }
  });

  it("refuses a tool call naming another project's task", async () => {
    const res = await fetch(`${gw.publicUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: "Bearer sk-sluice-demo", "content-type": "application/json", "x-sluice-task-id": "playground-1" },
      body: JSON.stringify({ model: "sluice-chat", max_tokens: 20, messages: [{ role: "user", content: "hi" }] }),
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const before = tools.executions("search");
    const refused = await toolCall("playground-1");
    expect(refused.body.error).toMatchObject({ code: -32000, data: { code: "task_not_yours" } });
    expect(tools.executions("search")).toBe(before);
  });
});
