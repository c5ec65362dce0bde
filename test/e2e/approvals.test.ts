import { createHash } from "node:crypto";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { Client as LegacyClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as LegacyTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { slowly, startCountingToolServer } from "./support/counting-tool-server.ts";
import type { LoopbackServer } from "./support/loopback-server.ts";
import { startModernMcpTestServer, type ModernMcpTestServer } from "./support/mcp-modern-server.ts";
import { ADMIN_TOKEN, backendsFor, bundledConfig, DEMO_KEY, type Simulator } from "./support/stack.ts";

const APPROVER_TOKEN = "e2e-approver-token";
const BUDGET_KEY = "sk-e2e-approvals-budget";
const sha = (k: string) => createHash("sha256").update(k).digest("hex");
const TTL_MS = 4_000;
/** One call of a priced tool costs 0.01 USD; the budget key's budget holds exactly one. */
const PRICE = 0.01;

/**
 * The test's tool server, counting every execution by tool and arguments: `deploy` (needs
 * approval), `charge` (priced, needs approval), `spend` (priced, no approval).
 */
function startCountingServer() {
  const tool = (name: string) => ({
    description: `the ${name} tool`,
    // Slow enough that concurrent retries overlap.
    run: async (args: unknown) => (await slowly(100), { content: [{ type: "text", text: `ran ${name} ${JSON.stringify(args ?? {})}` }] }),
  });
  return startCountingToolServer({ deploy: tool("deploy"), charge: tool("charge"), spend: tool("spend") });
}

describe("approvals of risky MCP tool calls, both protocol eras", () => {
  let sim: Simulator;
  let tools: Awaited<ReturnType<typeof startCountingServer>>;
  let server: LoopbackServer;
  let modern: ModernMcpTestServer;
  let gateway: RunningGateway;

  beforeAll(async () => {
    [sim, tools, modern] = await Promise.all([startSimulatorProcess({ apiKey: SIMULATOR_API_KEY }), startCountingServer(), startModernMcpTestServer()]);
    server = tools.http;
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.mcp = { servers: [{ name: "ops", url: tools.url, era: "stateless" }, { name: "modern", url: modern.url, era: "stateless" }], sessions: { secrets: ["MCP_SESSION_SECRET"] } };
    g.governance = { approverTokenSecret: "APPROVER_TOKEN", approvals: { ttlMs: TTL_MS, stateSecret: "APPROVAL_STATE_SECRET" }, workload: { agentHeader: "x-agent-id" } };
    g.security.trustedHeaders = [...(g.security.trustedHeaders ?? []), "x-agent-id"];
    const p = bundledConfig("publication");
    const demo = p.tenants.find((t: any) => t.id === "demo");
    demo.apiKeys.push({ id: "approvals-budget", sha256: sha(BUDGET_KEY), entrypoints: ["*"], limits: { money: { limit: PRICE, currency: "USD", period: "1d" } } });
    p.mcp = {
      policy: {
        revision: "approvals-1",
        rules: [
          { id: "risky", effect: "allow", principals: { tenants: ["demo"] }, servers: ["ops"], names: ["deploy", "charge"], approval: "required" },
          { id: "plain", effect: "allow", principals: { tenants: ["demo"] }, servers: ["ops"], names: ["spend"] },
          // A tool that asks its own question (input_required) after the approval let it run.
          { id: "asks", effect: "allow", principals: { tenants: ["demo"] }, servers: ["modern"], names: ["confirm"], approval: "required" },
        ],
      },
      prices: [{ id: "priced", servers: ["ops"], names: ["charge", "spend"], price: { version: "ops-1", currency: "USD", perCall: PRICE } }],
    };
    gateway = await startGateway({
      adminToken: ADMIN_TOKEN,
      secretNames: ["MCP_SESSION_SECRET", "APPROVER_TOKEN", "APPROVAL_STATE_SECRET"],
      secrets: { MCP_SESSION_SECRET: "mcp-session-secret-for-the-approval-tests-0123456789", APPROVER_TOKEN, APPROVAL_STATE_SECRET: "approval-state-secret-0123456789" },
      config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) },
    });
  });

  afterAll(async () => {
    await Promise.all([gateway?.stop(), sim?.stop(), server?.close(), modern?.stop()]);
  });

  const headers = (key: string) => ({ requestInit: { headers: { authorization: `Bearer ${key}` } } });
  /** The SDK 1.x client (2025-11-25, a sealed gateway session). */
  const legacyClient = async (key = DEMO_KEY) => {
    const client = new LegacyClient({ name: "approvals-e2e-legacy", version: "1.0.0" }, { capabilities: { elicitation: { url: {} } } });
    await client.connect(new LegacyTransport(new URL(`${gateway.publicUrl}/mcp/ops`), headers(key)));
    return client;
  };
  /** The SDK 2.x client on 2026-07-28; `onUrl` is its URL elicitation handler (the user opening the page). */
  const modernClient = async (onUrl: (url: string) => Promise<void>) => {
    const client = new Client({ name: "approvals-e2e", version: "1.0.0" }, { versionNegotiation: { mode: "auto" }, capabilities: { elicitation: { url: {} } } });
    client.setRequestHandler("elicitation/create", async (req) => {
      const params = req.params as { mode?: string; url?: string };
      if (params.mode !== "url" || typeof params.url !== "string") return { action: "decline" as const };
      await onUrl(params.url);
      return { action: "accept" as const };
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${gateway.publicUrl}/mcp/ops`), headers(DEMO_KEY)));
    return client;
  };
  /** The -32042 a 2025-era call is refused with, and the approval it names. */
  const needsApproval = async (call: Promise<unknown>) => {
    const err = await call.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(McpError);
    const e = err as McpError;
    expect(e.code).toBe(-32042);
    const elicitation = (e.data as { elicitations: { mode: string; elicitationId: string; url: string; message: string }[] }).elicitations[0]!;
    expect(elicitation).toMatchObject({ mode: "url", url: `${gateway.publicUrl}/approvals/${elicitation.elicitationId}` });
    return elicitation;
  };
  const decide = async (id: string, action: "approve" | "deny" | "revoke", token = APPROVER_TOKEN) => {
    const res = await fetch(`${gateway.adminUrl}/admin/approvals/${id}/${action}?tenant=demo`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify({ reason: `e2e ${action}` }) });
    expect(res.status, await res.clone().text()).toBe(200);
    return ((await res.json()) as { approval: { state: string } }).approval;
  };
  const statusPage = async (url: string) => {
    const res = await fetch(url);
    return { status: res.status, html: await res.text() };
  };
  /** A raw 2026-07-28 tools/call, to see the exact result and replay a requestState. */
  const rawCall = async (args: unknown, extra: Record<string, unknown> = {}) => {
    const res = await fetch(`${gateway.publicUrl}/mcp/ops`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "deploy" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: "deploy", arguments: args, ...extra, _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": { elicitation: { url: {} } } } } }),
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  it("2025 era: -32042 with the status page → approved by the approver → the same call again runs once", async () => {
    const args = { target: "prod-1" };
    const client = await legacyClient();
    const e = await needsApproval(client.callTool({ name: "deploy", arguments: args }));
    expect(tools.executions("deploy", args)).toBe(0);
    // The page is public but shows no arguments; the admin API lists the pending approval.
    const page = await statusPage(e.url);
    expect(page.status).toBe(200);
    expect(page.html).toContain('<dd id="state">pending</dd>');
    expect(page.html).not.toContain("prod-1");
    const listed = (await (await fetch(`${gateway.adminUrl}/admin/approvals?tenant=demo&state=pending`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as any;
    expect(listed.approvals.find((a: any) => a.id === e.elicitationId)).toMatchObject({ state: "pending", server: "ops", tool: "deploy", principal: { tenant: "demo" }, policyRevision: "approvals-1", statusUrl: e.url });
    // The approver token opens the approvals routes only.
    expect((await fetch(`${gateway.adminUrl}/admin/status`, { headers: { authorization: `Bearer ${APPROVER_TOKEN}` } })).status).toBe(401);
    expect(await decide(e.elicitationId, "approve")).toMatchObject({ state: "approved", decidedBy: "approver", reason: "e2e approve" });
    expect(await client.callTool({ name: "deploy", arguments: args })).toMatchObject({ content: [{ text: `ran deploy ${JSON.stringify(args)}` }] });
    expect(tools.executions("deploy", args)).toBe(1);
    expect((await statusPage(e.url)).html).toContain('<dd id="state">executed</dd>');
    // Once used, the same call again is told so (a duplicate does not run twice); a call after that asks anew.
    await expect(client.callTool({ name: "deploy", arguments: args })).rejects.toThrow(/already used/);
    const again = await needsApproval(client.callTool({ name: "deploy", arguments: args }));
    expect(again.elicitationId).not.toBe(e.elicitationId);
    expect(tools.executions("deploy", args)).toBe(1);
    // The approver's decision is an audit line.
    expect(gateway.output()).toMatch(new RegExp(`"kind":"audit".*"type":"approval.granted".*"approvalId":"${e.elicitationId}"`));
    await client.close();
  });

  it("2025 era: two concurrent retries of an approved call run it once", async () => {
    const args = { target: "prod-2" };
    const client = await legacyClient();
    const e = await needsApproval(client.callTool({ name: "deploy", arguments: args }));
    await decide(e.elicitationId, "approve");
    const settled = await Promise.allSettled([client.callTool({ name: "deploy", arguments: args }), client.callTool({ name: "deploy", arguments: args })]);
    expect(settled.filter((s) => s.status === "fulfilled")).toHaveLength(1);
    const refused = settled.find((s): s is PromiseRejectedResult => s.status === "rejected")!;
    expect(String(refused.reason)).toMatch(/already used/);
    expect(tools.executions("deploy", args)).toBe(1);
    await client.close();
  });

  it("2026 era: input_required with a URL elicitation; the SDK's retry with the requestState runs the call once", async () => {
    const args = { target: "prod-3" };
    const seen: string[] = [];
    const client = await modernClient(async (url) => {
      seen.push(url);
      await decide(url.split("/").at(-1)!, "approve");
    });
    expect(await client.callTool({ name: "deploy", arguments: args })).toMatchObject({ content: [{ text: `ran deploy ${JSON.stringify(args)}` }] });
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatch(new RegExp(`^${gateway.publicUrl}/approvals/ap_`));
    expect(tools.executions("deploy", args)).toBe(1);
    // The gateway's own approval round (its sealed state, the client's answer) never reaches the server.
    const upstream = tools.params.filter((p) => JSON.stringify(p.arguments) === JSON.stringify(args));
    expect(upstream).toHaveLength(1);
    expect(upstream[0]).not.toHaveProperty("requestState");
    expect(upstream[0]).not.toHaveProperty("inputResponses");
    await client.close();
  });

  it("2026 era: a tool that asks its own question after the approval goes on under the same approval, and runs once", async () => {
    const asked: string[] = [];
    const client = new Client({ name: "approvals-e2e-asks", version: "1.0.0" }, { versionNegotiation: { mode: "auto" }, capabilities: { elicitation: { url: {}, form: {} } } });
    client.setRequestHandler("elicitation/create", async (req) => {
      const params = req.params as { mode?: string; url?: string; message?: string };
      if (params.mode === "url" && typeof params.url === "string") {
        asked.push("approval");
        await decide(params.url.split("/").at(-1)!, "approve");
        return { action: "accept" as const };
      }
      asked.push(params.message ?? "?");
      return { action: "accept" as const, content: { confirm: true } };
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${gateway.publicUrl}/mcp/modern`), headers(DEMO_KEY)));
    expect(await client.callTool({ name: "confirm", arguments: { action: "purge" } })).toMatchObject({ content: [{ text: "confirmed purge" }] });
    // One approval, then the server's own question; the round with the answer was not refused as "already used".
    expect(asked).toEqual(["approval", "Really purge?"]);
    const approvals = (await (await fetch(`${gateway.adminUrl}/admin/approvals?tenant=demo`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as { approvals: { tool: string; state: string; execution?: string; history: { event: string; execution?: string }[] }[] };
    const used = approvals.approvals.filter((a) => a.tool === "confirm");
    expect(used).toHaveLength(1);
    expect(used[0]).toMatchObject({ state: "executed" });
    expect(used[0]!.history.map((h) => h.execution ?? h.event)).toEqual(["requested", "granted", "executed", "input_required", "executed", "succeeded"]);
    await client.close();
  });

  it("2026 era: the sealed requestState is single-use and bound to the arguments", async () => {
    const args = { target: "prod-4" };
    const first = await rawCall(args);
    expect(first.status).toBe(200);
    expect(first.body.result).toMatchObject({ resultType: "input_required", inputRequests: { approval: { method: "elicitation/create", params: { mode: "url" } } } });
    const { requestState } = first.body.result;
    const id = first.body.result.inputRequests.approval.params.elicitationId as string;
    await decide(id, "approve");
    // A tampered state is refused outright.
    const tampered = await rawCall(args, { requestState: `${requestState.slice(0, -4)}AAAA` });
    expect(tampered.body.error).toMatchObject({ data: { code: "invalid_request" } });
    // The state with other arguments does not cover them: a new pending approval, nothing run.
    const changed = await rawCall({ target: "prod-5" }, { requestState });
    expect(changed.body.result).toMatchObject({ resultType: "input_required" });
    expect(changed.body.result.inputRequests.approval.params.elicitationId).not.toBe(id);
    expect(tools.executions("deploy", { target: "prod-5" })).toBe(0);
    // Presented twice at once: one runs, the other is refused; the call ran once.
    const both = await Promise.all([rawCall(args, { requestState }), rawCall(args, { requestState })]);
    expect(both.filter((r) => r.body.result?.content)).toHaveLength(1);
    expect(both.find((r) => r.body.error)!.body.error.data.code).toMatch(/^(invalid_request|approval_refused)$/);
    expect(tools.executions("deploy", args)).toBe(1);
    // And once more later: refused, the approval having been used.
    const later = await rawCall(args, { requestState });
    expect(later.body.error).toMatchObject({ data: { code: "approval_refused" } });
    expect(later.body.error.message).toMatch(/already used/);
    expect(tools.executions("deploy", args)).toBe(1);
  });

  it("denial and revocation end the call with a refusal, never an execution", async () => {
    const client = await legacyClient();
    const denied = { target: "prod-6" };
    const d = await needsApproval(client.callTool({ name: "deploy", arguments: denied }));
    await decide(d.elicitationId, "deny");
    await expect(client.callTool({ name: "deploy", arguments: denied })).rejects.toThrow(/was denied \(e2e deny\)/);
    // A denial is not turned into an approval later.
    const late = await fetch(`${gateway.adminUrl}/admin/approvals/${d.elicitationId}/approve?tenant=demo`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" }, body: JSON.stringify({ reason: "late" }) });
    expect(late.status).toBe(400);
    const revoked = { target: "prod-7" };
    const r = await needsApproval(client.callTool({ name: "deploy", arguments: revoked }));
    await decide(r.elicitationId, "approve");
    await decide(r.elicitationId, "revoke", ADMIN_TOKEN);
    await expect(client.callTool({ name: "deploy", arguments: revoked })).rejects.toThrow(/was revoked/);
    expect((await statusPage(r.url)).html).toContain('<dd id="state">revoked</dd>');
    expect(tools.executions("deploy", denied) + tools.executions("deploy", revoked)).toBe(0);
    await client.close();
  });

  it("an argument change after approval is not covered: a new approval is asked for, the old one stays unused", async () => {
    const client = await legacyClient();
    const e = await needsApproval(client.callTool({ name: "deploy", arguments: { target: "prod-8" } }));
    await decide(e.elicitationId, "approve");
    const other = await needsApproval(client.callTool({ name: "deploy", arguments: { target: "prod-8", force: true } }));
    expect(other.elicitationId).not.toBe(e.elicitationId);
    expect(tools.executions("deploy", { target: "prod-8", force: true })).toBe(0);
    expect((await statusPage(e.url)).html).toContain('<dd id="state">approved</dd>');
    await client.close();
  });

  it("expiry ends an unanswered approval: the retry is refused, and approving it afterwards is refused", async () => {
    const args = { target: "prod-9" };
    const client = await legacyClient();
    const e = await needsApproval(client.callTool({ name: "deploy", arguments: args }));
    for (const end = Date.now() + TTL_MS + 10_000; !(await statusPage(e.url)).html.includes('<dd id="state">expired</dd>'); await new Promise((r) => setTimeout(r, 200))) {
      if (Date.now() > end) throw new Error("the approval never expired");
    }
    await expect(client.callTool({ name: "deploy", arguments: args })).rejects.toThrow(/expired/);
    const late = await fetch(`${gateway.adminUrl}/admin/approvals/${e.elicitationId}/approve?tenant=demo`, { method: "POST", headers: { authorization: `Bearer ${APPROVER_TOKEN}`, "content-type": "application/json" }, body: JSON.stringify({ reason: "late" }) });
    expect(late.status).toBe(400);
    expect(tools.executions("deploy", args)).toBe(0);
    await client.close();
  });

  it("a budget spent between approval and execution refuses the call; the approval is not used up", async () => {
    const client = await legacyClient(BUDGET_KEY);
    const e = await needsApproval(client.callTool({ name: "charge", arguments: { n: 1 } }));
    await decide(e.elicitationId, "approve");
    // Meanwhile the key's whole budget goes to another priced call.
    expect(await client.callTool({ name: "spend", arguments: {} })).toMatchObject({ content: [{ text: "ran spend {}" }] });
    await expect(client.callTool({ name: "charge", arguments: { n: 1 } })).rejects.toThrow(/budget/);
    expect(tools.executions("charge", { n: 1 })).toBe(0);
    expect((await statusPage(e.url)).html).toContain('<dd id="state">approved</dd>');
    await client.close();
  });

  it("a task's rollup counts its approval and the time it waited, and still equals the sums of its calls", async () => {
    const TASK = `approval-rollup-${Date.now()}`;
    const task = { "x-sluice-task-id": TASK, "x-sluice-session-id": "s-1", "x-sluice-turn-id": "t-1", "x-agent-id": "planner-1" };
    // A model call of the task, then the risky tool call: asked, approved, called again.
    const model = await fetch(`${gateway.publicUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json", ...task },
      body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: "plan the deploy" }] }),
    });
    expect(model.status).toBe(200);
    await model.text();
    const client = new LegacyClient({ name: "approvals-e2e-task", version: "1.0.0" }, { capabilities: { elicitation: { url: {} } } });
    await client.connect(new LegacyTransport(new URL(`${gateway.publicUrl}/mcp/ops`), { requestInit: { headers: { authorization: `Bearer ${DEMO_KEY}`, ...task, "x-sluice-turn-id": "t-2" } } }));
    const args = { env: "rollup" };
    const asked = await needsApproval(client.callTool({ name: "deploy", arguments: args }));
    await decide(asked.elicitationId, "approve");
    expect(await client.callTool({ name: "deploy", arguments: args })).toMatchObject({ content: [{ text: `ran deploy ${JSON.stringify(args)}` }] });
    expect(tools.executions("deploy", args)).toBe(1);
    await client.close();
    // The ledger is written off the request path: poll until the approval's decision is in it.
    type Rollup = { calls: number; attempts: number; costMicros: number; turns: number; approvals: { requested: number; granted: number; waitedMs: number } };
    type Drill = { task: Rollup; calls: { costMicros: number; kind: string; attempts: unknown[]; workload?: { agent?: string } }[] };
    let drill: Drill | undefined;
    for (const end = Date.now() + 15_000; ; await new Promise((r) => setTimeout(r, 100))) {
      const res = await fetch(`${gateway.adminUrl}/admin/tasks/${TASK}?tenant=demo`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      if (res.status === 200) {
        drill = (await res.json()) as Drill;
        if (drill.task.approvals.granted === 1 && drill.calls.some((c) => c.kind === "model")) break;
      } else await res.body?.cancel();
      if (Date.now() > end) throw new Error(`the task's approval never reached its rollup: ${JSON.stringify(drill)}`);
    }
    const t = drill!.task;
    expect(t.approvals).toMatchObject({ requested: 1, granted: 1 });
    expect(t.approvals.waitedMs).toBeGreaterThan(0);
    expect(t.turns).toBe(2);
    // The workload (a trusted header) is recorded beside every call, as metadata.
    for (const c of drill!.calls) expect(c.workload, c.kind).toEqual({ agent: "planner-1" });
    expect(t.calls).toBe(drill!.calls.length);
    expect(t.attempts).toBe(drill!.calls.reduce((n, c) => n + c.attempts.length, 0));
    expect(t.costMicros).toBe(drill!.calls.reduce((n, c) => n + c.costMicros, 0));
    // The audit trail has the request, the grant and the execution of the task's call, in one schema.
    // The executed call's own record may land in a later batch than the approver's decision: poll for it.
    type Audit = { events: { type: string; approvalId?: string; execution?: string }[] };
    let audit: Audit = { events: [] };
    for (const end = Date.now() + 15_000; !audit.events.some((e) => e.type === "tool.executed"); await new Promise((r) => setTimeout(r, 100))) {
      if (Date.now() > end) throw new Error(`the tool call's execution never reached the audit trail: ${JSON.stringify(audit)}`);
      audit = (await (await fetch(`${gateway.adminUrl}/admin/audit?tenant=demo&taskId=${TASK}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as Audit;
    }
    const types = audit.events.map((e) => e.type);
    for (const type of ["approval.requested", "approval.granted", "tool.executed", "model.completed"]) expect(types, type).toContain(type);
    expect(audit.events.find((e) => e.type === "approval.granted")?.approvalId).toBe(asked.elicitationId);
    // One execution, under the approval: the call held for approval was not one.
    expect(audit.events.filter((e) => e.type === "tool.executed")).toMatchObject([{ approvalId: asked.elicitationId, execution: "succeeded" }]);
  });

  it("the status page of an unknown approval is a 404 page", async () => {
    expect((await statusPage(`${gateway.publicUrl}/approvals/ap_ZGVtbw_00000000000000000000000000000000`)).status).toBe(404);
    expect((await statusPage(`${gateway.publicUrl}/approvals/not-an-id`)).status).toBe(404);
  });
});
