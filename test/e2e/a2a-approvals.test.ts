import { createHash } from "node:crypto";
import { Role, TaskState, type Message, type StreamResponse, type Task } from "@a2a-js/sdk";
import type { Message as Message03, Task as Task03 } from "a2a-sdk-v0-3";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { a2aClientV03, a2aClientV1, messageV1 } from "./support/a2a-clients.ts";
import { startGateway, type RunningGateway } from "../../local-stack/stack.ts";
import { A2A_STATE_SECRET, cardsServed, startA2aV03Agent, startA2aV1Agent, type A2aTestAgent } from "./support/a2a-agents.ts";
import { ADMIN_TOKEN, bundledConfig, expectNothingLeft } from "./support/stack.ts";

const KEYS = { caller: "sk-e2e-a2a-approvals-caller", other: "sk-e2e-a2a-approvals-other", tasked: "sk-e2e-a2a-approvals-tasked" } as const;
/** One message to echo-v03 costs 0.01 USD; the tasked key's business task holds exactly one. */
const PRICE_USD = 0.01;
const APPROVER_TOKEN = "e2e-a2a-approver-token";
const sha = (k: string) => createHash("sha256").update(k).digest("hex");
/** Long enough that no approval here expires while a slow box runs the test. */
const TTL_MS = 120_000;



const message03 = (text: string, skill?: string, taskId?: string): Message03 => ({
  kind: "message",
  messageId: crypto.randomUUID(),
  role: "user",
  parts: [{ kind: "text", text }],
  ...(skill ? { metadata: { skill } } : {}),
  ...(taskId ? { taskId } : {}),
});

const textOf = (m: Message | undefined) => m?.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("") ?? "";

/** What the gateway says of the approval a task waits for (`sluice.dev/approval`). */
interface ApprovalMeta {
  readonly id: string;
  readonly url: string;
  readonly state: string;
  readonly expiresAt: string;
}
const approvalOf = (task: { metadata?: unknown }) => (task.metadata as Record<string, ApprovalMeta>)["sluice.dev/approval"]!;

describe("approvals of A2A messages (a rule with approval: required)", () => {
  let v1: A2aTestAgent;
  let v03: A2aTestAgent;
  let gateway: RunningGateway;

  beforeAll(async () => {
    [v1, v03] = await Promise.all([startA2aV1Agent(), startA2aV03Agent()]);
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.a2a = { agents: [{ name: "echo-v1", card: v1.cardUrl }, { name: "echo-v03", card: v03.cardUrl }], stateSecret: A2A_STATE_SECRET.name };
    g.governance = { approverTokenSecret: "APPROVER_TOKEN", approvals: { ttlMs: TTL_MS, stateSecret: "APPROVAL_STATE_SECRET" } };
    const p = bundledConfig("publication");
    const demo = p.tenants.find((t: any) => t.id === "demo");
    demo.teams[0].projects.push({ id: "a2a-appr-loop", taskLimits: { money: { limit: PRICE_USD, currency: "USD" } } });
    demo.apiKeys.push(
      { id: "a2a-appr-caller", sha256: sha(KEYS.caller), entrypoints: ["*"] },
      { id: "a2a-appr-other", sha256: sha(KEYS.other), entrypoints: ["*"] },
      { id: "a2a-appr-tasked", sha256: sha(KEYS.tasked), entrypoints: ["*"], chargeTo: `${demo.teams[0].id}/a2a-appr-loop` },
    );
    const principals = { keys: ["a2a-appr-caller", "a2a-appr-other", "a2a-appr-tasked"] };
    p.a2a = {
      policy: {
        revision: "a2a-approvals-1",
        rules: [
          { id: "risky-translate", effect: "allow", principals, agents: ["*"], skills: ["translate"], approval: "required" },
          { id: "plain-summarize", effect: "allow", principals, agents: ["*"], skills: ["summarize"] },
        ],
      },
      routes: [{ name: "language", match: { tags: ["language"] }, agents: ["echo-v1"] }],
      prices: [{ id: "priced-v03", agents: ["echo-v03"], skills: ["*"], price: { version: "agents-2026-12", currency: "USD", perCall: PRICE_USD } }],
    };
    gateway = await startGateway({
      adminToken: ADMIN_TOKEN,
      secretNames: ["APPROVER_TOKEN", "APPROVAL_STATE_SECRET", A2A_STATE_SECRET.name],
      secrets: { APPROVER_TOKEN, APPROVAL_STATE_SECRET: "approval-state-secret-for-a2a-0123456789", [A2A_STATE_SECRET.name]: A2A_STATE_SECRET.value },
      config: { gateway: stringify(g), publication: stringify(p) },
    });
    await cardsServed(gateway.publicUrl, KEYS.caller, ["echo-v1", "echo-v03"]);
  });

  afterAll(async () => {
    try {
      if (gateway) await expectNothingLeft(gateway.adminUrl);
    } finally {
      await Promise.all([gateway?.stop(), v1?.close(), v03?.close()]);
    }
  });

  const clientV1 = (agent: string, key: string = KEYS.caller) => a2aClientV1(gateway.publicUrl, agent, key);
  const clientV03 = (agent: string, key: string = KEYS.caller) => a2aClientV03(gateway.publicUrl, agent, key);
  /** A raw JSON-RPC call, for exact errors. */
  const raw = async (path: string, body: unknown, generation: "1.0" | "0.3" = "1.0", key: string = KEYS.caller, headers: Record<string, string> = {}) => {
    const res = await fetch(`${gateway.publicUrl}${path}`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "a2a-version": generation, ...headers }, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as any };
  };
  const decide = async (id: string, action: "approve" | "deny" | "revoke") => {
    const res = await fetch(`${gateway.adminUrl}/admin/approvals/${id}/${action}?tenant=demo`, { method: "POST", headers: { authorization: `Bearer ${APPROVER_TOKEN}`, "content-type": "application/json" }, body: JSON.stringify({ reason: `e2e ${action}` }) });
    expect(res.status).toBe(200);
  };
  const approvalAtDesk = async (id: string) => {
    const res = await fetch(`${gateway.adminUrl}/admin/approvals/${id}?tenant=demo`, { headers: { authorization: `Bearer ${APPROVER_TOKEN}` } });
    return ((await res.json()) as { approval: Record<string, unknown> }).approval;
  };
  const posts = (agent: A2aTestAgent) => agent.received.filter((r) => r.method === "POST").length;

  it("1.0: holds the message (auth-required, the status URL), and after approval the continuation sends the original once", async () => {
    const client = await clientV1("echo-v1");
    const before = posts(v1);
    const held = (await client.sendMessage(messageV1("translate 'hello' to French", "translate"))) as Task;
    expect(held.status?.state).toBe(TaskState.TASK_STATE_AUTH_REQUIRED);
    const approval = approvalOf(held);
    expect(approval).toMatchObject({ url: `${gateway.publicUrl}/approvals/${approval.id}`, state: "pending" });
    expect(Date.parse(approval.expiresAt)).toBeGreaterThan(Date.now());
    expect(held.status?.message?.role).toBe(Role.ROLE_AGENT);
    expect(textOf(held.status?.message)).toContain(approval.url);
    // The task id is the gateway's own sealed handle: the message cannot be read out of it.
    expect(held.id).toMatch(/^ga1\./);
    expect(held.id).not.toContain("hello");
    // Never sent: the agent saw nothing.
    expect(posts(v1)).toBe(before);
    // The status page the caller is sent to, without a credential.
    const page = await fetch(approval.url);
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/Agent message approval[\s\S]*echo-v1[\s\S]*translate[\s\S]*pending/);
    expect(await approvalAtDesk(approval.id)).toMatchObject({ state: "pending", kind: "agent", server: "echo-v1", tool: "translate", rule: "risky-translate" });

    const pending = await client.getTask({ tenant: "", id: held.id, historyLength: undefined });
    expect(pending.status?.state).toBe(TaskState.TASK_STATE_AUTH_REQUIRED);
    // Still pending: a continuation is answered with the same task, and nothing is sent.
    const early = (await client.sendMessage(messageV1("go", undefined, { taskId: held.id }))) as Task;
    expect(early).toMatchObject({ id: held.id, status: { state: TaskState.TASK_STATE_AUTH_REQUIRED } });
    expect(posts(v1)).toBe(before);

    await decide(approval.id, "approve");
    const approved = await client.getTask({ tenant: "", id: held.id, historyLength: undefined });
    expect(approved.status?.state).toBe(TaskState.TASK_STATE_AUTH_REQUIRED);
    expect(approvalOf(approved).state).toBe("approved");
    expect(textOf(approved.status?.message)).toMatch(/approved/i);

    // The continuation's own text is not sent: the held message is, once.
    const ran = (await client.sendMessage(messageV1("this text is not sent", undefined, { taskId: held.id }))) as Message;
    expect(textOf(ran)).toBe("[echo-v1] echo: translate 'hello' to French");
    expect(posts(v1)).toBe(before + 1);
    const done = await client.getTask({ tenant: "", id: held.id, historyLength: undefined });
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(await approvalAtDesk(approval.id)).toMatchObject({ state: "executed", execution: "succeeded" });

    // A second continuation is refused, and sends nothing.
    const again = await raw("/a2a/echo-v1", { jsonrpc: "2.0", id: "again", method: "SendMessage", params: { message: { messageId: "m-again", role: "ROLE_USER", parts: [{ text: "again" }], taskId: held.id } } });
    expect(again.body).toMatchObject({ id: "again", error: { code: -32000, data: { code: "approval_refused" } } });
    expect(posts(v1)).toBe(before + 1);

    // The approval's trail is the tool calls' own: requested, granted, and the one execution names it.
    const trail = () =>
      gateway
        .output()
        .split("\n")
        .filter((l) => l.startsWith('{"kind":"audit"'))
        .map((l) => JSON.parse(l) as { type: string; approvalId?: string; target?: unknown; execution?: string })
        .filter((e) => e.approvalId === approval.id);
    await expect.poll(() => trail().map((e) => e.type).sort()).toEqual(["agent.executed", "approval.granted", "approval.requested"]);
    expect(trail().find((e) => e.type === "approval.requested")?.target).toEqual({ kind: "skill", server: "echo-v1", name: "translate" });
    expect(trail().find((e) => e.type === "agent.executed")?.execution).toBe("succeeded");
  });

  it("a held message that continues a context keeps the caller's context id: held, answered and sent in it", async () => {
    const client = await clientV1("echo-v1");
    const first = (await client.sendMessage(messageV1("summarize first", "summarize"))) as Message;
    const context = first.contextId;
    expect(context).toMatch(/^ac1\./);
    const held = (await client.sendMessage(messageV1("translate in context", "translate", { contextId: context }))) as Task;
    expect(held.status?.state).toBe(TaskState.TASK_STATE_AUTH_REQUIRED);
    // The caller's id, not the agent's behind it.
    expect(held.contextId).toBe(context);
    await decide(approvalOf(held).id, "approve");
    const ran = (await client.sendMessage(messageV1("go", undefined, { taskId: held.id }))) as Message;
    expect(textOf(ran)).toBe("[echo-v1] echo: translate in context");
    expect(ran.contextId).toBe(context);
  });

  it("another key's GetTask, a tampered handle and another endpoint all answer TaskNotFoundError (-32001)", async () => {
    const client = await clientV1("echo-v1");
    const held = (await client.sendMessage(messageV1("translate this for no one", "translate"))) as Task;
    const get = (id: string, key: string = KEYS.caller, path = "/a2a/echo-v1") => raw(path, { jsonrpc: "2.0", id: "g", method: "GetTask", params: { id } }, "1.0", key);
    expect((await get(held.id)).body.result.status.state).toBe("TASK_STATE_AUTH_REQUIRED");
    // SubscribeToTask answers the same task as its one event, and the stream ends.
    const sub = await fetch(`${gateway.publicUrl}/a2a/echo-v1`, { method: "POST", headers: { authorization: `Bearer ${KEYS.caller}`, "content-type": "application/json", "a2a-version": "1.0" }, body: JSON.stringify({ jsonrpc: "2.0", id: "s", method: "SubscribeToTask", params: { id: held.id } }) });
    expect(sub.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const frames = (await sub.text())
      .split("\n\n")
      .filter((f) => f.startsWith("data: "))
      .map((f) => JSON.parse(f.slice("data: ".length)) as { result: { task: { id: string; status: { state: string } } } });
    expect(frames).toHaveLength(1);
    expect(frames[0]!.result.task).toMatchObject({ id: held.id, status: { state: "TASK_STATE_AUTH_REQUIRED" } });
    const notFound = { status: 200, body: { id: "g", error: { code: -32001, data: { code: "agent_task_not_found" } } } };
    expect(await get(held.id, KEYS.other)).toMatchObject(notFound);
    expect(await get(`${held.id.slice(0, -3)}AAA`)).toMatchObject(notFound);
    expect(await get(held.id, KEYS.caller, "/a2a/echo-v03")).toMatchObject(notFound);
    expect(await get(held.id, KEYS.caller, "/a2a")).toMatchObject(notFound);
    // The other key cannot continue or cancel it either.
    const cancel = await raw("/a2a/echo-v1", { jsonrpc: "2.0", id: "g", method: "CancelTask", params: { id: held.id } }, "1.0", KEYS.other);
    expect(cancel).toMatchObject(notFound);
    // The SDK reads it as the agent's own error.
    const other = await clientV1("echo-v1", KEYS.other);
    await expect(other.getTask({ tenant: "", id: held.id, historyLength: undefined })).rejects.toThrow();
    await decide(approvalOf(held).id, "deny");
  });

  it("streaming: the held message is one auth-required task event, and the stream ends", async () => {
    const client = await clientV1("echo-v1");
    const before = posts(v1);
    const events: StreamResponse[] = [];
    for await (const ev of client.sendMessageStream(messageV1("task translate streamed", "translate"))) events.push(ev);
    expect(events).toHaveLength(1);
    const task = events[0]!.payload?.$case === "task" ? events[0]!.payload.value : undefined;
    expect(task?.status?.state).toBe(TaskState.TASK_STATE_AUTH_REQUIRED);
    expect(textOf(task?.status?.message)).toContain(approvalOf(task!).url);
    expect(posts(v1)).toBe(before);
    await decide(approvalOf(task!).id, "approve");
    // Continued as a stream: the agent's own task, event by event.
    const ran: StreamResponse[] = [];
    for await (const ev of client.sendMessageStream(messageV1("ignored", undefined, { taskId: task!.id }))) ran.push(ev);
    const last = ran.at(-1)?.payload;
    expect(last?.$case === "statusUpdate" ? last.value.status?.state : undefined).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(posts(v1)).toBe(before + 1);
  });

  it("0.3: auth-required, a denied approval reads rejected and its continuation is refused; a caller's cancel reads canceled", async () => {
    const client = await clientV03("echo-v03");
    const before = posts(v03);
    const held = (await client.sendMessage({ message: message03("translate ciao", "translate") })) as Task03;
    expect(held).toMatchObject({ kind: "task", status: { state: "auth-required", message: { role: "agent" } } });
    const approval = approvalOf(held);
    expect(approval.state).toBe("pending");
    expect(posts(v03)).toBe(before);
    await decide(approval.id, "deny");
    const rejected = await client.getTask({ id: held.id });
    expect(rejected.status.state).toBe("rejected");
    expect(approvalOf(rejected).state).toBe("denied");
    const refused = await raw("/a2a/echo-v03", { jsonrpc: "2.0", id: "c", method: "message/send", params: { message: message03("go", undefined, held.id) } }, "0.3");
    expect(refused.body).toMatchObject({ error: { code: -32000, data: { code: "approval_refused" } } });
    expect(posts(v03)).toBe(before);

    const second = (await client.sendMessage({ message: message03("translate addio", "translate") })) as Task03;
    const canceled = await client.cancelTask({ id: second.id });
    expect(canceled.status.state).toBe("canceled");
    expect(await approvalAtDesk(approvalOf(second).id)).toMatchObject({ state: "revoked", decidedBy: "caller" });
    // Ended: a second cancel is A2A's TaskNotCancelableError.
    const twice = await raw("/a2a/echo-v03", { jsonrpc: "2.0", id: "x", method: "tasks/cancel", params: { id: second.id } }, "0.3");
    expect(twice.body).toMatchObject({ error: { code: -32002, data: { code: "agent_task_not_cancelable" } } });
    // A message that needs no approval goes straight through.
    const plain = (await client.sendMessage({ message: message03("hi", "summarize") })) as Message03;
    expect(plain.parts[0]).toMatchObject({ text: "[echo-v03] echo: hi" });
  });

  it("a 0.3 caller continues a task held in 1.0: the original message is bridged, sent once", async () => {
    const held = (await (await clientV1("echo-v1")).sendMessage(messageV1("translate across", "translate"))) as Task;
    await decide(approvalOf(held).id, "approve");
    const before = posts(v1);
    const ran = (await (await clientV03("echo-v1")).sendMessage({ message: message03("ignored", undefined, held.id) })) as Message03;
    expect(ran.parts[0]).toMatchObject({ kind: "text", text: "[echo-v1] echo: translate across" });
    expect(posts(v1)).toBe(before + 1);
  });

  it("the virtual agent: routing picks the agent, the gate holds it; the task lives on /a2a and its continuation goes to that agent", async () => {
    const before = posts(v1);
    const send = (message: Record<string, unknown>, id = "v") => raw("/a2a", { jsonrpc: "2.0", id, method: "SendMessage", params: { message } });
    const held = await send({ messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text: "translate via routing" }], metadata: { skill: "translate", tags: ["language"] } });
    const task = held.body.result.task;
    expect(task.status.state).toBe("TASK_STATE_AUTH_REQUIRED");
    const approval = approvalOf(task);
    expect(await approvalAtDesk(approval.id)).toMatchObject({ server: "echo-v1", tool: "translate" });
    expect((await raw("/a2a", { jsonrpc: "2.0", id: "g", method: "GetTask", params: { id: task.id } })).body.result.status.state).toBe("TASK_STATE_AUTH_REQUIRED");
    await decide(approval.id, "approve");
    const ran = await send({ messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text: "ignored" }], taskId: task.id });
    expect(ran.body.result.message.parts[0].text).toBe("[echo-v1] echo: translate via routing");
    expect(posts(v1)).toBe(before + 1);
  });

  it("reserves before the claim: a spent task budget refuses the continuation and leaves the approval standing", async () => {
    const task = { "x-sluice-task-id": "a2a-approval-capped-task" };
    const send = (message: Message03, id: string) => raw("/a2a/echo-v03", { jsonrpc: "2.0", id, method: "message/send", params: { message } }, "0.3", KEYS.tasked, task);
    const held = (await send(message03("translate under a cap", "translate"), "h")).body.result as Task03;
    expect(held.status.state).toBe("auth-required");
    const approval = approvalOf(held);
    await decide(approval.id, "approve");
    const before = posts(v03);
    // The task's whole cap is spent by a message that needs no approval.
    expect((await send(message03("spend it", "summarize"), "spend")).body.result).toMatchObject({ kind: "message" });
    const refused = await send(message03("go", undefined, held.id), "go");
    expect(refused.body).toMatchObject({ error: { data: { code: "budget_exceeded" } } });
    expect(posts(v03)).toBe(before + 1);
    expect(await approvalAtDesk(approval.id)).toMatchObject({ state: "approved" });
  });

  it("refuses, typed, a message too large to hold for approval; nothing is asked at the desk", async () => {
    const res = await raw("/a2a/echo-v1", { jsonrpc: "2.0", id: "big", method: "SendMessage", params: { message: { messageId: "m-big", role: "ROLE_USER", parts: [{ text: "x".repeat(40_000) }], metadata: { skill: "translate" } } } });
    expect(res.body).toMatchObject({ id: "big", error: { code: -32600, data: { code: "request_too_large" } } });
  });
});
