import { describe, expect, it } from "vitest";
import { checkRequestPushConfig, mapConfigAnswer, PushRelaySealer, relayRequestParams, sealedOfRelayUrl, type PushRelayDeps } from "../../../src/a2a/push-relay.ts";
import { notificationFor, readNotification } from "../../../src/a2a/push-notification.ts";
import { refusal } from "../support/refusal.ts";

const ORIGIN = "https://gw.example.com";
const deps = async (): Promise<PushRelayDeps> => ({ sealer: await PushRelaySealer.fromSecret("a-push-secret-of-length"), egress: { allow: [] }, allowOrigins: ["http://127.0.0.1:8123"] });
const reg = (tenant: string, key: string) => ({ caller: { tenant, key }, agent: "billing", callerGeneration: "1.0" as const, agentGeneration: "1.0" as const, origin: ORIGIN, now: 7 });
const caller = (tenant: string, key: string) => ({ caller: { tenant, key }, agent: "billing", origin: ORIGIN, generation: "1.0" as const });

describe("the push relay's sealed configs", () => {
  it("gives the agent the relay address and a gateway token, never the caller's URL, token or authentication", async () => {
    const d = await deps();
    const params = { taskId: "t1", id: "cfg", url: "https://hooks.example.com/n", token: "caller-token", authentication: { scheme: "Bearer", credentials: "caller-cred" } };
    const sent = await relayRequestParams(d, "CreateTaskPushNotificationConfig", params, reg("acme", "k1"));
    const text = JSON.stringify(sent);
    expect(text).not.toMatch(/hooks\.example\.com|caller-token|caller-cred/);
    expect(sent).toMatchObject({ taskId: "t1", id: "cfg" });
    expect(sent.authentication).toBeUndefined();
    expect(typeof sent.token).toBe("string");
    const sealed = sealedOfRelayUrl(sent.url as string, ORIGIN, "billing");
    expect(sealed).toBeDefined();
    const opened = await d.sealer.open(sealed!);
    expect(opened).toMatchObject({ ok: true, record: { tenant: "acme", key: "k1", agent: "billing", generation: "1.0", url: "https://hooks.example.com/n", token: "caller-token", authentication: { scheme: "Bearer", credentials: "caller-cred" }, configId: "cfg", gatewayToken: sent.token, issuedAt: 7 } });
  });

  it("refuses a tampered, truncated or foreign sealed address", async () => {
    const d = await deps();
    const sent = await relayRequestParams(d, "tasks/pushNotificationConfig/set", { taskId: "t", pushNotificationConfig: { url: "https://hooks.example.com/n" } }, { ...reg("acme", "k1"), callerGeneration: "0.3", agentGeneration: "0.3" });
    const sealed = sealedOfRelayUrl((sent.pushNotificationConfig as { url: string }).url, ORIGIN, "billing")!;
    const flipped = sealed.slice(0, -2) + (sealed.endsWith("A") ? "BB" : "AA");
    expect(await d.sealer.open(flipped)).toMatchObject({ ok: false });
    expect(await d.sealer.open(sealed.slice(0, 20))).toMatchObject({ ok: false });
    expect(await d.sealer.open("p2.x.y")).toEqual({ ok: false, why: "malformed" });
    const other = await PushRelaySealer.fromSecret("another-secret-of-length");
    expect(await other.open(sealed)).toEqual({ ok: false, why: "tampered" });
  });

  it("maps the agent's stored configs back for their caller and hides everyone else's", async () => {
    const d = await deps();
    const mine = await relayRequestParams(d, "CreateTaskPushNotificationConfig", { taskId: "t1", id: "a", url: "https://hooks.example.com/mine", token: "mt" }, reg("acme", "k1"));
    const theirs = await relayRequestParams(d, "CreateTaskPushNotificationConfig", { taskId: "t1", id: "b", url: "https://hooks.example.com/theirs" }, reg("acme", "k2"));
    const direct = { taskId: "t1", id: "c", url: "https://elsewhere.example.com/" };
    const list = await mapConfigAnswer(d, caller("acme", "k1"), "ListTaskPushNotificationConfigs", { jsonrpc: "2.0", id: 1, result: { configs: [mine, theirs, direct], nextPageToken: "" } });
    expect(list.result).toEqual({ configs: [{ taskId: "t1", id: "a", url: "https://hooks.example.com/mine", token: "mt" }], nextPageToken: "" });
    const get = await mapConfigAnswer(d, caller("acme", "k1"), "GetTaskPushNotificationConfig", { jsonrpc: "2.0", id: 2, result: mine });
    expect(get.result).toEqual({ taskId: "t1", id: "a", url: "https://hooks.example.com/mine", token: "mt" });
    await expect(mapConfigAnswer(d, caller("acme", "k1"), "GetTaskPushNotificationConfig", { jsonrpc: "2.0", id: 3, result: theirs })).rejects.toMatchObject({ code: "not_found" });
    // An error answer passes as the agent sent it.
    const err = { jsonrpc: "2.0", id: 4, error: { code: -32001, message: "no task" } };
    expect(await mapConfigAnswer(d, caller("acme", "k1"), "GetTaskPushNotificationConfig", err)).toBe(err);
  });

  it("checks the caller's URL at decode, and refuses push configs when no relay is configured", async () => {
    const d = await deps();
    const send = (url: string) => ({ message: { messageId: "m" }, configuration: { taskPushNotificationConfig: { url } } });
    expect(refusal(() => checkRequestPushConfig(d, "SendMessage", "1.0", send("https://169.254.169.254/x")))).toMatchObject({ code: "invalid_request", param: "params.configuration.taskPushNotificationConfig.url" });
    expect(refusal(() => checkRequestPushConfig(d, "SendMessage", "1.0", send("http://10.0.0.1/x"))).code).toBe("invalid_request");
    expect(() => checkRequestPushConfig(d, "SendMessage", "1.0", send("http://127.0.0.1:8123/x"))).not.toThrow();
    expect(refusal(() => checkRequestPushConfig(undefined, "message/send", "0.3", { message: {}, configuration: { pushNotificationConfig: { url: "https://hooks.example.com" } } })).code).toBe("agent_operation_unsupported");
    expect(() => checkRequestPushConfig(undefined, "SendMessage", "1.0", { message: {} })).not.toThrow();
    // Token and credentials go to the webhook in headers: one line of printable ASCII each.
    const create = (extra: object) => ({ taskId: "t", url: "https://hooks.example.com/a", ...extra });
    expect(refusal(() => checkRequestPushConfig(d, "CreateTaskPushNotificationConfig", "1.0", create({ token: "a\r\nx-evil: 1" })))).toMatchObject({ code: "invalid_request", param: "params.token" });
    expect(refusal(() => checkRequestPushConfig(d, "CreateTaskPushNotificationConfig", "1.0", create({ authentication: { scheme: "Bearer", credentials: "é" } }))).param).toBe("params.authentication.credentials");
    expect(refusal(() => checkRequestPushConfig(d, "CreateTaskPushNotificationConfig", "1.0", create({ authentication: { scheme: "Bad Scheme" } }))).code).toBe("invalid_request");
  });
});

describe("relayed notifications", () => {
  it("bridge a 0.3 agent's task to a 1.0 caller, and refuse what is not a notification", () => {
    const task = { kind: "task", id: "t9", contextId: "c", status: { state: "completed", timestamp: "2026-01-01T00:00:00Z" } };
    const n = readNotification("0.3", task);
    expect(n.taskId).toBe("t9");
    const out = notificationFor(n, "0.3", "1.0");
    expect(out).toMatchObject({ task: { id: "t9", contextId: "c", status: { state: "TASK_STATE_COMPLETED" } } });
    expect(refusal(() => readNotification("1.0", { task: {}, statusUpdate: {} })).code).toBe("invalid_request");
    expect(refusal(() => readNotification("0.3", { kind: "nope" })).code).toBe("invalid_request");
  });
});
