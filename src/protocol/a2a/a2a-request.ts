import { GatewayError } from "../../errors/gateway-error.ts";
import { isRecord } from "../fast-guard.ts";
import { SPOKEN_GENERATIONS, generationOfVersion, type A2aGeneration } from "./agent-card.ts";

/**
 * A2A requests as callers send them to `POST /a2a/<agent>`: the JSON-RPC binding of A2A 1.0 and
 * of A2A 0.3, read once at decode. Only the envelope and the fields the gateway decides on are
 * read here (the method, the skill a message names, the task and context ids it refers to);
 * `params` go on to the agent as the caller wrote them.
 */

/** What a method does, as the gateway treats it. */
export type A2aMethodKind =
  /** Sends a message: decided by skill, priced, may make a task. */
  | "message"
  /** Reads or changes one task by id. */
  | "task"
  /** Lists tasks (1.0 `ListTasks`). */
  | "list"
  /** The agent's authenticated extended card: refused for now (it would need the card's rewriting and filtering). */
  | "card"
  /** Push-notification configuration of one task (relayed by the gateway: src/a2a/push-relay.ts). */
  | "push";

/** One method of a generation's JSON-RPC binding. */
export interface A2aMethod {
  readonly kind: A2aMethodKind;
  /** The agent answers with an SSE stream of JSON-RPC responses. */
  readonly streaming: boolean;
}

const m = (kind: A2aMethodKind, streaming = false): A2aMethod => ({ kind, streaming });

/** The methods of each generation's JSON-RPC binding (A2A 1.0 spec §9, A2A 0.3 spec §7). */
export const A2A_METHODS: Readonly<Record<A2aGeneration, Readonly<Record<string, A2aMethod>>>> = {
  "1.0": {
    SendMessage: m("message"),
    SendStreamingMessage: m("message", true),
    GetTask: m("task"),
    ListTasks: m("list"),
    CancelTask: m("task"),
    SubscribeToTask: m("task", true),
    GetExtendedAgentCard: m("card"),
    CreateTaskPushNotificationConfig: m("push"),
    GetTaskPushNotificationConfig: m("push"),
    ListTaskPushNotificationConfigs: m("push"),
    DeleteTaskPushNotificationConfig: m("push"),
  },
  "0.3": {
    "message/send": m("message"),
    "message/stream": m("message", true),
    "tasks/get": m("task"),
    "tasks/cancel": m("task"),
    "tasks/resubscribe": m("task", true),
    "agent/getAuthenticatedExtendedCard": m("card"),
    "tasks/pushNotificationConfig/set": m("push"),
    "tasks/pushNotificationConfig/get": m("push"),
    "tasks/pushNotificationConfig/list": m("push"),
    "tasks/pushNotificationConfig/delete": m("push"),
  },
};

/** The header a caller names its protocol version in (both generations). */
export const A2A_VERSION_HEADER = "a2a-version";

/**
 * The generation a request speaks, from its `A2A-Version` header: `1.0`/`1.0.x` or `0.3`/`0.3.x`;
 * absent or empty means 0.3, as the 1.0 specification says of clients that send none. Anything
 * else is refused with A2A's VersionNotSupportedError, naming the versions spoken.
 */
export function requestGeneration(header: string | null | undefined): A2aGeneration {
  const v = header?.trim() ?? "";
  if (v === "") return "0.3";
  const g = generationOfVersion(v);
  if (g === undefined) {
    throw new GatewayError("agent_version_not_supported", `A2A-Version ${JSON.stringify(v.slice(0, 32))} is not spoken here: this gateway speaks A2A ${SPOKEN_GENERATIONS.join(" and ")}.`, {
      details: [{ supported: [...SPOKEN_GENERATIONS], requested: v.slice(0, 32) }],
    });
  }
  return g;
}

/** One decoded A2A request. */
export interface A2aRequest {
  readonly id: string | number;
  readonly method: string;
  readonly generation: A2aGeneration;
  readonly info: A2aMethod;
  readonly params: Readonly<Record<string, unknown>>;
  /** The skill a message names in `message.metadata.skill`; undefined: none named. */
  readonly skill: string | undefined;
  /** The tags a message asks for in `message.metadata.tags` (the virtual agent routes by them); undefined: none. */
  readonly tags: readonly string[] | undefined;
  /** The A2A task the request refers to (a task method's `id`, a message's `taskId`): a correlation only. */
  readonly a2aTaskId: string | undefined;
  /** The A2A context a message continues, or a list is scoped to. */
  readonly contextId: string | undefined;
}

/** The longest skill id or tag read from a request (longer: refused). */
const MAX_ID = 256;
/**
 * The longest task or context id read from a request: the ids callers hold are the gateway's
 * bound form of an agent's id (src/a2a/task-binding.ts), which is longer than the agent's.
 */
const MAX_TASK_ID = 4096;

/**
 * The longest task id read: the gateway's own tasks of messages waiting for approval carry the
 * held message in theirs (src/approvals/agent-task-handle.ts); any other, longer than a bound id
 * can be, opens as no task.
 */
const MAX_APPROVAL_TASK_ID = 64 * 1024;

const idField = (o: Readonly<Record<string, unknown>>, key: string, param: string, max = MAX_ID): string | undefined => {
  const v = o[key];
  if (v === undefined || v === null || v === "") return undefined;
  if (typeof v !== "string" || v.length > max) throw new GatewayError("invalid_request", `${param} must be a string of at most ${max} characters.`, { param });
  return v;
};

/** The most tags a message may ask for. */
const MAX_TAGS = 16;

const tagsField = (metadata: Readonly<Record<string, unknown>>): readonly string[] | undefined => {
  const v = metadata.tags;
  if (v === undefined || v === null) return undefined;
  const param = "params.message.metadata.tags";
  if (!Array.isArray(v) || v.length > MAX_TAGS || !v.every((t) => typeof t === "string" && t !== "" && t.length <= MAX_ID)) {
    throw new GatewayError("invalid_request", `${param} must be an array of at most ${MAX_TAGS} non-empty strings of at most ${MAX_ID} characters.`, { param });
  }
  return v.length === 0 ? undefined : (v as string[]);
};

/** The JSON-RPC id of a body, when it has a usable one (for answering a body refused later). */
export function jsonRpcIdOf(body: unknown): string | number | null {
  const id = isRecord(body) ? body.id : undefined;
  return typeof id === "string" || (typeof id === "number" && Number.isFinite(id)) ? id : null;
}

/**
 * Reads one JSON-RPC 2.0 request of `generation`: one object (no batch), `jsonrpc: "2.0"`, a
 * string or number id (every A2A method has a result, so a notification is refused), a method
 * of the generation, object `params`. A message's skill is the string at
 * `params.message.metadata.skill`. Push configs (the push-config methods', and one a message
 * carries) are read and checked by the A2A kind (src/a2a/push-relay.ts), not here.
 */
export function decodeA2aRequest(body: unknown, generation: A2aGeneration): A2aRequest {
  if (!isRecord(body)) throw new GatewayError("invalid_request", "An A2A request is one JSON-RPC 2.0 request object.");
  if (body.jsonrpc !== "2.0") throw new GatewayError("invalid_request", 'An A2A request needs "jsonrpc": "2.0".', { param: "jsonrpc" });
  const id = jsonRpcIdOf(body);
  if (id === null) throw new GatewayError("invalid_request", "An A2A request needs a string or number id: every A2A method answers.", { param: "id" });
  const method = body.method;
  if (typeof method !== "string") throw new GatewayError("invalid_request", "An A2A request needs a method.", { param: "method" });
  const info = Object.hasOwn(A2A_METHODS[generation], method) ? A2A_METHODS[generation][method] : undefined;
  if (info === undefined) {
    const other = generation === "1.0" ? "0.3" : "1.0";
    const hint = Object.hasOwn(A2A_METHODS[other], method) ? ` It is an A2A ${other} method: send A2A-Version: ${other}.` : "";
    throw new GatewayError("agent_method_not_found", `Method ${JSON.stringify(method.slice(0, 64))} is not an A2A ${generation} method.${hint}`);
  }
  const params = body.params === undefined ? {} : body.params;
  if (!isRecord(params)) throw new GatewayError("invalid_request", "params must be an object.", { param: "params" });
  if (info.kind === "card") {
    // The agent's own extended card names its URLs, its security schemes and every skill: served
    // raw it would undo what the gateway's card hides. The gateway's card is the one to read.
    throw new GatewayError("agent_operation_unsupported", "The agent's extended card is not served through this gateway yet: read the gateway's card at /.well-known/agent-card.json under this agent's URL.");
  }
  let skill: string | undefined;
  let tags: readonly string[] | undefined;
  let a2aTaskId: string | undefined;
  let contextId: string | undefined;
  if (info.kind === "message") {
    const message = params.message;
    if (!isRecord(message)) throw new GatewayError("invalid_request", "params.message must be an object.", { param: "params.message" });
    skill = isRecord(message.metadata) ? idField(message.metadata, "skill", "params.message.metadata.skill") : undefined;
    tags = isRecord(message.metadata) ? tagsField(message.metadata) : undefined;
    a2aTaskId = idField(message, "taskId", "params.message.taskId", MAX_APPROVAL_TASK_ID);
    contextId = idField(message, "contextId", "params.message.contextId", MAX_TASK_ID);
  } else if (info.kind === "task") {
    a2aTaskId = idField(params, "id", "params.id", MAX_APPROVAL_TASK_ID);
    if (a2aTaskId === undefined) throw new GatewayError("invalid_request", `${method} needs params.id, the task's id.`, { param: "params.id" });
  } else if (info.kind === "push") {
    // 1.0 names the task `taskId` throughout; 0.3 `taskId` when setting, `id` otherwise.
    const key = generation === "1.0" || method === "tasks/pushNotificationConfig/set" ? "taskId" : "id";
    a2aTaskId = idField(params, key, `params.${key}`);
    if (a2aTaskId === undefined) throw new GatewayError("invalid_request", `${method} needs params.${key}, the task's id.`, { param: `params.${key}` });
  } else if (info.kind === "list") {
    contextId = idField(params, "contextId", "params.contextId", MAX_TASK_ID);
    // The agent knows one caller, the gateway: a list not scoped to a context would be every caller's tasks.
    if (contextId === undefined) throw new GatewayError("agent_operation_unsupported", "ListTasks through this gateway needs params.contextId: the agent sees every caller as the gateway, so an unscoped list would show other callers' tasks.", { param: "params.contextId" });
  }
  return { id, method, generation, info, params, skill, tags, a2aTaskId, contextId };
}
