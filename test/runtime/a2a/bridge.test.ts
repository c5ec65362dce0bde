import { describe, expect, it } from "vitest";
import { bridgeRequest, bridgeResponse, isStreamingMethod, methodGeneration, servableGenerations, agentGenerationFor, type A2aJsonRpcRequest, type A2aJsonRpcResponse } from "../../../src/protocol/a2a/bridge.ts";
import { readAgentCard, type A2aGeneration, type AgentCardView } from "../../../src/protocol/a2a/agent-card.ts";
import { rewriteAgentCard } from "../../../src/a2a/card-rewrite.ts";
import type { GatewayError } from "../../../src/errors/gateway-error.ts";
import { jsonRpcCode } from "../../../src/errors/json-rpc.ts";
import { cardV03, cardV1 } from "./cards.ts";
import exchangesV1 from "./fixtures/exchanges-v1.json";
import exchangesV03 from "./fixtures/exchanges-v03.json";
import { refusal } from "../support/refusal.ts";

/**
 * The fixtures are real exchanges: the SDK's 1.x client with the SDK-built 1.0 test agent, the
 * SDK's 0.3 client with the 0.3 agent, the same calls with the same message ids (see the capture
 * script). A bridged request must equal what the other generation's client sends for the same
 * call, and a bridged answer what the other generation's agent answers — modulo what each agent
 * makes up (ids, timestamps, its name in the text).
 */

interface Exchange {
  readonly version: string | null;
  readonly request: A2aJsonRpcRequest;
  readonly response: A2aJsonRpcResponse | A2aJsonRpcResponse[];
  readonly stream: boolean;
}
const v1 = exchangesV1 as unknown as Record<string, Exchange>;
const v03 = exchangesV03 as unknown as Record<string, Exchange>;
const of = (g: A2aGeneration) => (g === "1.0" ? v1 : v03);

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

/**
 * What the agents make up, made equal: ids and timestamps, the agent's name in its text, empty
 * lists (the 0.3 SDK writes `artifacts: []`, 1.0 leaves defaults out), empty metadata, and the
 * 1.0 test agent's `mediaType: "text/plain"` on text parts (the default, which 0.3 cannot carry).
 */
function normalize(v: unknown, key = ""): unknown {
  if (Array.isArray(v)) return v.map((x) => normalize(x));
  if (typeof v === "string") {
    if (UUID.test(v)) return "<uuid>";
    if (ISO.test(v)) return "<timestamp>";
    return v.replace(/echo-v(1|03)/g, "echo-agent");
  }
  if (typeof v === "number" && key === "id") return 0;
  if (typeof v !== "object" || v === null) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    if (Array.isArray(x) && x.length === 0) continue;
    if (k === "metadata" && typeof x === "object" && x !== null && Object.keys(x).length === 0) continue;
    if (k === "mediaType" && x === "text/plain" && "text" in v) continue;
    out[k] = normalize(x, k);
  }
  return out;
}

/** Task ids differ between the two captures: the ones a request names are made equal too. */
function normalizeRequest(r: A2aJsonRpcRequest): unknown {
  const n = normalize(r) as Record<string, unknown>;
  const p = { ...(n.params as Record<string, unknown>) };
  for (const k of ["id", "taskId"]) if (typeof p[k] === "string" && p[k] !== "no-such-task") p[k] = "<task>";
  return { ...n, id: 0, params: p };
}

const CALLS = ["send-message", "send-task", "stream", "get-task", "get-task-unknown", "send-return-immediately", "cancel-task", "subscribe", "push-set", "push-get"];

/** Answers compared across generations: the agents agree on these (see below for the rest). */
const ANSWERS = ["send-message", "send-task", "stream", "get-task", "get-task-unknown", "cancel-task", "subscribe", "push-set", "push-get"];

function without(v: unknown, field: string): unknown {
  return JSON.parse(JSON.stringify(v), (k, x: unknown) => (k === field ? undefined : x)) as unknown;
}


describe.each([
  ["0.3", "1.0"],
  ["1.0", "0.3"],
] as const)("bridging an A2A %s caller to an A2A %s agent", (caller, agent) => {
  it.each(CALLS)("%s: the bridged request is what the agent's own client sends", (call) => {
    const sent = of(caller)[call]!;
    const expected = of(agent)[call]!;
    const bridged = bridgeRequest(sent.request, caller, agent);
    expect(bridged.id).toBe(sent.request.id);
    expect(normalizeRequest(bridged)).toEqual(normalizeRequest(expected.request));
  });

  it.each(ANSWERS)("%s: the agent's answer, bridged, is what an agent of the caller's generation answers", (call) => {
    const answered = of(agent)[call]!;
    const expected = of(caller)[call]!;
    const method = expected.request.method;
    const id = expected.request.id;
    const bridge = (r: A2aJsonRpcResponse) => bridgeResponse(r, method, caller, agent, id);
    // The 0.3 SDK agent sends no history on tasks/get unless asked for some; the 1.0 one sends it all.
    const cut = (v: unknown) => (call === "get-task" ? without(v, "history") : v);
    if (answered.stream) {
      const events = (answered.response as A2aJsonRpcResponse[]).map(bridge);
      expect(events.every((e) => e.id === id)).toBe(true);
      expect(normalize(cut(events))).toEqual(normalize(cut(expected.response)));
    } else {
      const bridged = bridge(answered.response as A2aJsonRpcResponse);
      expect(bridged.id).toBe(id);
      expect(normalize(cut(bridged))).toEqual(normalize(cut(expected.response)));
    }
  });

  it("a task the caller asked not to wait for comes back as a task in the caller's shape", () => {
    // The two agents differ in timing here (submitted or already working), so the state is read, not compared.
    const bridged = bridgeResponse(of(agent)["send-return-immediately"]!.response as A2aJsonRpcResponse, of(caller)["send-return-immediately"]!.request.method, caller, agent, 6);
    const result = bridged.result as Record<string, unknown>;
    const t = (caller === "0.3" ? result : result.task) as Record<string, unknown>;
    expect(caller === "0.3" ? result.kind : Object.keys(result)).toEqual(caller === "0.3" ? "task" : ["task"]);
    expect((t.status as Record<string, unknown>).state).toMatch(caller === "0.3" ? /^(submitted|working)$/ : /^TASK_STATE_(SUBMITTED|WORKING)$/);
  });

  it("an agent's answer that is not valid in its own generation is an upstream protocol error", () => {
    const method = of(caller)["send-message"]!.request.method;
    const err = refusal(() => bridgeResponse({ jsonrpc: "2.0", id: 1, result: { nonsense: true } }, method, caller, agent, 1));
    expect(err.code).toBe("upstream_protocol_error");
    expect(refusal(() => bridgeResponse({ jsonrpc: "2.0", id: 1 }, method, caller, agent, 1)).code).toBe("upstream_protocol_error");
  });
});

describe("what cannot be bridged is refused, typed", () => {
  const req = (method: string, params: unknown): A2aJsonRpcRequest => ({ jsonrpc: "2.0", id: 7, method, params });
  const expectRefused = (err: GatewayError, method: string, field: string) => {
    expect(err.code).toBe("agent_call_not_bridgeable");
    expect(err.status).toBe(400);
    expect(err.retryable).toBe(false);
    expect(err.param).toBe(field);
    expect(err.message).toContain(method);
    expect(err.message).toMatch(/A2A (1\.0|0\.3) .*A2A (0\.3|1\.0) agent/);
    expect(jsonRpcCode(err.code)).toBe(-32004);
  };

  it("ListTasks towards a 0.3 agent", () => {
    expectRefused(refusal(() => bridgeRequest(v1["list-tasks"]!.request, "1.0", "0.3")), "ListTasks", "method");
  });

  it("the extended card, either way", () => {
    expectRefused(refusal(() => bridgeRequest(req("GetExtendedAgentCard", {}), "1.0", "0.3")), "GetExtendedAgentCard", "method");
    expectRefused(refusal(() => bridgeRequest(req("agent/getAuthenticatedExtendedCard", {}), "0.3", "1.0")), "agent/getAuthenticatedExtendedCard", "method");
  });

  it("a 1.0 tenant towards a 0.3 agent, on the call or on its push config", () => {
    expectRefused(refusal(() => bridgeRequest(req("GetTask", { tenant: "t1", id: "x" }), "1.0", "0.3")), "GetTask", "tenant");
    const send = { message: { messageId: "m", role: "ROLE_USER", parts: [{ text: "hi" }] }, configuration: { taskPushNotificationConfig: { tenant: "t1", url: "https://hooks.example.com/a" } } };
    expectRefused(refusal(() => bridgeRequest(req("SendMessage", send), "1.0", "0.3")), "SendMessage", "configuration.taskPushNotificationConfig.tenant");
  });

  it("a later page of push configs towards a 0.3 agent (it lists them all at once)", () => {
    expectRefused(refusal(() => bridgeRequest(req("ListTaskPushNotificationConfigs", { taskId: "t", pageToken: "p2" }), "1.0", "0.3")), "ListTaskPushNotificationConfigs", "pageToken");
    expect(bridgeRequest(req("ListTaskPushNotificationConfigs", { taskId: "t", pageSize: 5 }), "1.0", "0.3").params).toEqual({ id: "t" });
  });

  it("0.3 request metadata with no 1.0 place, and a push config read without its id", () => {
    expectRefused(refusal(() => bridgeRequest(req("tasks/get", { id: "t", metadata: { ext: 1 } }), "0.3", "1.0")), "tasks/get", "metadata");
    expectRefused(refusal(() => bridgeRequest(req("tasks/resubscribe", { id: "t", metadata: { ext: 1 } }), "0.3", "1.0")), "tasks/resubscribe", "metadata");
    expectRefused(refusal(() => bridgeRequest(req("tasks/pushNotificationConfig/get", { id: "t" }), "0.3", "1.0")), "tasks/pushNotificationConfig/get", "pushNotificationConfigId");
    expect(bridgeRequest(req("tasks/get", { id: "t", metadata: {} }), "0.3", "1.0").params).toEqual({ id: "t" });
  });

  it("several push authentication schemes towards a 1.0 agent (it takes one)", () => {
    const set = { taskId: "t", pushNotificationConfig: { url: "https://hooks.example.com/a", authentication: { schemes: ["Bearer", "Basic"], credentials: "c" } } };
    expectRefused(refusal(() => bridgeRequest(req("tasks/pushNotificationConfig/set", set), "0.3", "1.0")), "tasks/pushNotificationConfig/set", "pushNotificationConfig.authentication.schemes");
    const one = { taskId: "t", pushNotificationConfig: { id: "c1", url: "https://hooks.example.com/a", authentication: { schemes: ["Bearer"], credentials: "c" } } };
    expect(bridgeRequest(req("tasks/pushNotificationConfig/set", one), "0.3", "1.0").params).toEqual({ taskId: "t", id: "c1", url: "https://hooks.example.com/a", authentication: { scheme: "Bearer", credentials: "c" } });
  });

  it("a malformed request is the caller's invalid_request; a method of the other generation too", () => {
    const bad = { message: { messageId: "m", role: "user", parts: [{ kind: "video", src: "x" }] } };
    const err = refusal(() => bridgeRequest(req("message/send", bad), "0.3", "1.0"));
    expect(err.code).toBe("invalid_request");
    expect(err.param).toBe("part.kind");
    expect(refusal(() => bridgeRequest(req("SendMessage", {}), "0.3", "1.0")).code).toBe("invalid_request");
    expect(refusal(() => bridgeRequest(req("message/send", { message: { messageId: "m", role: "ROLE_USER", parts: [] } }), "0.3", "1.0")).param).toBe("message.role");
  });
});

describe("parts, results and errors both ways", () => {
  const req = (method: string, params: unknown): A2aJsonRpcRequest => ({ jsonrpc: "2.0", id: "r1", method, params });
  const msg1 = (parts: unknown[]) => req("SendMessage", { message: { messageId: "m", role: "ROLE_USER", parts } });

  it("files by bytes and by URL, and data parts of any JSON value, round-trip", () => {
    const parts = [
      { raw: "aGVsbG8=", mediaType: "application/octet-stream", filename: "h.bin" },
      { url: "https://files.example.com/a.pdf", mediaType: "application/pdf" },
      { data: { a: 1 }, metadata: { k: "v" } },
      { data: [1, 2] },
      { data: "plain" },
    ];
    const to03 = bridgeRequest(msg1(parts), "1.0", "0.3");
    expect((to03.params as { message: { parts: unknown[] } }).message.parts).toEqual([
      { kind: "file", file: { bytes: "aGVsbG8=", mimeType: "application/octet-stream", name: "h.bin" } },
      { kind: "file", file: { uri: "https://files.example.com/a.pdf", mimeType: "application/pdf" } },
      { kind: "data", data: { a: 1 }, metadata: { k: "v" } },
      { kind: "data", data: { value: [1, 2] }, metadata: { data_part_compat: true } },
      { kind: "data", data: { value: "plain" }, metadata: { data_part_compat: true } },
    ]);
    const back = bridgeRequest(to03, "0.3", "1.0");
    expect((back.params as { message: { parts: unknown[] } }).message.parts).toEqual(parts);
  });

  it("a status update's final flag follows its state (terminal and interrupted states end a 0.3 stream)", () => {
    const ev = (state: string): A2aJsonRpcResponse => ({ jsonrpc: "2.0", id: 1, result: { statusUpdate: { taskId: "t", contextId: "c", status: { state } } } });
    const finalOf = (state: string) => (bridgeResponse(ev(state), "message/stream", "0.3", "1.0", 1).result as { final: boolean }).final;
    expect(finalOf("TASK_STATE_WORKING")).toBe(false);
    expect(finalOf("TASK_STATE_INPUT_REQUIRED")).toBe(true);
    expect(finalOf("TASK_STATE_AUTH_REQUIRED")).toBe(true);
    expect(finalOf("TASK_STATE_FAILED")).toBe(true);
  });

  it("push configs and their lists are reshaped; a delete answers each generation's empty result", () => {
    const cfg1 = { taskId: "t", id: "c1", url: "https://hooks.example.com/a", token: "tok" };
    const cfg03 = { taskId: "t", pushNotificationConfig: { id: "c1", url: "https://hooks.example.com/a", token: "tok" } };
    expect(bridgeResponse({ jsonrpc: "2.0", id: 1, result: { configs: [cfg1] } }, "tasks/pushNotificationConfig/list", "0.3", "1.0", 1).result).toEqual([cfg03]);
    expect(bridgeResponse({ jsonrpc: "2.0", id: 1, result: [cfg03] }, "ListTaskPushNotificationConfigs", "1.0", "0.3", 1).result).toEqual({ configs: [cfg1] });
    expect(bridgeResponse({ jsonrpc: "2.0", id: 1, result: null }, "DeleteTaskPushNotificationConfig", "1.0", "0.3", 1).result).toEqual({});
    expect(bridgeResponse({ jsonrpc: "2.0", id: 1, result: {} }, "tasks/pushNotificationConfig/delete", "0.3", "1.0", 1).result).toBeNull();
    expect(bridgeRequest(req("DeleteTaskPushNotificationConfig", { taskId: "t", id: "c1" }), "1.0", "0.3").params).toEqual({ id: "t", pushNotificationConfigId: "c1" });
  });

  it("errors keep their code and message; 1.0's typed details are added or taken away, others kept", () => {
    const e = bridgeResponse({ jsonrpc: "2.0", id: 1, error: { code: -32005, message: "no such type" } }, "SendMessage", "1.0", "0.3", 9);
    expect(e).toEqual({ jsonrpc: "2.0", id: 9, error: { code: -32005, message: "no such type", data: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "CONTENT_TYPE_NOT_SUPPORTED", domain: "a2a-protocol.org" }] } });
    const other = { "@type": "type.googleapis.com/google.rpc.DebugInfo", detail: "x" };
    const back = bridgeResponse({ jsonrpc: "2.0", id: 1, error: { code: -32009, message: "v", data: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "VERSION_NOT_SUPPORTED", domain: "a2a-protocol.org" }, other] } }, "message/send", "0.3", "1.0", 9);
    expect(back.error).toEqual({ code: -32009, message: "v", data: [other] });
    expect(bridgeResponse({ jsonrpc: "2.0", id: 1, error: { code: -32603, message: "boom", data: { free: "form" } } }, "SendMessage", "1.0", "0.3", 9).error).toEqual({ code: -32603, message: "boom" });
  });

  it("the same generation passes unchanged, the caller's id set back", () => {
    const r = v1["send-message"]!;
    expect(bridgeRequest(r.request, "1.0", "1.0")).toBe(r.request);
    expect(bridgeResponse(r.response as A2aJsonRpcResponse, "SendMessage", "1.0", "1.0", "caller-id")).toEqual({ ...(r.response as A2aJsonRpcResponse), id: "caller-id" });
  });

  it("knows each method's generation and whether it streams", () => {
    expect(methodGeneration("message/send")).toBe("0.3");
    expect(methodGeneration("ListTasks")).toBe("1.0");
    expect(methodGeneration("tools/call")).toBeUndefined();
    expect(methodGeneration("toString")).toBeUndefined();
    expect(["message/stream", "tasks/resubscribe", "SendStreamingMessage", "SubscribeToTask"].every(isStreamingMethod)).toBe(true);
    expect(isStreamingMethod("SendMessage")).toBe(false);
  });
});

describe("cards claim only what the gateway speaks", () => {
  const viewOf = (raw: unknown): AgentCardView => {
    const r = readAgentCard(raw);
    if (!r.ok) throw new Error(r.reasons.join("; "));
    return r.view;
  };

  it("an agent of either generation is served in both, through the bridge", () => {
    for (const raw of [cardV1(), cardV03()]) {
      const view = viewOf(raw);
      const generations = servableGenerations(view);
      expect(generations).toEqual(["1.0", "0.3"]);
      const card = rewriteAgentCard(view, { agent: "echo", publicOrigin: "https://gw.example.com", skillVisible: () => true, security: { openIdConnectUrls: [] }, generations }, "1.0");
      expect((card.supportedInterfaces as { protocolVersion: string }[]).map((i) => i.protocolVersion)).toEqual(["1.0", "0.3"]);
      expect(rewriteAgentCard(view, { agent: "echo", publicOrigin: "https://gw.example.com", skillVisible: () => true, security: { openIdConnectUrls: [] }, generations }, "0.3").protocolVersion).toMatch(/^0\.3/);
    }
  });

  it("the agent is spoken to in the caller's generation when it speaks it, else in its own", () => {
    const view1 = viewOf(cardV1());
    expect(agentGenerationFor(view1, "1.0")).toBe("1.0");
    expect(agentGenerationFor(view1, "0.3")).toBe("1.0");
    expect(agentGenerationFor(viewOf(cardV03()), "1.0")).toBe("0.3");
  });
});
