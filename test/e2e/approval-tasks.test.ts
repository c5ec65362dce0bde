import { createHash } from "node:crypto";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { Client as LegacyClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as LegacyTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateTaskResultSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { slowly, startCountingToolServer } from "./support/counting-tool-server.ts";
import { ADMIN_TOKEN, backendsFor, bundledConfig, DEMO_KEY, type Simulator } from "./support/stack.ts";

const APPROVER_TOKEN = "e2e-tasks-approver-token";
const OTHER_KEY = "sk-e2e-approval-tasks-other";
const sha = (k: string) => createHash("sha256").update(k).digest("hex");
/** Long enough that no approval here expires while a slow box runs the test. */
const TTL_MS = 120_000;
const RELATED_TASK = "io.modelcontextprotocol/related-task";

/**
 * MCP tasks (2025-11-25) as the third way a client meets an approval: a task-augmented call of a
 * tool whose rule requires approval is answered with a task handle, polled with tasks/get, run
 * with tasks/result (once), cancelled with tasks/cancel — through the official SDK 1.x client.
 */
describe("approvals as MCP tasks (2025-11-25)", () => {
  let sim: Simulator;
  let tools: Awaited<ReturnType<typeof startCountingToolServer>>;
  let gateway: RunningGateway;

  beforeAll(async () => {
    const tool = (name: string, execution?: Record<string, unknown>) => ({
      description: `the ${name} tool`,
      ...(execution ? { execution } : {}),
      // Slow enough that concurrent tasks/result overlap.
      run: async (args: unknown) => (await slowly(100), { content: [{ type: "text", text: `ran ${name} ${JSON.stringify(args ?? {})}` }] }),
    });
    // `spend` says it supports tasks itself: the gateway does not relay a server's tasks, so that is dropped.
    [sim, tools] = await Promise.all([startSimulatorProcess({ apiKey: SIMULATOR_API_KEY }), startCountingToolServer({ deploy: tool("deploy"), spend: tool("spend", { taskSupport: "required" }) })]);
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.mcp = { servers: [{ name: "ops", url: tools.url, era: "stateless" }], sessions: { secrets: ["MCP_SESSION_SECRET"] } };
    g.governance = { approverTokenSecret: "APPROVER_TOKEN", approvals: { ttlMs: TTL_MS, stateSecret: "APPROVAL_STATE_SECRET" } };
    const p = bundledConfig("publication");
    p.tenants.find((t: any) => t.id === "demo").apiKeys.push({ id: "tasks-other", sha256: sha(OTHER_KEY), entrypoints: ["*"] });
    p.mcp = {
      policy: {
        revision: "tasks-1",
        rules: [
          { id: "risky", effect: "allow", principals: { tenants: ["demo"] }, servers: ["ops"], names: ["deploy"], approval: "required" },
          { id: "plain", effect: "allow", principals: { tenants: ["demo"] }, servers: ["ops"], names: ["spend"] },
        ],
      },
    };
    gateway = await startGateway({
      adminToken: ADMIN_TOKEN,
      secretNames: ["MCP_SESSION_SECRET", "APPROVER_TOKEN", "APPROVAL_STATE_SECRET"],
      secrets: { MCP_SESSION_SECRET: "mcp-session-secret-for-the-approval-task-tests-0123", APPROVER_TOKEN, APPROVAL_STATE_SECRET: "approval-state-secret-for-tasks-0123456789" },
      config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) },
    });
  });

  afterAll(async () => {
    await Promise.all([gateway?.stop(), sim?.stop(), tools?.http.close()]);
  });

  /** The SDK 1.x client (2025-11-25, a sealed gateway session) on `/mcp/ops` or the virtual server. */
  const legacyClient = async (key = DEMO_KEY, path = "/mcp/ops") => {
    const client = new LegacyClient({ name: "approval-tasks-e2e", version: "1.0.0" }, { capabilities: { elicitation: { url: {} } } });
    await client.connect(new LegacyTransport(new URL(`${gateway.publicUrl}${path}`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
    return client;
  };
  /** A task-augmented tools/call, as a client asks for one. */
  const callAsTask = (client: LegacyClient, name: string, args: Record<string, unknown>) => client.request({ method: "tools/call", params: { name, arguments: args, task: { ttl: 60_000 } } }, CreateTaskResultSchema);
  const decide = async (id: string, action: "approve" | "deny" | "revoke") => {
    const res = await fetch(`${gateway.adminUrl}/admin/approvals/${id}/${action}?tenant=demo`, { method: "POST", headers: { authorization: `Bearer ${APPROVER_TOKEN}`, "content-type": "application/json" }, body: JSON.stringify({ reason: `e2e ${action}` }) });
    return { status: res.status, body: (await res.json()) as { approval?: { state: string; decidedBy?: string } } };
  };
  const approvalOf = (created: { _meta?: Record<string, unknown> }) => created._meta?.["sluice.dev/approval"] as { id: string; url: string; state: string };
  const failure = async (p: Promise<unknown>) => {
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err, "expected a refusal").toBeInstanceOf(Error);
    return err as Error;
  };

  it("advertises tasks to a 2025-11-25 client, and lists taskSupport optional only on a tool that may wait for approval", async () => {
    const client = await legacyClient();
    expect(client.getServerCapabilities()?.tasks).toEqual({ cancel: {}, requests: { tools: { call: {} } } });
    const { tools: listed } = await client.listTools();
    expect(listed.find((t) => t.name === "deploy")?.execution).toEqual({ taskSupport: "optional" });
    // The server's own task support is not relayed: the gateway runs no upstream tasks.
    expect(listed.find((t) => t.name === "spend")).not.toHaveProperty("execution");
    await client.close();
  });

  it("a 2026-07-28 client sees no tasks: no capability, no taskSupport", async () => {
    const client = new Client({ name: "approval-tasks-e2e-modern", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${gateway.publicUrl}/mcp/ops`), { requestInit: { headers: { authorization: `Bearer ${DEMO_KEY}` } } }));
    const { tools: listed } = await client.listTools();
    expect(listed.map((t) => t.name).sort()).toEqual(["deploy", "spend"]);
    expect(JSON.stringify(listed)).not.toContain("taskSupport");
    expect(client.getServerCapabilities()).not.toHaveProperty("tasks");
    await client.close();
  });

  it("input_required → tasks/result is -32042 while pending → approved → tasks/result runs it once → completed, and the result is not kept", async () => {
    const args = { target: "task-1" };
    const client = await legacyClient();
    const created = await callAsTask(client, "deploy", args);
    const approval = approvalOf(created);
    expect(created.task).toMatchObject({ status: "input_required", pollInterval: 5000 });
    expect(approval).toMatchObject({ url: `${gateway.publicUrl}/approvals/${approval.id}`, state: "pending" });
    expect(created.task.statusMessage).toContain(approval.url);
    // The handle is opaque: the arguments cannot be read out of it.
    expect(created.task.taskId).not.toContain("task-1");
    const taskId = created.task.taskId;
    const polled = await client.experimental.tasks.getTask(taskId);
    expect(polled).toMatchObject({ taskId, status: "input_required", createdAt: created.task.createdAt });
    expect(polled.statusMessage).toContain(approval.url);
    // tasks/result while pending: the 2025 era's -32042 with the page, at once (the connection is not held).
    const pending = await failure(client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema));
    expect(pending).toBeInstanceOf(McpError);
    expect((pending as McpError).code).toBe(-32042);
    expect((pending as McpError).data).toMatchObject({ elicitations: [{ mode: "url", elicitationId: approval.id, url: approval.url }] });
    expect(tools.executions("deploy", args)).toBe(0);

    expect((await decide(approval.id, "approve")).status).toBe(200);
    const approved = await client.experimental.tasks.getTask(taskId);
    expect(approved.status).toBe("input_required");
    expect(approved.statusMessage).toMatch(/^Approved .*call tasks\/result/);
    const result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
    expect(result).toMatchObject({ content: [{ type: "text", text: `ran deploy ${JSON.stringify(args)}` }], _meta: { [RELATED_TASK]: { taskId } } });
    expect(tools.executions("deploy", args)).toBe(1);
    // The gateway's task never reaches the server.
    expect(tools.params.filter((p) => JSON.stringify(p.arguments) === JSON.stringify(args)).every((p) => !("task" in p))).toBe(true);
    await waitFor(async () => (await client.experimental.tasks.getTask(taskId)).status === "completed");
    const again = await failure(client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema));
    expect(again.message).toMatch(/approval_refused.*keeps no results|keeps no results/);
    expect(tools.executions("deploy", args)).toBe(1);
    await client.close();
  });

  it("the SDK's own task stream: approved when the task is created, its poll finds it ready and tasks/result runs it once", async () => {
    const args = { target: "task-stream" };
    const client = await legacyClient();
    await client.listTools();
    const seen: string[] = [];
    let text: unknown;
    for await (const message of client.experimental.tasks.callToolStream({ name: "deploy", arguments: args }, CallToolResultSchema, { task: { ttl: 60_000 } })) {
      seen.push(message.type);
      // The stream waits while the test approves: the page it names is in the task's status message.
      if (message.type === "taskCreated") expect((await decide(/approval (ap_[A-Za-z0-9_-]+)/.exec(message.task.statusMessage ?? "")![1]!, "approve")).status).toBe(200);
      if (message.type === "result") text = (message.result.content as { text: string }[])[0]?.text;
      if (message.type === "error") throw message.error;
    }
    expect(seen).toEqual(["taskCreated", "taskStatus", "result"]);
    expect(text).toBe(`ran deploy ${JSON.stringify(args)}`);
    expect(tools.executions("deploy", args)).toBe(1);
    await client.close();
  });

  it("two concurrent tasks/result of an approved task run the call once; the other is refused", async () => {
    const args = { target: "task-2" };
    const client = await legacyClient();
    const created = await callAsTask(client, "deploy", args);
    await decide(approvalOf(created).id, "approve");
    const settled = await Promise.allSettled([0, 1].map(() => client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema)));
    expect(settled.filter((s) => s.status === "fulfilled")).toHaveLength(1);
    // In-band inside the session: the SDK's own McpError, with the gateway's code in its data.
    const refused = (settled.find((s) => s.status === "rejected") as PromiseRejectedResult).reason as McpError;
    expect(refused).toBeInstanceOf(McpError);
    expect(refused.data).toMatchObject({ code: "approval_refused" });
    expect(refused.message).toMatch(/already used/);
    expect(tools.executions("deploy", args)).toBe(1);
    await client.close();
  });

  it("a denial fails the task with its reason; tasks/result is refused and nothing runs", async () => {
    const args = { target: "task-3" };
    const client = await legacyClient();
    const created = await callAsTask(client, "deploy", args);
    await decide(approvalOf(created).id, "deny");
    const task = await client.experimental.tasks.getTask(created.task.taskId);
    expect(task.status).toBe("failed");
    expect(task.statusMessage).toContain("denied (e2e deny)");
    const denied = (await failure(client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema))) as McpError;
    expect(denied).toBeInstanceOf(McpError);
    expect(denied.data).toMatchObject({ code: "approval_refused" });
    expect(denied.message).toMatch(/denied \(e2e deny\)/);
    expect(tools.executions("deploy", args)).toBe(0);
    await client.close();
  });

  it("tasks/cancel cancels the task: the approval is revoked by the caller and no approver can approve it", async () => {
    const args = { target: "task-4" };
    const client = await legacyClient();
    const created = await callAsTask(client, "deploy", args);
    const { id } = approvalOf(created);
    const cancelled = await client.experimental.tasks.cancelTask(created.task.taskId);
    expect(cancelled).toMatchObject({ taskId: created.task.taskId, status: "cancelled" });
    expect((await client.experimental.tasks.getTask(created.task.taskId)).status).toBe("cancelled");
    const late = await decide(id, "approve");
    expect(late.status).toBe(400);
    const shown = (await (await fetch(`${gateway.adminUrl}/admin/approvals/${id}?tenant=demo`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as { approval: { state: string; decidedBy: string; history: { event: string; actor?: string }[] } };
    expect(shown.approval).toMatchObject({ state: "revoked", decidedBy: "caller" });
    expect(shown.approval.history.at(-1)).toMatchObject({ event: "revoked", actor: "caller" });
    // Cancelling what is over is refused; running it is refused.
    expect((await failure(client.experimental.tasks.cancelTask(created.task.taskId))).message).toMatch(/cannot be cancelled/);
    expect((await failure(client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema))).message).toMatch(/revoked/);
    expect(tools.executions("deploy", args)).toBe(0);
    // The audit trail shows the caller's cancellation.
    await waitFor(async () => {
      const audit = (await (await fetch(`${gateway.adminUrl}/admin/audit?tenant=demo`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as { events: { type: string; approvalId?: string; actor?: string }[] };
      return audit.events.some((e) => e.type === "approval.revoked" && e.approvalId === id && e.actor === "caller");
    });
    await client.close();
  });

  it("a handle is its caller's alone: another key, a tampered handle, another endpoint are an unknown task", async () => {
    const args = { target: "task-5" };
    const client = await legacyClient();
    const created = await callAsTask(client, "deploy", args);
    const { id } = approvalOf(created);
    await decide(id, "approve");
    const taskId = created.task.taskId;
    const other = await legacyClient(OTHER_KEY);
    for (const attempt of [() => other.experimental.tasks.getTask(taskId), () => other.experimental.tasks.getTaskResult(taskId, CallToolResultSchema), () => other.experimental.tasks.cancelTask(taskId)]) {
      const err = await failure(attempt());
      expect(err.message).toMatch(/Unknown task/);
      expect(err.message).not.toContain(id);
    }
    const flipped = taskId.slice(0, -6) + (taskId.at(-6) === "A" ? "B" : "A") + taskId.slice(-5);
    expect((await failure(client.experimental.tasks.getTaskResult(flipped, CallToolResultSchema))).message).toMatch(/Unknown task/);
    const virtual = await legacyClient(DEMO_KEY, "/mcp");
    expect((await failure(virtual.experimental.tasks.getTask(taskId))).message).toMatch(/Unknown task/);
    expect(tools.executions("deploy", args)).toBe(0);
    // Its own caller still runs it.
    expect(await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema)).toMatchObject({ content: [{ text: `ran deploy ${JSON.stringify(args)}` }] });
    expect(tools.executions("deploy", args)).toBe(1);
    await Promise.all([client.close(), other.close(), virtual.close()]);
  });

  it("the virtual server makes tasks too, under its own tool names", async () => {
    const args = { target: "task-6" };
    const client = await legacyClient(DEMO_KEY, "/mcp");
    expect((await client.listTools()).tools.find((t) => t.name === "ops.deploy")?.execution).toEqual({ taskSupport: "optional" });
    const created = await callAsTask(client, "ops.deploy", args);
    await decide(approvalOf(created).id, "approve");
    expect(await client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema)).toMatchObject({ content: [{ text: `ran deploy ${JSON.stringify(args)}` }] });
    expect(tools.executions("deploy", args)).toBe(1);
    await client.close();
  });

  it("a call too large to carry in a handle is answered as a plain 2025-era call: -32042, and no task", async () => {
    const client = await legacyClient();
    const args = { target: "task-big", blob: "x".repeat(40 * 1024) };
    const err = await failure(callAsTask(client, "deploy", args));
    expect(err).toBeInstanceOf(McpError);
    expect((err as McpError).code).toBe(-32042);
    expect(tools.executions("deploy", args)).toBe(0);
    await client.close();
  });

  it("a task-augmented call of a tool that needs no approval is -32601, and nothing runs; tasks/list is not served", async () => {
    const client = await legacyClient();
    const err = await failure(callAsTask(client, "spend", { n: 1 }));
    expect(err).toBeInstanceOf(McpError);
    expect((err as McpError).code).toBe(-32601);
    expect(err.message).toMatch(/cannot be called as a task/);
    expect(tools.executions("spend")).toBe(0);
    const list = await failure(client.experimental.tasks.listTasks());
    expect((list as McpError).code).toBe(-32601);
    // The same call without a task runs.
    expect(await client.callTool({ name: "spend", arguments: { n: 1 } })).toMatchObject({ content: [{ text: 'ran spend {"n":1}' }] });
    await client.close();
  });
});

/** Polls until `done` holds (the box may be slow; never a fixed sleep). */
async function waitFor(done: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  for (const end = Date.now() + timeoutMs; !(await done()); await new Promise((r) => setTimeout(r, 100))) {
    if (Date.now() > end) throw new Error("timed out waiting");
  }
}
