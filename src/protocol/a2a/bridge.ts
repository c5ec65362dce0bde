import { GatewayError } from "../../errors/gateway-error.ts";
import { generationsOf, type A2aGeneration, type AgentCardView } from "./agent-card.ts";
import {
  malformed,
  message,
  notBridgeable,
  objectAt,
  refuseTenant,
  sendPushConfig,
  streamResponse,
  task,
  taskPushConfig,
  type Author,
  type BridgeContext,
  type JsonObject,
} from "./bridge-objects.ts";

/**
 * The bridge between the JSON-RPC bindings of A2A 0.3 and 1.0: a caller of one generation served
 * by an agent of the other. Pure and transport-neutral: it translates the request the caller sent
 * into the one the agent reads, and each answer (a JSON-RPC response, or one SSE event's) back.
 * What the agent's generation cannot express is refused before anything is sent
 * (`agent_call_not_bridgeable`), naming the method, the field and both generations; which fields are
 * dropped and why is in docs/a2a.md ("Bridging the generations").
 *
 * The caller's JSON-RPC `id` is kept on the request and restored on every answer, so the kind
 * that sends it need not track it.
 */

export type { BridgeContext } from "./bridge-objects.ts";

/** The JSON-RPC methods of each generation's binding that the bridge knows. */
export type A2aMethod03 =
  | "message/send"
  | "message/stream"
  | "tasks/get"
  | "tasks/cancel"
  | "tasks/resubscribe"
  | "tasks/pushNotificationConfig/set"
  | "tasks/pushNotificationConfig/get"
  | "tasks/pushNotificationConfig/list"
  | "tasks/pushNotificationConfig/delete"
  | "agent/getAuthenticatedExtendedCard";
export type A2aMethod1 =
  | "SendMessage"
  | "SendStreamingMessage"
  | "GetTask"
  | "ListTasks"
  | "CancelTask"
  | "SubscribeToTask"
  | "CreateTaskPushNotificationConfig"
  | "GetTaskPushNotificationConfig"
  | "ListTaskPushNotificationConfigs"
  | "DeleteTaskPushNotificationConfig"
  | "GetExtendedAgentCard";

/** Each 0.3 method and its 1.0 counterpart (the pairs of the SDK's compatibility layer). */
const METHODS_03_TO_1: Readonly<Record<A2aMethod03, A2aMethod1>> = {
  "message/send": "SendMessage",
  "message/stream": "SendStreamingMessage",
  "tasks/get": "GetTask",
  "tasks/cancel": "CancelTask",
  "tasks/resubscribe": "SubscribeToTask",
  "tasks/pushNotificationConfig/set": "CreateTaskPushNotificationConfig",
  "tasks/pushNotificationConfig/get": "GetTaskPushNotificationConfig",
  "tasks/pushNotificationConfig/list": "ListTaskPushNotificationConfigs",
  "tasks/pushNotificationConfig/delete": "DeleteTaskPushNotificationConfig",
  "agent/getAuthenticatedExtendedCard": "GetExtendedAgentCard",
};
const METHODS_1_TO_03: Readonly<Partial<Record<A2aMethod1, A2aMethod03>>> = Object.fromEntries(Object.entries(METHODS_03_TO_1).map(([k, v]) => [v, k]));
const METHODS_1: ReadonlySet<string> = new Set<string>([...Object.values(METHODS_03_TO_1), "ListTasks"]);

/** The generation whose binding names `method`, if either does (the names never overlap). */
export function methodGeneration(method: string): A2aGeneration | undefined {
  if (Object.hasOwn(METHODS_03_TO_1, method)) return "0.3";
  if (METHODS_1.has(method)) return "1.0";
  return undefined;
}

/** Whether `method` answers with an SSE stream (in either generation). */
export function isStreamingMethod(method: string): boolean {
  return method === "message/stream" || method === "tasks/resubscribe" || method === "SendStreamingMessage" || method === "SubscribeToTask";
}

/**
 * The generations the gateway can serve callers for an agent of `view`: its own, and the other
 * through the bridge. Every method but a few is bridged both ways (the refused ones are refused
 * per call, typed), so a card may claim both; a card without a JSON-RPC generation serves none.
 */
export function servableGenerations(view: AgentCardView): A2aGeneration[] {
  return generationsOf(view).length === 0 ? [] : ["1.0", "0.3"];
}

/** The generation the gateway speaks to an agent of `view` for a caller of `caller`: the caller's own when the agent speaks it. */
export function agentGenerationFor(view: AgentCardView, caller: A2aGeneration): A2aGeneration | undefined {
  const own = generationsOf(view);
  return own.includes(caller) ? caller : own[0];
}

/** The `A2A-Version` header a request to an agent of `generation` carries: 1.0 servers read a request without one as 0.3. */
export function versionHeaderFor(generation: A2aGeneration): string {
  return generation;
}

/** A JSON-RPC request as the caller sent it (already checked to be one). */
export interface A2aJsonRpcRequest {
  readonly jsonrpc: "2.0";
  readonly id: string | number | null;
  readonly method: string;
  readonly params?: unknown;
}

/** A JSON-RPC response (or one SSE event's data): a result or an error. */
export interface A2aJsonRpcResponse {
  readonly jsonrpc: "2.0";
  readonly id: string | number | null;
  readonly result?: unknown;
  readonly error?: { readonly code: number; readonly message: string; readonly data?: unknown };
}

/** Which generation each side speaks, and the method as the caller named it. */
function contextOf(method: string, caller: A2aGeneration, agent: A2aGeneration): BridgeContext {
  return { method, caller, agent };
}

function paramsOf(ctx: BridgeContext, request: A2aJsonRpcRequest): JsonObject {
  return objectAt(ctx, "caller", "params", request.params ?? {});
}

/** 0.3 request metadata that is not empty carries extension data 1.0's method has no place for. */
function refuseMetadata(ctx: BridgeContext, p: JsonObject): void {
  const m = p.metadata;
  if (m !== undefined && m !== null && !(typeof m === "object" && Object.keys(m).length === 0)) throw notBridgeable(ctx, "metadata", "A2A 1.0's method has no request metadata");
}

function sendConfigurationTo1(ctx: BridgeContext, v: unknown): JsonObject | undefined {
  if (v === undefined || v === null) return undefined;
  const c = objectAt(ctx, "caller", "configuration", v);
  const out: JsonObject = {};
  if (Array.isArray(c.acceptedOutputModes) && c.acceptedOutputModes.length > 0) out.acceptedOutputModes = c.acceptedOutputModes;
  if (c.historyLength !== undefined && c.historyLength !== null) out.historyLength = c.historyLength;
  if (c.pushNotificationConfig !== undefined && c.pushNotificationConfig !== null) out.taskPushNotificationConfig = sendPushConfig(ctx, "caller", "1.0", c.pushNotificationConfig);
  // 0.3 agents (both SDKs) wait when `blocking` is absent, as 1.0 does without `returnImmediately`.
  if (c.blocking === false) out.returnImmediately = true;
  return out;
}

function sendConfigurationTo03(ctx: BridgeContext, v: unknown): JsonObject {
  const c = v === undefined || v === null ? {} : objectAt(ctx, "caller", "configuration", v);
  const out: JsonObject = {};
  if (Array.isArray(c.acceptedOutputModes) && c.acceptedOutputModes.length > 0) out.acceptedOutputModes = c.acceptedOutputModes;
  if (c.historyLength !== undefined && c.historyLength !== null) out.historyLength = c.historyLength;
  if (c.taskPushNotificationConfig !== undefined && c.taskPushNotificationConfig !== null) out.pushNotificationConfig = sendPushConfig(ctx, "caller", "0.3", c.taskPushNotificationConfig);
  // Said outright: 0.3 leaves the default to the agent, 1.0 waits unless told not to.
  out.blocking = c.returnImmediately !== true;
  return out;
}

function taskIdOf(ctx: BridgeContext, p: JsonObject, field: string): string {
  const v = p[field];
  if (typeof v !== "string" || v === "") throw malformed(ctx, "caller", field, "must be a task id");
  return v;
}

function paramsTo1(ctx: BridgeContext, method: A2aMethod03, p: JsonObject): JsonObject {
  switch (method) {
    case "message/send":
    case "message/stream": {
      const out: JsonObject = { message: message(ctx, "caller", "1.0", p.message) };
      const configuration = sendConfigurationTo1(ctx, p.configuration);
      if (configuration !== undefined) out.configuration = configuration;
      if (p.metadata !== undefined && p.metadata !== null) out.metadata = p.metadata;
      return out;
    }
    case "tasks/get": {
      refuseMetadata(ctx, p);
      const out: JsonObject = { id: taskIdOf(ctx, p, "id") };
      if (p.historyLength !== undefined && p.historyLength !== null) out.historyLength = p.historyLength;
      return out;
    }
    case "tasks/cancel": {
      const out: JsonObject = { id: taskIdOf(ctx, p, "id") };
      if (p.metadata !== undefined && p.metadata !== null) out.metadata = p.metadata;
      return out;
    }
    case "tasks/resubscribe":
      refuseMetadata(ctx, p);
      return { id: taskIdOf(ctx, p, "id") };
    case "tasks/pushNotificationConfig/set":
      return taskPushConfig(ctx, "caller", "1.0", p);
    case "tasks/pushNotificationConfig/get": {
      refuseMetadata(ctx, p);
      // 0.3 may leave the config id out (the task's one config); 1.0 asks for it by id.
      if (typeof p.pushNotificationConfigId !== "string" || p.pushNotificationConfigId === "") throw notBridgeable(ctx, "pushNotificationConfigId", "A2A 1.0 reads a push config by its id, and none was given");
      return { taskId: taskIdOf(ctx, p, "id"), id: p.pushNotificationConfigId };
    }
    case "tasks/pushNotificationConfig/list":
      refuseMetadata(ctx, p);
      return { taskId: taskIdOf(ctx, p, "id") };
    case "tasks/pushNotificationConfig/delete":
      refuseMetadata(ctx, p);
      if (typeof p.pushNotificationConfigId !== "string" || p.pushNotificationConfigId === "") throw malformed(ctx, "caller", "pushNotificationConfigId", "must be a push config id");
      return { taskId: taskIdOf(ctx, p, "id"), id: p.pushNotificationConfigId };
    case "agent/getAuthenticatedExtendedCard":
      throw extendedCard(ctx);
  }
}

function paramsTo03(ctx: BridgeContext, method: A2aMethod1, p: JsonObject): JsonObject {
  refuseTenant(ctx, "tenant", p.tenant);
  switch (method) {
    case "SendMessage":
    case "SendStreamingMessage": {
      const out: JsonObject = { message: message(ctx, "caller", "0.3", p.message), configuration: sendConfigurationTo03(ctx, p.configuration) };
      if (p.metadata !== undefined && p.metadata !== null) out.metadata = p.metadata;
      return out;
    }
    case "GetTask": {
      const out: JsonObject = { id: taskIdOf(ctx, p, "id") };
      if (p.historyLength !== undefined && p.historyLength !== null) out.historyLength = p.historyLength;
      return out;
    }
    case "CancelTask": {
      const out: JsonObject = { id: taskIdOf(ctx, p, "id") };
      if (p.metadata !== undefined && p.metadata !== null) out.metadata = p.metadata;
      return out;
    }
    case "SubscribeToTask":
      return { id: taskIdOf(ctx, p, "id") };
    case "CreateTaskPushNotificationConfig":
      return taskPushConfig(ctx, "caller", "0.3", p);
    case "GetTaskPushNotificationConfig":
      return { id: taskIdOf(ctx, p, "taskId"), pushNotificationConfigId: taskIdOf(ctx, p, "id") };
    case "ListTaskPushNotificationConfigs":
      // 0.3 answers every config at once: a first page of any size holds them all; a later page has no 0.3 form.
      if (p.pageToken !== undefined && p.pageToken !== null && p.pageToken !== "") throw notBridgeable(ctx, "pageToken", "A2A 0.3 lists push configs in one page");
      return { id: taskIdOf(ctx, p, "taskId") };
    case "DeleteTaskPushNotificationConfig":
      return { id: taskIdOf(ctx, p, "taskId"), pushNotificationConfigId: taskIdOf(ctx, p, "id") };
    case "ListTasks":
      throw notBridgeable(ctx, "method", "A2A 0.3 has no method to list tasks");
    case "GetExtendedAgentCard":
      throw extendedCard(ctx);
  }
}

/** The agent's extended card names its own addresses and schemes; the gateway serves its own cards only. */
function extendedCard(ctx: BridgeContext): GatewayError {
  return notBridgeable(ctx, "method", "the gateway serves its own agent cards, never an agent's extended card");
}

/**
 * The request an agent of generation `agent` reads for `request`, sent by a caller of generation
 * `caller`: the counterpart method, its params translated, the caller's `id` kept. Same generation:
 * the request unchanged. Throws `agent_call_not_bridgeable` for what the agent's generation cannot
 * express, `invalid_request` for params malformed in the caller's generation.
 */
export function bridgeRequest(request: A2aJsonRpcRequest, caller: A2aGeneration, agent: A2aGeneration): A2aJsonRpcRequest {
  if (caller === agent) return request;
  const ctx = contextOf(request.method, caller, agent);
  if (methodGeneration(request.method) !== caller) throw new GatewayError("invalid_request", `${request.method} is not a method of A2A ${caller}'s JSON-RPC binding.`, { param: "method" });
  const params = paramsOf(ctx, request);
  if (caller === "0.3") {
    const method = request.method as A2aMethod03;
    return { jsonrpc: "2.0", id: request.id, method: METHODS_03_TO_1[method], params: paramsTo1(ctx, method, params) };
  }
  const method = request.method as A2aMethod1;
  const target = METHODS_1_TO_03[method];
  const translated = paramsTo03(ctx, method, params);
  if (target === undefined) throw notBridgeable(ctx, "method", "it has no A2A 0.3 counterpart");
  return { jsonrpc: "2.0", id: request.id, method: target, params: translated };
}

/** Each A2A error code and its 1.0 `ErrorInfo.reason` (codes are the same in both generations). */
const ERROR_REASONS: Readonly<Record<number, string>> = {
  [-32001]: "TASK_NOT_FOUND",
  [-32002]: "TASK_NOT_CANCELABLE",
  [-32003]: "PUSH_NOTIFICATION_NOT_SUPPORTED",
  [-32004]: "UNSUPPORTED_OPERATION",
  [-32005]: "CONTENT_TYPE_NOT_SUPPORTED",
  [-32006]: "INVALID_AGENT_RESPONSE",
  [-32007]: "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
  [-32008]: "EXTENSION_SUPPORT_REQUIRED",
  [-32009]: "VERSION_NOT_SUPPORTED",
};
const ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo";
const A2A_ERROR_DOMAIN = "a2a-protocol.org";

function isA2aErrorInfo(d: unknown): boolean {
  return typeof d === "object" && d !== null && (d as JsonObject)["@type"] === ERROR_INFO_TYPE && (d as JsonObject).domain === A2A_ERROR_DOMAIN;
}

/** An agent's JSON-RPC error in the caller's generation: same code and message; 1.0's typed details added or taken away. */
function bridgeError(error: NonNullable<A2aJsonRpcResponse["error"]>, to: A2aGeneration): NonNullable<A2aJsonRpcResponse["error"]> {
  const { code, message: text } = error;
  if (to === "0.3") {
    // 1.0's ErrorInfo restates the code: 0.3 has the code alone. Other details are kept.
    const rest = Array.isArray(error.data) ? error.data.filter((d) => !isA2aErrorInfo(d)) : error.data;
    return Array.isArray(rest) && rest.length === 0 ? { code, message: text } : rest === undefined ? { code, message: text } : { code, message: text, data: rest };
  }
  const reason = ERROR_REASONS[code];
  const info = reason === undefined ? [] : [{ "@type": ERROR_INFO_TYPE, reason, domain: A2A_ERROR_DOMAIN }];
  // 0.3's data is free-form; 1.0's is a list of typed details, where free-form data has no place.
  const kept = Array.isArray(error.data) ? error.data : [];
  const data = [...info, ...kept];
  return data.length === 0 ? { code, message: text } : { code, message: text, data };
}

function resultTo(ctx: BridgeContext, method: string, to: A2aGeneration, result: unknown): unknown {
  const author: Author = "agent";
  switch (method) {
    case "message/send":
    case "SendMessage":
      return streamResponse(ctx, author, to, result, false);
    case "message/stream":
    case "SendStreamingMessage":
    case "tasks/resubscribe":
    case "SubscribeToTask":
      return streamResponse(ctx, author, to, result, true);
    case "tasks/get":
    case "GetTask":
    case "tasks/cancel":
    case "CancelTask":
      return task(ctx, author, to, result);
    case "tasks/pushNotificationConfig/set":
    case "CreateTaskPushNotificationConfig":
    case "tasks/pushNotificationConfig/get":
    case "GetTaskPushNotificationConfig":
      return taskPushConfig(ctx, author, to, result);
    case "tasks/pushNotificationConfig/list":
    case "ListTaskPushNotificationConfigs": {
      if (to === "1.0") {
        if (!Array.isArray(result)) throw malformed(ctx, author, "result", "must be a list of push configs");
        return { configs: result.map((c) => taskPushConfig(ctx, author, to, c)) };
      }
      const configs = objectAt(ctx, author, "result", result).configs ?? [];
      if (!Array.isArray(configs)) throw malformed(ctx, author, "result.configs", "must be a list of push configs");
      return configs.map((c) => taskPushConfig(ctx, author, to, c));
    }
    case "tasks/pushNotificationConfig/delete":
    case "DeleteTaskPushNotificationConfig":
      // 0.3 answers `null`, 1.0 an empty message.
      return to === "1.0" ? {} : null;
    default:
      throw new GatewayError("internal_error", `No answer translation for ${method}.`);
  }
}

/**
 * The agent's answer to a bridged request — a JSON-RPC response, or the data of one SSE event of
 * a stream — in the caller's generation, carrying the caller's request `id`. `method` is the
 * caller's. Same generation: the answer unchanged (its id set back). Throws
 * `upstream_protocol_error` when the agent's answer is not valid in its own generation.
 */
export function bridgeResponse(response: A2aJsonRpcResponse, method: string, caller: A2aGeneration, agent: A2aGeneration, callerId: string | number | null): A2aJsonRpcResponse {
  if (caller === agent) return { ...response, id: callerId };
  const ctx = contextOf(method, caller, agent);
  if (response.error !== undefined) return { jsonrpc: "2.0", id: callerId, error: bridgeError(response.error, caller) };
  if (!("result" in response)) throw malformed(ctx, "agent", "response", "has neither result nor error");
  return { jsonrpc: "2.0", id: callerId, result: resultTo(ctx, method, caller, response.result) };
}
