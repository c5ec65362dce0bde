import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type GatewayOptions, type RunningGateway } from "../../local-stack/stack.ts";
import { startMcpTestServer, type McpTestServer } from "./support/mcp-test-server.ts";
import { ADMIN_TOKEN, backendsFor, bundledConfig, DEMO_KEY, expectNothingLeft, type Simulator } from "./support/stack.ts";

const AGENT_KEY = "sk-e2e-agent";
const VERIFIER_TOKEN = "e2e-verifier-token";
const PARENT = "task-e2e-parent";
const CHILD = "task-e2e-child";
const OTHER = "task-e2e-other";
/** One echo call costs 0.002 USD. */
const TOOL_MICROS = 2_000;

/**
 * The call ledger end to end: a scripted agent run (two sessions, several turns, a parent task
 * and a child, model calls with a fallback and an unknown outcome, allowed and denied MCP tool
 * calls) through a real gateway, then its rollups checked against the sums of its attempts and
 * against the budget ledger, the drill-down, the audit trail, the outcome and a key's own view.
 */
describe("the call ledger and audit trail", () => {
  let sim: Simulator;
  let tools: McpTestServer;
  let gateway: RunningGateway;
  let options: GatewayOptions;
  /** Outside the gateway's work directory, which its stop removes: a restarted gateway finds it. */
  const stateDir = mkdtempSync(join(tmpdir(), "sluice-task-ledger-"));
  const requestIds: string[] = [];

  beforeAll(async () => {
    [sim, tools] = await Promise.all([startSimulatorProcess({ apiKey: SIMULATOR_API_KEY }), startMcpTestServer()]);
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.breaker = { enabled: false };
    g.mcp = { servers: [{ name: "tools", url: tools.url, era: "stateful" }] };
    g.governance = { verifierTokenSecret: "SLUICE_VERIFIER_TOKEN", retentionDays: 7 };
    const p = bundledConfig("publication");
    const demo = p.tenants.find((t: any) => t.id === "demo");
    demo.apiKeys.push({ id: "agent", sha256: createHash("sha256").update(AGENT_KEY).digest("hex"), entrypoints: ["*"], limits: { money: { limit: 100, currency: "USD", period: "1d" } } });
    p.mcp = {
      policy: {
        revision: "mcp-7",
        rules: [
          { id: "demo-tools", effect: "allow", principals: { tenants: ["demo"] }, servers: ["*"], names: ["*"] },
          { id: "no-count", effect: "deny", servers: ["tools"], names: ["count"] },
        ],
      },
      prices: [{ id: "echo", servers: ["tools"], names: ["echo"], price: { version: "tools-1", currency: "USD", perCall: TOOL_MICROS / 1_000_000 } }],
    };
    options = { adminToken: ADMIN_TOKEN, stateDir, secrets: { SLUICE_VERIFIER_TOKEN: VERIFIER_TOKEN }, config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) } };
    gateway = await startGateway(options);
    await script();
  });

  afterAll(async () => {
    try {
      if (gateway) await expectNothingLeft(gateway.adminUrl);
    } finally {
      await Promise.all([gateway?.stop(), sim?.stop(), tools?.stop()]);
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  const attribution = (task: string, session: string, turn: string, parent?: string) => ({
    "x-sluice-task-id": task,
    "x-sluice-session-id": session,
    "x-sluice-turn-id": turn,
    ...(parent ? { "x-sluice-parent-task-id": parent } : {}),
  });
  /** sluice-chat in the bundled config: tiers [[chat-small], [chat-large]]. */
  const chat = async (headers: Record<string, string>, directive = "", key = AGENT_KEY) => {
    const res = await fetch(`${gateway.publicUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
      body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: `plan the next step ${directive}` }] }),
    });
    await res.text();
    requestIds.push(res.headers.get("x-request-id")!);
    return res.status;
  };
  const toolsClient = async (headers: Record<string, string>) => {
    const client = new Client({ name: "sluice-e2e-agent", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${gateway.publicUrl}/mcp/tools`), { requestInit: { headers: { authorization: `Bearer ${AGENT_KEY}`, ...headers } } }));
    return client;
  };

  /** The agent run: what each step does is what the assertions below sum. */
  async function script() {
    await fetch(`${sim.url}/__sim/reset`, { method: "POST" });
    // Session A, turn 1: the first tier refuses once (429, known zero), the second answers: a fallback.
    expect(await chat(attribution(PARENT, "sess-a", "turn-1"), "[[sim status=429 retry-after=0 times=1]]")).toBe(200);
    let client = await toolsClient(attribution(PARENT, "sess-a", "turn-1"));
    expect(await client.callTool({ name: "echo", arguments: { text: "notes" } })).toMatchObject({ content: [{ text: "notes" }] });
    await client.close();
    // Session A, turn 2: a model call, and a tool the policy denies.
    expect(await chat(attribution(PARENT, "sess-a", "turn-2"))).toBe(200);
    client = await toolsClient(attribution(PARENT, "sess-a", "turn-2"));
    await expect(client.callTool({ name: "count", arguments: { n: 2 } })).rejects.toThrow(/denied by rule no-count/);
    await client.close();
    // Session B, turn 1: the provider fails after accepting (503): one attempt, its usage unknown.
    expect(await chat(attribution(PARENT, "sess-b", "turn-1"), "[[sim status=503 times=1]]")).toBe(503);
    client = await toolsClient(attribution(PARENT, "sess-b", "turn-1"));
    await client.callTool({ name: "echo", arguments: { text: "more" } });
    await client.close();
    // A child task of the parent, in session B.
    expect(await chat(attribution(CHILD, "sess-b", "turn-2", PARENT))).toBe(200);
    client = await toolsClient(attribution(CHILD, "sess-b", "turn-2", PARENT));
    await client.callTool({ name: "echo", arguments: { text: "child" } });
    await client.close();
    // Another key's task, in the same tenant.
    expect(await chat(attribution(OTHER, "sess-x", "turn-1"), "", DEMO_KEY)).toBe(200);
  }

  const admin = async (path: string, init: RequestInit = {}, token = ADMIN_TOKEN) => fetch(`${gateway.adminUrl}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...(init.headers ?? {}) } });
  const adminJson = async (path: string): Promise<any> => {
    const res = await admin(path);
    expect(res.status, path).toBe(200);
    return res.json();
  };
  /** Polls until `ready` holds of the answer (records are written off the request path). */
  const until = async <T,>(read: () => Promise<T>, ready: (v: T) => boolean, what: string): Promise<T> => {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const v = await read();
      if (ready(v)) return v;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v)}`);
      await new Promise((r) => setImmediate(r));
    }
  };
  const task = (id: string) => adminJson(`/admin/tasks/${id}?tenant=demo`);
  const modelCalls = (calls: any[]) => calls.filter((c) => c.kind === "model");
  const toolCalls = (calls: any[]) => calls.filter((c) => c.kind === "tool");
  const recorded = (r: any, models: number, tools: number) => r?.calls !== undefined && modelCalls(r.calls).length === models && toolCalls(r.calls).length === tools;
  const parentDone = () => until(() => task(PARENT).catch(() => undefined), (r) => recorded(r, 3, 3), "the parent task's calls");
  const childDone = () => until(() => task(CHILD).catch(() => undefined), (r) => recorded(r, 1, 1), "the child task's calls");

  it("rolls a task up to exactly the sums of its calls' attempts", async () => {
    // The child task's calls are written off the request path too, maybe in a later batch: the
    // parent names it as a child only once they are in, so the parent is read again after both.
    await Promise.all([parentDone(), childDone()]);
    const { task: t, calls } = await task(PARENT);
    const attempts = calls.flatMap((c: any) => c.attempts);
    expect(t.calls).toBe(calls.length);
    expect(t.attempts).toBe(attempts.length);
    expect(t.costMicros).toBe(attempts.reduce((n: number, a: any) => n + a.costMicros, 0));
    expect(t.costMicros).toBe(calls.reduce((n: number, c: any) => n + c.costMicros, 0));
    expect(t.unknownUsageAttempts).toBe(attempts.filter((a: any) => a.usage === "unknown").length);
    // Three model calls, four attempts: the 429 was followed by the next tier.
    const models = modelCalls(calls);
    expect(models.map((c: any) => c.attempts.length)).toEqual([2, 1, 1]);
    expect(t.retries + t.fallbacks).toBe(1);
    expect(t.fallbacks).toBe(1);
    expect(models[0].attempts.map((a: any) => a.usage)).toEqual(["none", "known"]);
    expect(models[2]).toMatchObject({ outcome: "error", errorCode: expect.any(String), attempts: [{ usage: "unknown", costMicros: 0 }] });
    expect(t.unknownUsageAttempts).toBe(1);
    // Per model: the calls and what their attempts cost and used.
    expect(Object.values(t.byModel).reduce((n: number, m: any) => n + m.calls, 0)).toBe(3);
    expect(Object.values(t.byModel).reduce((n: number, m: any) => n + m.costMicros, 0) + 2 * TOOL_MICROS).toBe(t.costMicros);
    expect(t.tokens.input).toBeGreaterThan(0);
    expect(Object.values(t.byModel).reduce((n: number, m: any) => n + m.tokens.input + m.tokens.output, 0)).toBe(t.tokens.input + t.tokens.output);
    // Tools: two echo calls ran and were charged; the denied call has no attempt.
    expect(t.toolCalls).toEqual({ "tools/echo": 2 });
    expect(toolCalls(calls).map((c: any) => c.costMicros).sort()).toEqual([0, TOOL_MICROS, TOOL_MICROS]);
    expect(toolCalls(calls).find((c: any) => c.target === "tools/count")).toMatchObject({ outcome: "error", attempts: [] });
    expect(t).toMatchObject({ taskId: PARENT, tenant: "demo", sessions: 2, turns: 3, children: [CHILD], currency: "USD", approvals: { requested: 0, granted: 0, denied: 0, expired: 0, waitedMs: 0 } });
    expect(t.firstSeen).toBeLessThanOrEqual(t.lastSeen);
    // Each model request is one call, under the gateway's request id.
    for (const id of requestIds.slice(0, 3)) expect(calls.map((c: any) => c.callId)).toContain(id);
    for (const c of calls) expect(c.key).toBe("agent");
  });

  it("agrees with the budget ledger: the key's settled spend and tokens are the two tasks' costs and tokens", async () => {
    const [{ task: parent }, { task: child }] = await Promise.all([parentDone(), childDone()]);
    expect(child).toMatchObject({ parentTaskId: PARENT, calls: expect.any(Number), sessions: 1, turns: 1, toolCalls: { "tools/echo": 1 } });
    const spent = parent.costMicros + child.costMicros;
    expect(spent).toBeGreaterThan(3 * TOOL_MICROS);
    // Settlements are written off the request path too: wait for the ledger to hold them all.
    const balance = await until(
      async () => (await adminJson("/admin/budgets/demo/balance?scope=key:agent")).balances[0].money,
      (m) => m?.spent === spent,
      "the ledger's settled spend",
    );
    expect(balance.spent).toBe(spent);
    const usage = await adminJson("/admin/budgets/demo/usage?scope=key:agent");
    const settledTokens = usage.models.reduce((n: number, m: any) => n + m.settledTokens, 0);
    expect(settledTokens).toBe(parent.tokens.input + parent.tokens.output + child.tokens.input + child.tokens.output);
  });

  it("lists tasks with filters", async () => {
    await Promise.all([parentDone(), childDone()]);
    const all = await until(() => adminJson("/admin/tasks?tenant=demo"), (r) => r.tasks.length === 3, "three tasks");
    expect(all.tasks.map((t: any) => t.taskId).sort()).toEqual([CHILD, OTHER, PARENT].sort());
    expect((await adminJson("/admin/tasks?tenant=demo&key=agent")).tasks.map((t: any) => t.taskId).sort()).toEqual([CHILD, PARENT].sort());
    expect((await adminJson("/admin/tasks?tenant=demo&limit=1")).tasks).toHaveLength(1);
    expect((await adminJson(`/admin/tasks?tenant=demo&since=${Date.now() + 60_000}`)).tasks).toEqual([]);
    expect((await admin("/admin/tasks?tenant=demo&limit=0")).status).toBe(400);
    expect((await admin("/admin/tasks")).status).toBe(400);
    expect((await admin("/admin/tasks/nope?tenant=demo")).status).toBe(404);
    // The admin token is required.
    expect((await admin("/admin/tasks?tenant=demo", {}, "wrong")).status).toBe(401);
  });

  it("keeps the decisions and executions in the audit trail, and writes each as a log line", async () => {
    await parentDone();
    const { events } = await until(() => adminJson(`/admin/audit?tenant=demo&taskId=${PARENT}&limit=500`), (r) => r.events.some((e: any) => e.type === "decision.denied"), "the denial");
    const types = events.map((e: any) => e.type);
    expect(types.filter((t: string) => t === "decision.denied")).toHaveLength(1);
    expect(types.filter((t: string) => t === "tool.executed")).toHaveLength(2);
    expect(types.filter((t: string) => t === "model.completed")).toHaveLength(4);
    expect(events.find((e: any) => e.type === "decision.denied")).toMatchObject({ tenant: "demo", subject: "agent", taskId: PARENT, policyRevision: "mcp-7", decision: { allowed: false, rule: "no-count" }, target: { kind: "tool", server: "tools", name: "count" } });
    expect(events.filter((e: any) => e.type === "tool.executed").every((e: any) => e.execution === "succeeded" && e.usage === "known" && e.attemptId?.startsWith("att_"))).toBe(true);
    expect(events.filter((e: any) => e.type === "model.completed").map((e: any) => e.execution).sort()).toEqual(["failed", "succeeded", "succeeded", "unknown"]);
    // Newest first.
    const ats = events.map((e: any) => e.at);
    expect([...ats].sort((a, b) => b - a)).toEqual(ats);
    // Filtered by type.
    const denied = await adminJson("/admin/audit?tenant=demo&type=decision.denied");
    expect(denied.events.map((e: any) => e.taskId)).toEqual([PARENT]);
    expect((await admin("/admin/audit?tenant=demo&type=bogus")).status).toBe(400);
    // Metadata only: the tool's arguments never appear in the trail or its log lines.
    expect(JSON.stringify(events)).not.toContain("notes");
    const lines = gateway
      .output()
      .split("\n")
      .filter((l) => l.startsWith('{"kind":"audit"'))
      .map((l) => JSON.parse(l));
    expect(lines.find((l) => l.type === "decision.denied")).toMatchObject({ taskId: PARENT, decision: { rule: "no-count" } });
    expect(lines.filter((l) => l.taskId === PARENT && l.type === "tool.executed")).toHaveLength(2);
  });

  it("attaches an outcome only with the verifier's credential", async () => {
    await parentDone();
    const post = (token: string, body: unknown, id = PARENT) => admin(`/admin/tasks/${id}/outcome?tenant=demo`, { method: "POST", body: JSON.stringify(body) }, token);
    const outcome = { status: "succeeded", evidence: "https://ci.example.com/runs/42" };
    expect((await post(ADMIN_TOKEN, outcome)).status).toBe(401);
    expect((await post("not-the-verifier", outcome)).status).toBe(401);
    expect((await post(VERIFIER_TOKEN, { status: "succeeded" })).status).toBe(400);
    expect((await post(VERIFIER_TOKEN, outcome, "no-such-task")).status).toBe(404);
    const res = await post(VERIFIER_TOKEN, outcome);
    expect(res.status).toBe(200);
    expect((await task(PARENT)).task.outcome).toMatchObject({ ...outcome, verifier: "verifier", at: expect.any(Number) });
    // Never inferred: a task nobody verified has none, whatever its calls did.
    expect((await task(CHILD)).task.outcome).toBeUndefined();
  });

  it("shows a key its own tasks only", async () => {
    await Promise.all([parentDone(), childDone()]);
    const view = (key: string, path = "") => fetch(`${gateway.publicUrl}/v1/sluice/tasks${path}`, { headers: { authorization: `Bearer ${key}` } });
    const mine = await until(async () => (await view(DEMO_KEY)).json() as Promise<any>, (r) => r.tasks?.length === 1, "the demo key's task");
    expect(mine.tasks.map((t: any) => t.taskId)).toEqual([OTHER]);
    const agent = (await (await view(AGENT_KEY)).json()) as any;
    expect(agent.tasks.map((t: any) => t.taskId).sort()).toEqual([CHILD, PARENT].sort());
    const one = (await (await view(AGENT_KEY, `/${PARENT}`)).json()) as any;
    expect(one.task.taskId).toBe(PARENT);
    expect(one.calls.every((c: any) => c.key === "agent")).toBe(true);
    expect((await view(DEMO_KEY, `/${PARENT}`)).status).toBe(404);
    expect((await view("sk-not-a-key")).status).toBe(401);
    expect((await fetch(`${gateway.publicUrl}/v1/sluice/tasks`)).status).toBe(401);
  });

  it("keeps tasks, calls, outcomes and the audit trail across a restart", async () => {
    const before = await parentDone();
    const audit = await adminJson(`/admin/audit?tenant=demo&taskId=${PARENT}&limit=500`);
    await gateway.stop();
    gateway = await startGateway(options);
    expect(await task(PARENT)).toEqual(before);
    expect(await adminJson(`/admin/audit?tenant=demo&taskId=${PARENT}&limit=500`)).toEqual(audit);
  });
});
