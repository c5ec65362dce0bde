import { describe, expect, it } from "vitest";
import { toJsonRpcErrorBody } from "../../../src/errors/json-rpc.ts";
import { A2A_METHODS, decodeA2aRequest, jsonRpcIdOf, requestGeneration } from "../../../src/protocol/a2a/a2a-request.ts";
import { rewriteAgentUrl } from "../../../src/invoker/a2a-exchange.ts";
import { refusal } from "../support/refusal.ts";


const send1 = (params: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ jsonrpc: "2.0", id: "r1", method: "SendMessage", params, ...extra });

describe("the A2A-Version a request speaks", () => {
  it("reads 1.0 and 0.3 with patch versions, and no header as 0.3", () => {
    expect(requestGeneration("1.0")).toBe("1.0");
    expect(requestGeneration(" 1.0.2 ")).toBe("1.0");
    expect(requestGeneration("0.3.0")).toBe("0.3");
    expect(requestGeneration(null)).toBe("0.3");
    expect(requestGeneration("")).toBe("0.3");
  });

  it("refuses any other version with VersionNotSupported (-32009), naming the versions spoken", () => {
    for (const v of ["2.0", "1.1", "0.2.5", "1.0; drop", "latest"]) {
      const err = refusal(() => requestGeneration(v));
      expect(err.code).toBe("agent_version_not_supported");
      const body = toJsonRpcErrorBody(err, 4);
      expect(body.error.code).toBe(-32009);
      expect(body.error.data).toMatchObject({ supported: ["1.0", "0.3"], requested: v.trim() });
    }
  });
});

describe("decoding an A2A JSON-RPC request", () => {
  it("reads a 1.0 message: its skill, task and context ids", () => {
    const req = decodeA2aRequest(send1({ message: { messageId: "m", role: "ROLE_USER", parts: [{ text: "hi" }], taskId: "t-1", contextId: "c-1", metadata: { skill: "summarize" } } }), "1.0");
    expect(req).toMatchObject({ id: "r1", method: "SendMessage", generation: "1.0", skill: "summarize", a2aTaskId: "t-1", contextId: "c-1", info: { kind: "message", streaming: false } });
  });

  it("reads the tags a message asks for (the virtual agent routes by them), and refuses malformed ones", () => {
    const req = decodeA2aRequest(send1({ message: { metadata: { skill: "translate", tags: ["language", "text"] } } }), "1.0");
    expect(req).toMatchObject({ skill: "translate", tags: ["language", "text"] });
    expect(decodeA2aRequest(send1({ message: { metadata: { tags: [] } } }), "1.0").tags).toBeUndefined();
    expect(decodeA2aRequest(send1({ message: {} }), "1.0").tags).toBeUndefined();
    for (const tags of ["language", [7], [""], ["t".repeat(300)], Array.from({ length: 17 }, (_, i) => `t${i}`)]) {
      expect(refusal(() => decodeA2aRequest(send1({ message: { metadata: { tags } } }), "1.0")).param).toBe("params.message.metadata.tags");
    }
  });

  it("reads 0.3 methods, and knows which stream", () => {
    const stream = decodeA2aRequest({ jsonrpc: "2.0", id: 3, method: "message/stream", params: { message: { kind: "message", parts: [] } } }, "0.3");
    expect(stream).toMatchObject({ id: 3, skill: undefined, info: { kind: "message", streaming: true } });
    const get = decodeA2aRequest({ jsonrpc: "2.0", id: 4, method: "tasks/get", params: { id: "t-9" } }, "0.3");
    expect(get).toMatchObject({ a2aTaskId: "t-9", info: { kind: "task", streaming: false } });
    expect(decodeA2aRequest({ jsonrpc: "2.0", id: 5, method: "tasks/resubscribe", params: { id: "t-9" } }, "0.3").info.streaming).toBe(true);
  });

  it("knows each generation's methods apart, and hints at the other generation's", () => {
    expect(Object.keys(A2A_METHODS["1.0"])).toEqual(expect.arrayContaining(["SendMessage", "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask"]));
    expect(Object.keys(A2A_METHODS["0.3"])).toEqual(expect.arrayContaining(["message/send", "message/stream", "tasks/get", "tasks/cancel", "tasks/resubscribe"]));
    const err = refusal(() => decodeA2aRequest({ jsonrpc: "2.0", id: 1, method: "message/send", params: {} }, "1.0"));
    expect(err.code).toBe("agent_method_not_found");
    expect(err.message).toMatch(/A2A-Version: 0\.3/);
    expect(toJsonRpcErrorBody(err, 1).error.code).toBe(-32601);
    expect(refusal(() => decodeA2aRequest({ jsonrpc: "2.0", id: 1, method: "toString", params: {} }, "1.0")).code).toBe("agent_method_not_found");
  });

  it("refuses a malformed envelope: not an object, a batch, a wrong jsonrpc, no id, bad params", () => {
    for (const body of [null, [send1({})], { ...send1({ message: {} }), jsonrpc: "1.0" }, { jsonrpc: "2.0", method: "SendMessage", params: { message: {} } }, { ...send1({}), id: { x: 1 } }, send1([] as never), { jsonrpc: "2.0", id: 1 }]) {
      expect(refusal(() => decodeA2aRequest(body, "1.0")).code).toBe("invalid_request");
    }
    expect(refusal(() => decodeA2aRequest(send1({}), "1.0")).param).toBe("params.message");
    expect(refusal(() => decodeA2aRequest({ jsonrpc: "2.0", id: 1, method: "GetTask", params: {} }, "1.0")).param).toBe("params.id");
    expect(refusal(() => decodeA2aRequest(send1({ message: { metadata: { skill: 7 } } }), "1.0")).param).toBe("params.message.metadata.skill");
    expect(refusal(() => decodeA2aRequest(send1({ message: { metadata: { skill: "s".repeat(300) } } }), "1.0")).code).toBe("invalid_request");
  });

  it("reads the push-config methods' task ids (the push config itself is the kind's to check), and refuses one without", () => {
    expect(decodeA2aRequest({ jsonrpc: "2.0", id: 1, method: "CreateTaskPushNotificationConfig", params: { taskId: "t1", url: "https://h.example.com" } }, "1.0")).toMatchObject({ info: { kind: "push" }, a2aTaskId: "t1" });
    expect(decodeA2aRequest({ jsonrpc: "2.0", id: 1, method: "tasks/pushNotificationConfig/set", params: { taskId: "t2", pushNotificationConfig: { url: "x" } } }, "0.3").a2aTaskId).toBe("t2");
    expect(decodeA2aRequest({ jsonrpc: "2.0", id: 1, method: "tasks/pushNotificationConfig/get", params: { id: "t3" } }, "0.3").a2aTaskId).toBe("t3");
    expect(refusal(() => decodeA2aRequest({ jsonrpc: "2.0", id: 1, method: "tasks/pushNotificationConfig/set", params: {} }, "0.3"))).toMatchObject({ code: "invalid_request", param: "params.taskId" });
    expect(refusal(() => decodeA2aRequest({ jsonrpc: "2.0", id: 1, method: "ListTaskPushNotificationConfigs", params: {} }, "1.0")).param).toBe("params.taskId");
    // A message's push config goes on to the kind, which checks its URL (src/a2a/push-relay.ts).
    expect(decodeA2aRequest(send1({ message: {}, configuration: { taskPushNotificationConfig: { url: "http://10.0.0.1/" } } }), "1.0").info.kind).toBe("message");
  });

  it("refuses the agent's extended card, which would show what the gateway's card hides", () => {
    expect(refusal(() => decodeA2aRequest({ jsonrpc: "2.0", id: 1, method: "GetExtendedAgentCard", params: {} }, "1.0")).code).toBe("agent_operation_unsupported");
    expect(refusal(() => decodeA2aRequest({ jsonrpc: "2.0", id: 1, method: "agent/getAuthenticatedExtendedCard" }, "0.3")).code).toBe("agent_operation_unsupported");
  });

  it("serves ListTasks only scoped to a context: the agent sees every caller as the gateway", () => {
    expect(decodeA2aRequest({ jsonrpc: "2.0", id: 1, method: "ListTasks", params: { contextId: "c-1" } }, "1.0").contextId).toBe("c-1");
    expect(refusal(() => decodeA2aRequest({ jsonrpc: "2.0", id: 1, method: "ListTasks", params: {} }, "1.0")).code).toBe("agent_operation_unsupported");
  });

  it("reads the id to answer with from any body", () => {
    expect(jsonRpcIdOf({ id: "x" })).toBe("x");
    expect(jsonRpcIdOf({ id: 0 })).toBe(0);
    expect(jsonRpcIdOf({ id: Number.NaN })).toBeNull();
    expect(jsonRpcIdOf("nope")).toBeNull();
  });
});

describe("rewriting the agent's URL in its answers", () => {
  it("replaces every JSON string that is exactly the agent's JSON-RPC URL, and nothing else", () => {
    const text = JSON.stringify({ url: "http://agent.test/rpc", other: "http://agent.test/rpc/files/1", list: ["http://agent.test/rpc"] });
    const out = JSON.parse(rewriteAgentUrl(text, "http://agent.test/rpc", "https://gw.example/a2a/echo"));
    expect(out).toEqual({ url: "https://gw.example/a2a/echo", other: "http://agent.test/rpc/files/1", list: ["https://gw.example/a2a/echo"] });
  });
});
