import { createHash } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { SendMessageRequest, Task } from "@a2a-js/sdk";
import type { Task as Task03 } from "a2a-sdk-v0-3";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { a2aClientV03, a2aClientV1, messageV1 } from "./support/a2a-clients.ts";
import { startGateway, type RunningGateway } from "../../local-stack/stack.ts";
import { A2A_STATE_SECRET, agentIdOf, cardsServed, startA2aV03Agent, startA2aV1Agent, type A2aTestAgent } from "./support/a2a-agents.ts";
import { ADMIN_TOKEN, bundledConfig, expectNothingLeft } from "./support/stack.ts";

const KEYS = { caller: "sk-e2e-push-caller", other: "sk-e2e-push-other" } as const;
const sha = (k: string) => createHash("sha256").update(k).digest("hex");

/** One notification the webhook receiver got. */
interface Delivered {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: any;
}

/** A loopback webhook receiver: records every POST, answers 200. */
async function startReceiver(): Promise<{ origin: string; got: Delivered[]; close: () => Promise<void> }> {
  const got: Delivered[] = [];
  const server: Server = createServer((req, res) => {
    let text = "";
    req.on("data", (c) => (text += c));
    req.on("end", () => {
      got.push({ path: req.url ?? "", headers: { ...req.headers }, body: text === "" ? undefined : JSON.parse(text) });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const addr = server.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;
  return {
    origin: `http://127.0.0.1:${port}`,
    got,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}



function send1(text: string, push: { url: string; token: string; id: string } | undefined): SendMessageRequest {
  return {
    ...messageV1(text),
    configuration:
      push === undefined
        ? undefined
        : { acceptedOutputModes: [], returnImmediately: false, taskPushNotificationConfig: { tenant: "", id: push.id, taskId: "", url: push.url, token: push.token, authentication: undefined } },
  };
}

describe("A2A push notifications through the gateway's relay", () => {
  let v1: A2aTestAgent;
  let v03: A2aTestAgent;
  let hooks: Awaited<ReturnType<typeof startReceiver>>;
  let gateway: RunningGateway;

  beforeAll(async () => {
    [v1, v03, hooks] = await Promise.all([startA2aV1Agent({ push: true }), startA2aV03Agent({ push: true }), startReceiver()]);
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.a2a = {
      stateSecret: A2A_STATE_SECRET.name,
      agents: [
        { name: "echo-v1", card: v1.cardUrl },
        { name: "echo-v03", card: v03.cardUrl },
      ],
      // The operator's statement: this loopback receiver may be a webhook (callers' URLs are otherwise public https only).
      push: { allowOrigins: [hooks.origin] },
    };
    const p = bundledConfig("publication");
    const demo = p.tenants.find((t: any) => t.id === "demo");
    demo.apiKeys.push({ id: "push-caller", sha256: sha(KEYS.caller), entrypoints: ["*"] }, { id: "push-other", sha256: sha(KEYS.other), entrypoints: ["*"] });
    p.a2a = { policy: { revision: "push-e2e-1", rules: [{ id: "callers", effect: "allow", principals: { keys: ["push-caller", "push-other"] }, agents: ["*"], skills: ["*"] }] } };
    gateway = await startGateway({ adminToken: ADMIN_TOKEN, secrets: { [A2A_STATE_SECRET.name]: A2A_STATE_SECRET.value }, config: { gateway: stringify(g), publication: stringify(p) } });
    await cardsServed(gateway.publicUrl, KEYS.caller, ["echo-v1", "echo-v03"]);
  });

  afterAll(async () => {
    try {
      if (gateway) await expectNothingLeft(gateway.adminUrl);
    } finally {
      await Promise.all([gateway?.stop(), v1?.close(), v03?.close(), hooks?.close()]);
    }
  });

  const raw = async (agent: string, body: unknown, key: string = KEYS.caller, version = "1.0") => {
    const res = await fetch(`${gateway.publicUrl}/a2a/${agent}`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "a2a-version": version }, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as any };
  };
  const relayOf = (agent: A2aTestAgent, configId: string) => {
    const stored = agent.pushConfigs.find((c) => JSON.stringify(c.config).includes(configId));
    if (!stored) throw new Error(`no stored config ${configId}`);
    return stored;
  };

  it("the card claims push notifications when the agent declares them and the relay is configured", async () => {
    const res = await fetch(`${gateway.publicUrl}/a2a/echo-v1/.well-known/agent-card.json`, { headers: { authorization: `Bearer ${KEYS.caller}`, "a2a-version": "1.0" } });
    expect(((await res.json()) as any).capabilities).toMatchObject({ pushNotifications: true });
  });

  it("relays a 1.0 agent's notifications to a 1.0 caller's webhook with the caller's token; the agent holds only the relay address", async () => {
    const client = await a2aClientV1(gateway.publicUrl, "echo-v1", KEYS.caller);
    const url = `${hooks.origin}/hooks/one?x=1`;
    const task = (await client.sendMessage(send1("task with push", { url, token: "caller-token-1", id: "cfg-one" }))) as Task;
    expect(task.id).not.toBe("");
    await expect.poll(() => hooks.got.filter((d) => d.path === "/hooks/one?x=1" && d.body?.statusUpdate?.status?.state === "TASK_STATE_COMPLETED").length, { timeout: 10_000 }).toBeGreaterThan(0);
    const delivered = hooks.got.filter((d) => d.path === "/hooks/one?x=1");
    for (const d of delivered) {
      expect(d.headers["x-a2a-notification-token"]).toBe("caller-token-1");
      expect(d.headers.authorization).toBeUndefined();
      const inner = d.body.task ?? d.body.statusUpdate ?? d.body.artifactUpdate;
      expect(inner.id ?? inner.taskId).toBe(task.id);
    }
    // The agent was given the gateway's relay address and token: never the caller's URL or token.
    const stored = relayOf(v1, "cfg-one");
    expect(String(stored.config.url).startsWith(`${gateway.publicUrl}/a2a/echo-v1/push/`)).toBe(true);
    expect(JSON.stringify(stored.config)).not.toContain("caller-token-1");
    expect(JSON.stringify(stored.config)).not.toContain(hooks.origin);
    expect(stored.config.token).not.toBe("");
    // Its relayed call is recorded as the caller's.
    await expect
      .poll(() =>
        gateway
          .output()
          .split("\n")
          .filter((l) => l.startsWith("{") && l.includes('"kind":"request"') && l.includes('"push/relay"'))
          .map((l) => JSON.parse(l)),
      )
      .toContainEqual(expect.objectContaining({ entrypoint: "a2a/echo-v1", outcome: "success", a2a: expect.objectContaining({ method: "push/relay", agent: "echo-v1", sent: true }) }));
  });

  it("relays a 0.3 agent's task to a 1.0 caller in 1.0's shape; get and list show the caller its own config, another key nothing", async () => {
    const client = await a2aClientV1(gateway.publicUrl, "echo-v03", KEYS.caller);
    const url = `${hooks.origin}/hooks/cross`;
    const task = (await client.sendMessage(send1("task crossing", { url, token: "caller-token-x", id: "cfg-cross" }))) as Task;
    await expect.poll(() => hooks.got.filter((d) => d.path === "/hooks/cross" && d.body?.task?.status?.state === "TASK_STATE_COMPLETED").length, { timeout: 10_000 }).toBeGreaterThan(0);
    for (const d of hooks.got.filter((x) => x.path === "/hooks/cross")) {
      expect(d.headers["x-a2a-notification-token"]).toBe("caller-token-x");
      expect(d.body.task.id).toBe(task.id);
      expect(d.body.kind).toBeUndefined();
    }
    const stored = relayOf(v03, "cfg-cross");
    expect(String(stored.config.url).startsWith(`${gateway.publicUrl}/a2a/echo-v03/push/`)).toBe(true);
    expect(JSON.stringify(stored.config)).not.toMatch(/caller-token-x|hooks\/cross/);

    const got = await raw("echo-v03", { jsonrpc: "2.0", id: 1, method: "GetTaskPushNotificationConfig", params: { taskId: task.id, id: "cfg-cross" } });
    expect(got.body.result).toMatchObject({ taskId: task.id, id: "cfg-cross", url, token: "caller-token-x" });
    const listed = await raw("echo-v03", { jsonrpc: "2.0", id: 2, method: "ListTaskPushNotificationConfigs", params: { taskId: task.id } });
    expect(listed.body.result.configs).toEqual([expect.objectContaining({ id: "cfg-cross", url, token: "caller-token-x" })]);
    // Another key sees nothing of it: the task itself is not one it was given; nor can it delete the config.
    const before = v03.received.length;
    for (const method of ["GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig"]) {
      const theirs = await raw("echo-v03", { jsonrpc: "2.0", id: 3, method, params: { taskId: task.id, id: "cfg-cross" } }, KEYS.other);
      expect(theirs.body.error, method).toMatchObject({ code: -32001, data: { code: "agent_task_not_found" } });
      expect(JSON.stringify(theirs.body)).not.toMatch(/caller-token-x|hooks\/cross|\/push\//);
    }
    expect(v03.received.length).toBe(before);
    expect((await raw("echo-v03", { jsonrpc: "2.0", id: 5, method: "ListTaskPushNotificationConfigs", params: { taskId: task.id } })).body.result.configs).toHaveLength(1);
  });

  it("a 0.3 caller registers on a 1.0 agent's held task with the 0.3 SDK: its updates arrive in 0.3's shape, with the caller's authentication; delete is forwarded", async () => {
    const client = await a2aClientV03(gateway.publicUrl, "echo-v1", KEYS.caller);
    const task = (await client.sendMessage({ message: { kind: "message", messageId: crypto.randomUUID(), role: "user", parts: [{ kind: "text", text: "task hold for 0.3" }] }, configuration: { blocking: false } })) as Task03;
    await expect.poll(() => v1.held()).toContain(agentIdOf(task.id));
    const url = `${hooks.origin}/hooks/zero-three`;
    const set = await client.setTaskPushNotificationConfig({ taskId: task.id, pushNotificationConfig: { id: "cfg-03", url, token: "tok-03", authentication: { schemes: ["Bearer"], credentials: "webhook-cred" } } });
    expect(set.pushNotificationConfig).toMatchObject({ id: "cfg-03", url, token: "tok-03", authentication: { schemes: ["Bearer"], credentials: "webhook-cred" } });
    const stored = relayOf(v1, "cfg-03");
    expect(JSON.stringify(stored.config)).not.toMatch(/tok-03|webhook-cred|zero-three/);
    expect(v1.release(agentIdOf(task.id))).toBe(true);
    await expect.poll(() => hooks.got.filter((d) => d.path === "/hooks/zero-three" && d.body?.kind === "status-update" && d.body.status?.state === "completed").length, { timeout: 10_000 }).toBeGreaterThan(0);
    for (const d of hooks.got.filter((x) => x.path === "/hooks/zero-three")) {
      expect(d.headers["x-a2a-notification-token"]).toBe("tok-03");
      expect(d.headers.authorization).toBe("Bearer webhook-cred");
      expect(d.body.taskId ?? d.body.id).toBe(task.id);
    }
    expect((await client.listTaskPushNotificationConfig({ id: task.id })).map((c) => c.pushNotificationConfig.url)).toEqual([url]);
    await client.deleteTaskPushNotificationConfig({ id: task.id, pushNotificationConfigId: "cfg-03" });
    expect(await client.listTaskPushNotificationConfig({ id: task.id })).toEqual([]);
  });

  it("refuses webhooks at metadata, private, loopback (not listed) and internal addresses, and plain http; the agent sees nothing", async () => {
    const port = new URL(hooks.origin).port;
    const bad = ["http://169.254.169.254/latest/meta-data", "https://10.0.0.1/hook", `http://127.0.0.1:${Number(port) + 1}/hook`, "https://127.0.0.1/hook", `http://localhost:${port}/hook`, "http://hooks.example.com/hook"];
    const before = v1.received.length;
    for (const [i, url] of bad.entries()) {
      const sent = await raw("echo-v1", { jsonrpc: "2.0", id: i, method: "SendMessage", params: { message: { messageId: `m${i}`, role: "ROLE_USER", parts: [{ text: "task x" }] }, configuration: { taskPushNotificationConfig: { url } } } });
      expect(sent.body.error, url).toMatchObject({ code: -32602, data: { code: "invalid_request" } });
      expect(sent.body.error.message).toContain(new URL(url).origin);
      const created = await raw("echo-v1", { jsonrpc: "2.0", id: i, method: "CreateTaskPushNotificationConfig", params: { taskId: "some-task", url } });
      expect(created.body.error, url).toMatchObject({ data: { code: "invalid_request" } });
      const set03 = await raw("echo-v03", { jsonrpc: "2.0", id: i, method: "tasks/pushNotificationConfig/set", params: { taskId: "some-task", pushNotificationConfig: { url } } }, KEYS.caller, "0.3");
      expect(set03.body.error, url).toMatchObject({ data: { code: "invalid_request" } });
    }
    expect(v1.received.slice(before).filter((r) => r.method === "POST")).toEqual([]);
  });

  it("refuses a forged, tampered or misdirected relay address, and a notification without the gateway's token: nothing is delivered", async () => {
    const stored = relayOf(v1, "cfg-one");
    const relay = String(stored.config.url);
    const token = String(stored.config.token);
    const count = hooks.got.length;
    const note = JSON.stringify({ statusUpdate: { taskId: stored.taskId, contextId: "c", status: { state: "TASK_STATE_WORKING" } } });
    const post = (url: string, t: string | undefined) => fetch(url, { method: "POST", headers: { "content-type": "application/json", ...(t === undefined ? {} : { "x-a2a-notification-token": t }) }, body: note });
    const sealed = relay.slice(relay.lastIndexOf("/") + 1);
    const tampered = relay.slice(0, -3) + (relay.endsWith("AAA") ? "BBB" : "AAA");
    for (const [url, t] of [
      [tampered, token],
      [relay, undefined],
      [relay, "not-the-token"],
      [`${gateway.publicUrl}/a2a/echo-v03/push/${sealed}`, token],
      [`${gateway.publicUrl}/a2a/echo-v1/push/p1.forged.value`, token],
    ] as const) {
      const res = await post(url, t);
      expect(res.status, url).toBe(404);
      expect(res.headers.get("x-sluice-error-code")).toBe("not_found");
      await res.body?.cancel();
    }
    // The genuine address with its token is delivered.
    const ok = await post(relay, token);
    expect(ok.status).toBe(204);
    await expect.poll(() => hooks.got.length).toBe(count + 1);
    expect(hooks.got.at(-1)!.headers["x-a2a-notification-token"]).toBe("caller-token-1");
  });
});
