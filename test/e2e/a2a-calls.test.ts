import { createHash } from "node:crypto";
import { TaskState, type Message, type StreamResponse, type Task } from "@a2a-js/sdk";
import type { Message as Message03, Task as Task03 } from "a2a-sdk-v0-3";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { a2aClientV03, a2aClientV1, messageV1, withKey } from "./support/a2a-clients.ts";
import { startGateway, type RunningGateway } from "../../local-stack/stack.ts";
import { rawSocket } from "./support/raw-http.ts";
import { cardsServed, startA2aV03Agent, startA2aV1Agent, type A2aTestAgent, A2A_STATE_SECRET, agentIdOf } from "./support/a2a-agents.ts";
import { ADMIN_TOKEN, bundledConfig, expectNothingLeft } from "./support/stack.ts";

const KEYS = { caller: "sk-e2e-a2a-caller", narrow: "sk-e2e-a2a-narrow", tasked: "sk-e2e-a2a-tasked" } as const;
const sha = (k: string) => createHash("sha256").update(k).digest("hex");
/** The 1.0 agent's own token: only the gateway holds it. */
const AGENT_TOKEN = "agent-v1-secret-token";
/** One message to the priced agent costs 0.01 USD; the task's cap holds exactly this many. */
const PRICE_MICROS = 10_000;
const CAP_CALLS = 3;




const textOf = (m: Message | undefined) => m?.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("") ?? "";

describe("A2A calls through the gateway (POST /a2a/<agent>)", () => {
  let v1: A2aTestAgent;
  let v03: A2aTestAgent;
  let priced: A2aTestAgent;
  let gateway: RunningGateway;

  beforeAll(async () => {
    [v1, v03, priced] = await Promise.all([startA2aV1Agent({ bearer: AGENT_TOKEN }), startA2aV03Agent(), startA2aV1Agent({ name: "priced-v1" })]);
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.a2a = {
      stateSecret: A2A_STATE_SECRET.name,
      agents: [
        { name: "echo-v1", card: v1.cardUrl, credential: { secret: "AGENT_V1_TOKEN", scheme: "bearer" } },
        { name: "echo-v03", card: v03.cardUrl },
        { name: "priced", card: priced.cardUrl },
      ],
    };
    const p = bundledConfig("publication");
    const demo = p.tenants.find((t: any) => t.id === "demo");
    demo.teams[0].projects.push({ id: "a2a-loop", taskLimits: { money: { limit: (CAP_CALLS * PRICE_MICROS) / 1_000_000, currency: "USD" } } });
    demo.apiKeys.push(
      { id: "a2a-caller", sha256: sha(KEYS.caller), entrypoints: ["*"] },
      { id: "a2a-narrow", sha256: sha(KEYS.narrow), entrypoints: ["*"] },
      { id: "a2a-tasked", sha256: sha(KEYS.tasked), entrypoints: ["*"], chargeTo: `${demo.teams[0].id}/a2a-loop` },
    );
    p.a2a = {
      policy: {
        revision: "a2a-e2e-1",
        rules: [
          { id: "narrow-summarize", effect: "allow", principals: { keys: ["a2a-narrow"] }, agents: ["echo-v1"], skills: ["summarize"] },
          { id: "callers", effect: "allow", principals: { keys: ["a2a-caller", "a2a-tasked"] }, agents: ["*"], skills: ["*"] },
        ],
      },
      prices: [{ id: "priced-agent", agents: ["priced"], skills: ["*"], price: { version: "agents-2026-12", currency: "USD", perCall: PRICE_MICROS / 1_000_000 } }],
    };
    gateway = await startGateway({ adminToken: ADMIN_TOKEN, secrets: { AGENT_V1_TOKEN: AGENT_TOKEN, [A2A_STATE_SECRET.name]: A2A_STATE_SECRET.value }, config: { gateway: stringify(g), publication: stringify(p) } });
    // Cards are fetched off the request path: wait until each agent's first one is in.
    await cardsServed(gateway.publicUrl, KEYS.caller, ["echo-v1", "echo-v03", "priced"]);
  });

  afterAll(async () => {
    try {
      if (gateway) await expectNothingLeft(gateway.adminUrl);
    } finally {
      await Promise.all([gateway?.stop(), v1?.close(), v03?.close(), priced?.close()]);
    }
  });

  /** A raw JSON-RPC call, for exact errors. */
  const raw = async (agent: string, body: unknown, headers: Record<string, string> = {}, key: string = KEYS.caller) => {
    const res = await fetch(`${gateway.publicUrl}/a2a/${agent}`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as any };
  };
  /** The access lines of A2A calls so far. */
  const a2aLines = () =>
    gateway
      .output()
      .split("\n")
      .filter((l) => l.startsWith("{") && l.includes('"kind":"request"') && l.includes('"a2a":'))
      .map((l) => JSON.parse(l) as { requestId: string; entrypoint: string; outcome: string; a2a: Record<string, any> });

  it("discovers the card, then sends: the agent answers through the gateway, with its own credential only", async () => {
    const client = await a2aClientV1(gateway.publicUrl, "echo-v1", KEYS.caller);
    const before = v1.received.length;
    const answer = await client.sendMessage(messageV1("hello there", "summarize"));
    // A message answers (a task would carry a status).
    expect("status" in answer).toBe(false);
    expect(textOf(answer as Message)).toBe("[echo-v1] echo: hello there");
    const seen = v1.received.slice(before).filter((r) => r.method === "POST");
    expect(seen).toHaveLength(1);
    // The agent's own token reached it; nothing of the caller's did.
    expect(seen[0]!.headers.authorization).toBe(`Bearer ${AGENT_TOKEN}`);
    expect(JSON.stringify(seen[0]!.headers)).not.toContain(KEYS.caller);
    expect(seen[0]!.headers["a2a-version"]).toBe("1.0");
    await expect.poll(() => a2aLines().find((l) => l.a2a.method === "SendMessage" && l.a2a.agent === "echo-v1")).toMatchObject({
      entrypoint: "a2a/echo-v1",
      outcome: "success",
      a2a: { generation: "1.0", skill: "summarize", sent: true, decision: { allowed: true, rule: "callers", policyRevision: "a2a-e2e-1" } },
    });
    // Metrics by agent (from gateway.yaml) and skill, as MCP's by server and tool.
    await expect
      .poll(async () => await (await fetch(`${gateway.adminUrl}/admin/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text())
      .toMatch(/sluice_a2a_call_duration_seconds_count\{sluice_a2a_method="SendMessage",sluice_a2a_agent="echo-v1",sluice_a2a_skill="summarize",error_type=""\} [1-9]/);
    const metrics = await (await fetch(`${gateway.adminUrl}/admin/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
    expect(metrics).toMatch(/sluice_requests_total\{sluice_entrypoint="a2a\/echo-v1",[^}]*sluice_route="SendMessage"[^}]*\} [1-9]/);
  });

  it("streams a task (SSE) event by event, then gets it; the A2A task id is a correlation on the record", async () => {
    const client = await a2aClientV1(gateway.publicUrl, "echo-v1", KEYS.caller);
    const events: StreamResponse[] = [];
    for await (const ev of client.sendMessageStream(messageV1("task stream me", "summarize"))) events.push(ev);
    const kinds = events.map((e) => e.payload?.$case);
    expect(kinds[0]).toBe("task");
    expect(kinds).toContain("artifactUpdate");
    const last = events.at(-1)!;
    expect(last.payload?.$case === "statusUpdate" ? last.payload.value.status?.state : undefined).toBe(TaskState.TASK_STATE_COMPLETED);
    const taskId = events[0]!.payload?.$case === "task" ? events[0]!.payload.value.id : "";
    const task: Task = await client.getTask({ tenant: "", id: taskId, historyLength: undefined });
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(task.artifacts[0]?.parts[0]?.content).toMatchObject({ $case: "text", value: "[echo-v1] done: task stream me" });
    // The caller holds the gateway's bound id; the record correlates the agent's own.
    expect(taskId).toMatch(/^at1\./);
    expect(events.every((e) => (e.payload?.$case === "task" ? e.payload.value.id : e.payload?.$case === "statusUpdate" || e.payload?.$case === "artifactUpdate" ? e.payload.value.taskId : taskId) === taskId)).toBe(true);
    await expect.poll(() => a2aLines().find((l) => l.a2a.method === "SendStreamingMessage")?.a2a.a2aTaskId).toBe(agentIdOf(taskId));
    expect(a2aLines().find((l) => l.a2a.method === "GetTask")?.a2a).toMatchObject({ a2aTaskId: agentIdOf(taskId), sent: true });
  });

  it("cancels a held task and resubscribes to another until it is released", async () => {
    const client = await a2aClientV1(gateway.publicUrl, "echo-v1", KEYS.caller);
    // A held task: its first stream event names it, and it stays working.
    const first = async (text: string) => {
      const stream = client.sendMessageStream(messageV1(text, "summarize"));
      const ev = (await stream.next()).value as StreamResponse;
      void (async () => {
        for await (const _ of stream);
      })().catch(() => undefined);
      return ev.payload?.$case === "task" ? ev.payload.value : undefined;
    };
    const held = (await first("task hold one"))!;
    await expect.poll(() => v1.held()).toContain(agentIdOf(held.id));
    const canceled = await client.cancelTask({ tenant: "", id: held.id, metadata: undefined });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);

    const other = (await first("task hold two"))!;
    await expect.poll(() => v1.held()).toContain(agentIdOf(other.id));
    const resubscribed: StreamResponse[] = [];
    const reading = (async () => {
      for await (const ev of client.resubscribeTask({ tenant: "", id: other.id })) resubscribed.push(ev);
    })();
    await expect.poll(() => resubscribed.length).toBeGreaterThan(0);
    expect(v1.release(agentIdOf(other.id))).toBe(true);
    await reading;
    const last = resubscribed.at(-1)!;
    expect(last.payload?.$case === "statusUpdate" ? last.payload.value.status?.state : undefined).toBe(TaskState.TASK_STATE_COMPLETED);
  });

  it("binds task ids to their caller: another key, the agent's raw id and a forged id find no task, and nothing is sent", async () => {
    const client = await a2aClientV1(gateway.publicUrl, "echo-v1", KEYS.caller);
    const stream = client.sendMessageStream(messageV1("task hold mine", "summarize"));
    const ev = (await stream.next()).value as StreamResponse;
    void (async () => {
      for await (const _ of stream);
    })().catch(() => undefined);
    const mine = ev.payload?.$case === "task" ? ev.payload.value.id : "";
    const context = ev.payload?.$case === "task" ? ev.payload.value.contextId : "";
    expect(context).toMatch(/^ac1\./);
    const agentId = agentIdOf(mine);
    await expect.poll(() => v1.held()).toContain(agentId);
    const before = v1.received.length;
    const forged = `at1.${Buffer.from(agentId).toString("base64url")}.${"A".repeat(22)}`;
    const attempts: [string, string, string][] = [
      [KEYS.narrow, "GetTask", mine],
      [KEYS.narrow, "CancelTask", mine],
      [KEYS.narrow, "SubscribeToTask", mine],
      [KEYS.caller, "GetTask", agentId],
      [KEYS.caller, "CancelTask", forged],
    ];
    for (const [key, method, id] of attempts) {
      const res = await raw("echo-v1", { jsonrpc: "2.0", id: 7, method, params: { id } }, { "a2a-version": "1.0" }, key);
      expect(res.body.error, `${method} ${id.slice(0, 12)}`).toMatchObject({ code: -32001, data: { code: "agent_task_not_found" } });
      expect(res.body.id).toBe(7);
    }
    // Nor can it list the other caller's context.
    const listed = await raw("echo-v1", { jsonrpc: "2.0", id: 9, method: "ListTasks", params: { contextId: context } }, { "a2a-version": "1.0" }, KEYS.narrow);
    expect(listed.body.error).toMatchObject({ code: -32001, data: { code: "agent_task_not_found" } });
    // A message continuing another caller's task is refused the same way.
    const cont = await raw("echo-v1", { jsonrpc: "2.0", id: 8, method: "SendMessage", params: { message: { messageId: "m-x", role: "ROLE_USER", taskId: mine, parts: [{ text: "hi" }], metadata: { skill: "summarize" } } } }, { "a2a-version": "1.0" }, KEYS.narrow);
    expect(cont.body.error).toMatchObject({ code: -32001, data: { code: "agent_task_not_found" } });
    expect(v1.received.length).toBe(before);
    expect(v1.held()).toContain(agentId);
    // Its owner still can.
    expect((await client.cancelTask({ tenant: "", id: mine, metadata: undefined })).status?.state).toBe(TaskState.TASK_STATE_CANCELED);
  });

  it("a caller that leaves mid-stream, while the agent is silent, ends the call (cancelled)", async () => {
    const url = new URL(gateway.publicUrl);
    const body = JSON.stringify({ jsonrpc: "2.0", id: "leave", method: "SendStreamingMessage", params: { message: { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text: "task hold and leave" }], metadata: { skill: "summarize" } } } });
    const socket = await rawSocket(gateway.publicUrl);
    socket.on("error", () => {});
    const first = new Promise<string>((resolve) => socket.once("data", (d: Buffer) => resolve(d.toString())));
    socket.write(`POST /a2a/echo-v1 HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${KEYS.caller}\r\na2a-version: 1.0\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    expect(await first).toMatch(/content-type: text\/event-stream/i);
    await expect.poll(() => v1.held().length).toBeGreaterThan(0);
    socket.resetAndDestroy();
    await expect.poll(() => a2aLines().find((l) => l.a2a.jsonrpcId === "leave")?.outcome, { timeout: 5_000 }).toBe("cancelled");
    for (const id of v1.held()) v1.release(id);
  });

  it("serves a 0.3 caller to a 0.3 agent: send and get with the 0.3 SDK", async () => {
    const client = await a2aClientV03(gateway.publicUrl, "echo-v03", KEYS.caller);
    const answer = (await client.sendMessage({ message: { kind: "message", messageId: crypto.randomUUID(), role: "user", parts: [{ kind: "text", text: "hi from 0.3" }] } })) as Message03;
    expect(answer.parts[0]).toMatchObject({ kind: "text", text: "[echo-v03] echo: hi from 0.3" });
    const task = (await client.sendMessage({ message: { kind: "message", messageId: crypto.randomUUID(), role: "user", parts: [{ kind: "text", text: "task zero three" }] }, configuration: { blocking: true } })) as Task03;
    expect(task.kind).toBe("task");
    const got = await client.getTask({ id: task.id });
    expect(got.status.state).toBe("completed");
    await expect.poll(() => a2aLines().some((l) => l.a2a.method === "tasks/get")).toBe(true);
    expect(a2aLines().find((l) => l.a2a.method === "tasks/get")?.a2a).toMatchObject({ generation: "0.3", agent: "echo-v03", a2aTaskId: agentIdOf(task.id) });
  });

  it("refuses a skill the policy denies, which is absent from the caller's card, and never sends it", async () => {
    const card = (await (await fetch(`${gateway.publicUrl}/a2a/echo-v1/.well-known/agent-card.json`, { headers: { authorization: `Bearer ${KEYS.narrow}`, "a2a-version": "1.0" } })).json()) as { skills: { id: string }[] };
    expect(card.skills.map((s) => s.id)).toEqual(["summarize"]);
    const before = v1.received.length;
    const send = (skill: string | undefined) =>
      raw("echo-v1", { jsonrpc: "2.0", id: "d1", method: "SendMessage", params: { message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "hi" }], ...(skill ? { metadata: { skill } } : {}) } } }, { "a2a-version": "1.0" }, KEYS.narrow);
    const denied = await send("translate");
    expect(denied.status).toBe(200);
    expect(denied.body).toMatchObject({ jsonrpc: "2.0", id: "d1", error: { code: -32000, data: { code: "tool_not_allowed" } } });
    // Naming no skill needs every skill allowed.
    expect((await send(undefined)).body.error.data.code).toBe("tool_not_allowed");
    expect(v1.received.length).toBe(before);
    // The allowed skill goes through.
    expect((await send("summarize")).body.result).toBeDefined();
  });

  it("bridges the generations: a 0.3 SDK client of the 1.0 agent, a 1.0 SDK client streaming from the 0.3 agent", async () => {
    const old = await a2aClientV03(gateway.publicUrl, "echo-v1", KEYS.caller);
    const before = v1.received.length;
    const answer = (await old.sendMessage({ message: { kind: "message", messageId: crypto.randomUUID(), role: "user", parts: [{ kind: "text", text: "bridged hello" }], metadata: { skill: "summarize" } } })) as Message03;
    expect(answer).toMatchObject({ kind: "message", role: "agent", parts: [{ kind: "text", text: "[echo-v1] echo: bridged hello" }] });
    // The agent was spoken to in its own generation, with its own credential.
    const seen = v1.received.slice(before).find((r) => r.method === "POST")!;
    expect(seen.headers["a2a-version"]).toBe("1.0");
    expect(seen.headers.authorization).toBe(`Bearer ${AGENT_TOKEN}`);

    const client = await a2aClientV1(gateway.publicUrl, "echo-v03", KEYS.caller);
    const events: StreamResponse[] = [];
    for await (const ev of client.sendMessageStream(messageV1("task across generations"))) events.push(ev);
    expect(events[0]?.payload?.$case).toBe("task");
    const last = events.at(-1)!;
    expect(last.payload?.$case === "statusUpdate" ? last.payload.value.status?.state : undefined).toBe(TaskState.TASK_STATE_COMPLETED);
    const taskId = events[0]!.payload?.$case === "task" ? events[0]!.payload.value.id : "";
    expect((await client.getTask({ tenant: "", id: taskId, historyLength: undefined })).status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    await expect.poll(() => a2aLines().find((l) => l.a2a.method === "SendStreamingMessage" && l.a2a.agent === "echo-v03")?.a2a).toMatchObject({ generation: "1.0", a2aTaskId: agentIdOf(taskId), sent: true });
  });

  it("refuses an A2A-Version it does not speak, and what cannot be bridged, with typed JSON-RPC errors", async () => {
    const body = { jsonrpc: "2.0", id: 9, method: "SendMessage", params: { message: { messageId: "m", role: "ROLE_USER", parts: [{ text: "hi" }] } } };
    const forged = await raw("echo-v1", body, { "a2a-version": "2.7" });
    expect(forged.body).toMatchObject({ id: 9, error: { code: -32009, data: { code: "agent_version_not_supported", supported: ["1.0", "0.3"], requested: "2.7" } } });
    // 0.3 has no ListTasks: refused before anything is sent.
    const before = v03.received.length;
    const cross = await raw("echo-v03", { jsonrpc: "2.0", id: 9, method: "ListTasks", params: { contextId: "c" } }, { "a2a-version": "1.0" });
    expect(cross.body).toMatchObject({ id: 9, error: { code: -32004, data: { code: "agent_call_not_bridgeable" } } });
    expect(v03.received.length).toBe(before);
    // No header is 0.3: a 1.0 method is then unknown, with a hint.
    const noHeader = await raw("echo-v1", body);
    expect(noHeader.body).toMatchObject({ id: 9, error: { code: -32601, data: { code: "agent_method_not_found" } } });
    expect(noHeader.body.error.message).toMatch(/A2A-Version: 1\.0/);
    // Push configs are not served yet.
    const push = await raw("echo-v1", { jsonrpc: "2.0", id: 10, method: "CreateTaskPushNotificationConfig", params: { taskId: "t", url: "http://169.254.169.254/" } }, { "a2a-version": "1.0" });
    expect(push.body).toMatchObject({ id: 10, error: { code: -32004, data: { code: "agent_operation_unsupported" } } });
    // Other HTTP methods are 405; no credential is 401.
    expect((await fetch(`${gateway.publicUrl}/a2a/echo-v1`, { headers: { authorization: `Bearer ${KEYS.caller}` } })).status).toBe(405);
    expect((await fetch(`${gateway.publicUrl}/a2a/echo-v1`, { method: "POST", body: JSON.stringify(body) })).status).toBe(401);
  });

  it("admits exactly the priced calls a task's cap covers when sent concurrently; the refused ones never reach the agent", async () => {
    const before = priced.received.filter((r) => r.method === "POST").length;
    const taskHeaders = { "x-sluice-task-id": "a2a-capped-task" };
    const f = withKey(KEYS.tasked);
    const call = () =>
      f(`${gateway.publicUrl}/a2a/priced`, {
        method: "POST",
        headers: { "content-type": "application/json", "a2a-version": "1.0", ...taskHeaders },
        body: JSON.stringify({ jsonrpc: "2.0", id: crypto.randomUUID(), method: "SendMessage", params: { message: { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text: "pay me" }] } } }),
      }).then(async (r) => (await r.json()) as any);
    const answers = await Promise.all(Array.from({ length: 3 * CAP_CALLS }, call));
    const ok = answers.filter((a) => a.result !== undefined);
    const refused = answers.filter((a) => a.error !== undefined);
    expect(ok).toHaveLength(CAP_CALLS);
    for (const r of refused) expect(r.error.data.code).toBe("budget_exceeded");
    expect(priced.received.filter((r) => r.method === "POST").length - before).toBe(CAP_CALLS);
    await expect
      .poll(() => a2aLines().filter((l) => l.a2a.agent === "priced" && l.a2a.charge?.settlement === "charged").length)
      .toBe(CAP_CALLS);
    expect(a2aLines().find((l) => l.a2a.charge)?.a2a.charge).toMatchObject({ rule: "priced-agent", micros: PRICE_MICROS, priceVersion: "agents-2026-12" });
  });
});
