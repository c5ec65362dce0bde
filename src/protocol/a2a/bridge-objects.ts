import { GatewayError } from "../../errors/gateway-error.ts";
import type { A2aGeneration } from "./agent-card.ts";

/**
 * The A2A objects of the two generations' JSON-RPC bindings, translated wire to wire: messages,
 * parts, tasks, artifacts, stream events and push-notification configs.
 *
 * - **0.3** objects carry a `kind` (`message`, `task`, `status-update`, `artifact-update`; parts:
 *   `text`, `file`, `data`), roles `user`/`agent` and states in kebab case (`input-required`).
 * - **1.0** objects are the protobuf JSON of the specification: no `kind` (a one-of's field names
 *   its case: a part is `{text}`, `{raw}`, `{url}` or `{data}`; a stream event is `{task}`,
 *   `{message}`, `{statusUpdate}` or `{artifactUpdate}`), roles `ROLE_USER`/`ROLE_AGENT`, states
 *   `TASK_STATE_*`, and default values (empty strings and lists, `false`) left out.
 *
 * Written here rather than taken from `@a2a-js/sdk/compat/v0_3`: its translators are not exported,
 * go through the SDK's in-memory protobuf shapes (not the 1.0 wire JSON the gateway relays), and
 * use Node's `Buffer`. The mapping follows theirs where the specifications leave a choice (a
 * non-object data part rides in 0.3 as `{value}` with `metadata.data_part_compat`, so a peer
 * built on the SDK reads it back; a text part's media type has no 0.3 field).
 */

/** A JSON object as parsed from a body. */
export type JsonObject = Record<string, unknown>;

/** Who wrote what is being translated: the caller (a bad value is its error) or the agent. */
export type Author = "caller" | "agent";

/** Where a translation happens, for the errors it raises. */
export interface BridgeContext {
  /** The method as the caller named it. */
  readonly method: string;
  readonly caller: A2aGeneration;
  readonly agent: A2aGeneration;
}

/** A value the other generation cannot express: refused, naming the method, the field and both generations. */
export function notBridgeable(ctx: BridgeContext, field: string, why: string): GatewayError {
  return new GatewayError("agent_call_not_bridgeable", `${ctx.method}: ${field} cannot be bridged from A2A ${ctx.caller} to an A2A ${ctx.agent} agent: ${why}.`, {
    param: field,
    details: [{ method: ctx.method, field, callerVersion: ctx.caller, agentVersion: ctx.agent }],
  });
}

/** A malformed object: the caller's is its error, the agent's an upstream protocol error. */
export function malformed(ctx: BridgeContext, author: Author, field: string, why: string): GatewayError {
  return author === "caller"
    ? new GatewayError("invalid_request", `${ctx.method}: ${field} ${why}.`, { param: field })
    : new GatewayError("upstream_protocol_error", `The agent's answer to ${ctx.method} is not valid A2A ${ctx.agent}: ${field} ${why}.`);
}

function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** `v` as an object, or the translation's error. */
export function objectAt(ctx: BridgeContext, author: Author, field: string, v: unknown): JsonObject {
  if (!isObject(v)) throw malformed(ctx, author, field, "must be an object");
  return v;
}

function stringAt(ctx: BridgeContext, author: Author, field: string, v: unknown): string {
  if (typeof v !== "string") throw malformed(ctx, author, field, "must be a string");
  return v;
}

function arrayAt(ctx: BridgeContext, author: Author, field: string, v: unknown): unknown[] {
  if (!Array.isArray(v)) throw malformed(ctx, author, field, "must be an array");
  return v;
}

/** Copies the named fields that carry a value (1.0 leaves defaults out; 0.3 has them optional). */
function copyPresent(from: JsonObject, to: JsonObject, fields: readonly string[]): void {
  for (const f of fields) {
    const v = from[f];
    if (v === undefined || v === null || v === "") continue;
    if (Array.isArray(v) && v.length === 0) continue;
    to[f] = v;
  }
}

/** `metadata` when it says something: an empty object is purely informational and dropped. */
function copyMetadata(from: JsonObject, to: JsonObject): void {
  const m = from.metadata;
  if (isObject(m) && Object.keys(m).length > 0) to.metadata = m;
}

// ---------------------------------------------------------------------------------------------
// Enums

const STATES_03_TO_1 = {
  unknown: "TASK_STATE_UNSPECIFIED",
  submitted: "TASK_STATE_SUBMITTED",
  working: "TASK_STATE_WORKING",
  completed: "TASK_STATE_COMPLETED",
  failed: "TASK_STATE_FAILED",
  canceled: "TASK_STATE_CANCELED",
  "input-required": "TASK_STATE_INPUT_REQUIRED",
  rejected: "TASK_STATE_REJECTED",
  "auth-required": "TASK_STATE_AUTH_REQUIRED",
} as const;

const STATES_1_TO_03: Readonly<Record<string, string>> = Object.fromEntries(Object.entries(STATES_03_TO_1).map(([k, v]) => [v, k]));

/** 0.3 states after which a stream ends (terminal and interrupted): its status update is `final`. */
const FINAL_STATES_03 = new Set(["completed", "canceled", "failed", "rejected", "input-required", "auth-required"]);

function state(ctx: BridgeContext, author: Author, to: A2aGeneration, v: unknown): string {
  const table: Readonly<Record<string, string>> = to === "1.0" ? STATES_03_TO_1 : STATES_1_TO_03;
  const s = typeof v === "string" ? table[v] : undefined;
  if (s === undefined) throw malformed(ctx, author, "status.state", `is not a task state of A2A ${to === "1.0" ? "0.3" : "1.0"}`);
  return s;
}

function role(ctx: BridgeContext, author: Author, to: A2aGeneration, v: unknown): string {
  if (to === "1.0") {
    if (v === "user") return "ROLE_USER";
    if (v === "agent") return "ROLE_AGENT";
  } else {
    if (v === "ROLE_USER") return "user";
    if (v === "ROLE_AGENT") return "agent";
  }
  throw malformed(ctx, author, "message.role", "is not a role of the message's generation");
}

// ---------------------------------------------------------------------------------------------
// Parts

/** The 0.3 metadata flag of a 1.0 data part whose value is not an object (wrapped as `{value}`). */
const DATA_PART_COMPAT_FLAG = "data_part_compat";

function partTo1(ctx: BridgeContext, author: Author, v: unknown): JsonObject {
  const p = objectAt(ctx, author, "part", v);
  const out: JsonObject = {};
  switch (p.kind) {
    case "text":
      out.text = stringAt(ctx, author, "part.text", p.text);
      break;
    case "file": {
      const file = objectAt(ctx, author, "part.file", p.file);
      if (typeof file.bytes === "string") out.raw = file.bytes;
      else if (typeof file.uri === "string") out.url = file.uri;
      else throw malformed(ctx, author, "part.file", "has neither bytes nor uri");
      if (typeof file.mimeType === "string" && file.mimeType !== "") out.mediaType = file.mimeType;
      if (typeof file.name === "string" && file.name !== "") out.filename = file.name;
      break;
    }
    case "data": {
      const data = objectAt(ctx, author, "part.data", p.data);
      const meta = isObject(p.metadata) ? { ...p.metadata } : undefined;
      if (meta?.[DATA_PART_COMPAT_FLAG] === true && "value" in data) {
        delete meta[DATA_PART_COMPAT_FLAG];
        out.data = data.value;
        if (Object.keys(meta).length > 0) out.metadata = meta;
        return out;
      }
      out.data = data;
      break;
    }
    default:
      throw malformed(ctx, author, "part.kind", "is not text, file or data");
  }
  copyMetadata(p, out);
  return out;
}

function partTo03(ctx: BridgeContext, author: Author, v: unknown): JsonObject {
  const p = objectAt(ctx, author, "part", v);
  let out: JsonObject;
  if ("text" in p) {
    // 0.3 text is untyped: a text part's mediaType and filename have no field there.
    out = { kind: "text", text: stringAt(ctx, author, "part.text", p.text) };
  } else if ("raw" in p || "url" in p) {
    const file: JsonObject = "raw" in p ? { bytes: stringAt(ctx, author, "part.raw", p.raw) } : { uri: stringAt(ctx, author, "part.url", p.url) };
    if (typeof p.mediaType === "string" && p.mediaType !== "") file.mimeType = p.mediaType;
    if (typeof p.filename === "string" && p.filename !== "") file.name = p.filename;
    out = { kind: "file", file };
  } else if ("data" in p) {
    if (isObject(p.data)) out = { kind: "data", data: p.data };
    else {
      // 0.3 data is an object; any other JSON value is wrapped, flagged so it is unwrapped again.
      const meta = isObject(p.metadata) ? { ...p.metadata } : {};
      return { kind: "data", data: { value: p.data }, metadata: { ...meta, [DATA_PART_COMPAT_FLAG]: true } };
    }
  } else {
    throw malformed(ctx, author, "part", "has none of text, raw, url or data");
  }
  copyMetadata(p, out);
  return out;
}

function parts(ctx: BridgeContext, author: Author, to: A2aGeneration, field: string, v: unknown): JsonObject[] {
  return arrayAt(ctx, author, field, v).map((p) => (to === "1.0" ? partTo1(ctx, author, p) : partTo03(ctx, author, p)));
}

// ---------------------------------------------------------------------------------------------
// Messages, artifacts, tasks

/** A message in generation `to`. */
export function message(ctx: BridgeContext, author: Author, to: A2aGeneration, v: unknown): JsonObject {
  const m = objectAt(ctx, author, "message", v);
  const out: JsonObject = to === "0.3" ? { kind: "message" } : {};
  out.messageId = stringAt(ctx, author, "message.messageId", m.messageId);
  out.role = role(ctx, author, to, m.role);
  out.parts = parts(ctx, author, to, "message.parts", m.parts);
  copyPresent(m, out, ["contextId", "taskId", "extensions", "referenceTaskIds"]);
  copyMetadata(m, out);
  return out;
}

function artifact(ctx: BridgeContext, author: Author, to: A2aGeneration, v: unknown): JsonObject {
  const a = objectAt(ctx, author, "artifact", v);
  const out: JsonObject = { artifactId: stringAt(ctx, author, "artifact.artifactId", a.artifactId) };
  copyPresent(a, out, ["name", "description", "extensions"]);
  out.parts = parts(ctx, author, to, "artifact.parts", a.parts);
  copyMetadata(a, out);
  return out;
}

function status(ctx: BridgeContext, author: Author, to: A2aGeneration, v: unknown): JsonObject {
  const s = objectAt(ctx, author, "status", v);
  const out: JsonObject = { state: state(ctx, author, to, s.state) };
  if (s.message !== undefined && s.message !== null) out.message = message(ctx, author, to, s.message);
  copyPresent(s, out, ["timestamp"]);
  return out;
}

/** A task in generation `to`. */
export function task(ctx: BridgeContext, author: Author, to: A2aGeneration, v: unknown): JsonObject {
  const t = objectAt(ctx, author, "task", v);
  const out: JsonObject = to === "0.3" ? { kind: "task" } : {};
  out.id = stringAt(ctx, author, "task.id", t.id);
  out.contextId = stringAt(ctx, author, "task.contextId", t.contextId);
  out.status = status(ctx, author, to, t.status);
  if (t.history !== undefined && t.history !== null) {
    const history = arrayAt(ctx, author, "task.history", t.history).map((m) => message(ctx, author, to, m));
    if (history.length > 0) out.history = history;
  }
  if (t.artifacts !== undefined && t.artifacts !== null) {
    const artifacts = arrayAt(ctx, author, "task.artifacts", t.artifacts).map((a) => artifact(ctx, author, to, a));
    if (artifacts.length > 0) out.artifacts = artifacts;
  }
  copyMetadata(t, out);
  return out;
}

function statusUpdate(ctx: BridgeContext, author: Author, to: A2aGeneration, e: JsonObject): JsonObject {
  const out: JsonObject = to === "0.3" ? { kind: "status-update" } : {};
  out.taskId = stringAt(ctx, author, "statusUpdate.taskId", e.taskId);
  out.contextId = stringAt(ctx, author, "statusUpdate.contextId", e.contextId);
  const s = status(ctx, author, to, e.status);
  out.status = s;
  // 0.3 marks the stream's last event; 1.0 ends the stream after a terminal or interrupted state.
  if (to === "0.3") out.final = FINAL_STATES_03.has(String(s.state));
  copyMetadata(e, out);
  return out;
}

function artifactUpdate(ctx: BridgeContext, author: Author, to: A2aGeneration, e: JsonObject): JsonObject {
  const out: JsonObject = to === "0.3" ? { kind: "artifact-update" } : {};
  out.taskId = stringAt(ctx, author, "artifactUpdate.taskId", e.taskId);
  out.contextId = stringAt(ctx, author, "artifactUpdate.contextId", e.contextId);
  out.artifact = artifact(ctx, author, to, e.artifact);
  if (to === "0.3") {
    out.append = e.append === true;
    out.lastChunk = e.lastChunk === true;
  } else {
    if (e.append === true) out.append = true;
    if (e.lastChunk === true) out.lastChunk = true;
  }
  copyMetadata(e, out);
  return out;
}

/**
 * A `SendMessage` result or a stream event in generation `to`: 0.3's kind-tagged object (a
 * message, task, status update or artifact update) or 1.0's one-of wrapper (`{message}`, `{task}`,
 * `{statusUpdate}`, `{artifactUpdate}`). `events` says whether update events may appear (streams).
 */
export function streamResponse(ctx: BridgeContext, author: Author, to: A2aGeneration, v: unknown, events: boolean): JsonObject {
  const r = objectAt(ctx, author, "result", v);
  if (to === "0.3") {
    if ("message" in r) return message(ctx, author, to, r.message);
    if ("task" in r) return task(ctx, author, to, r.task);
    if (events && "statusUpdate" in r) return statusUpdate(ctx, author, to, objectAt(ctx, author, "statusUpdate", r.statusUpdate));
    if (events && "artifactUpdate" in r) return artifactUpdate(ctx, author, to, objectAt(ctx, author, "artifactUpdate", r.artifactUpdate));
  } else {
    if (r.kind === "message") return { message: message(ctx, author, to, r) };
    if (r.kind === "task") return { task: task(ctx, author, to, r) };
    if (events && r.kind === "status-update") return { statusUpdate: statusUpdate(ctx, author, to, r) };
    if (events && r.kind === "artifact-update") return { artifactUpdate: artifactUpdate(ctx, author, to, r) };
  }
  throw malformed(ctx, author, "result", events ? "is not a message, task or task update" : "is not a message or task");
}

// ---------------------------------------------------------------------------------------------
// Push-notification configs

/** 1.0 `AuthenticationInfo {scheme, credentials}` from 0.3 `{schemes[], credentials}`. */
function authenticationTo1(ctx: BridgeContext, author: Author, field: string, v: unknown): JsonObject | undefined {
  if (v === undefined || v === null) return undefined;
  const a = objectAt(ctx, author, field, v);
  const schemes = arrayAt(ctx, author, `${field}.schemes`, a.schemes ?? []);
  // Several schemes would leave the choice to the agent; 1.0 names one, and picking one for the
  // caller would change which credential its webhook is sent.
  if (schemes.length > 1) throw notBridgeable(ctx, `${field}.schemes`, "A2A 1.0 names one authentication scheme, and more than one was given");
  const out: JsonObject = {};
  if (schemes.length === 1) out.scheme = stringAt(ctx, author, `${field}.schemes[0]`, schemes[0]);
  else if (a.credentials !== undefined) throw notBridgeable(ctx, `${field}.credentials`, "credentials without a scheme have no A2A 1.0 form");
  else return undefined;
  if (typeof a.credentials === "string" && a.credentials !== "") out.credentials = a.credentials;
  return out;
}

function authenticationTo03(ctx: BridgeContext, author: Author, field: string, v: unknown): JsonObject | undefined {
  if (v === undefined || v === null) return undefined;
  const a = objectAt(ctx, author, field, v);
  const scheme = a.scheme === undefined ? "" : stringAt(ctx, author, `${field}.scheme`, a.scheme);
  const out: JsonObject = { schemes: scheme === "" ? [] : [scheme] };
  if (typeof a.credentials === "string" && a.credentials !== "") out.credentials = a.credentials;
  return out;
}

/** A push config's own fields (0.3 `PushNotificationConfig`, the body of 1.0's flat config). */
function pushConfigFields(ctx: BridgeContext, author: Author, to: A2aGeneration, field: string, c: JsonObject): JsonObject {
  const out: JsonObject = { url: stringAt(ctx, author, `${field}.url`, c.url) };
  copyPresent(c, out, ["id", "token"]);
  const auth = to === "1.0" ? authenticationTo1(ctx, author, `${field}.authentication`, c.authentication) : authenticationTo03(ctx, author, `${field}.authentication`, c.authentication);
  if (auth !== undefined) out.authentication = auth;
  return out;
}

/** 1.0's `tenant` addresses a tenant of the agent: the gateway's interfaces have none, and 0.3 has no field for it. */
export function refuseTenant(ctx: BridgeContext, field: string, v: unknown): void {
  if (v !== undefined && v !== null && v !== "") throw notBridgeable(ctx, field, "A2A 0.3 has no tenant");
}

/** A push config inside `SendMessage`'s configuration (no task id yet). */
export function sendPushConfig(ctx: BridgeContext, author: Author, to: A2aGeneration, v: unknown): JsonObject {
  const field = to === "1.0" ? "configuration.pushNotificationConfig" : "configuration.taskPushNotificationConfig";
  const c = objectAt(ctx, author, field, v);
  if (to === "0.3" && author === "caller") refuseTenant(ctx, `${field}.tenant`, c.tenant);
  return pushConfigFields(ctx, author, to, field, c);
}

/**
 * A task's push config: 0.3 `{taskId, pushNotificationConfig: {...}}`, 1.0 flat
 * `{taskId, id, url, token, authentication}`.
 */
export function taskPushConfig(ctx: BridgeContext, author: Author, to: A2aGeneration, v: unknown): JsonObject {
  const c = objectAt(ctx, author, "params", v);
  const taskId = stringAt(ctx, author, "taskId", c.taskId);
  if (to === "1.0") {
    const inner = objectAt(ctx, author, "pushNotificationConfig", c.pushNotificationConfig);
    return { taskId, ...pushConfigFields(ctx, author, to, "pushNotificationConfig", inner) };
  }
  // An agent's own tenant on its answer is where it filed the config: nothing the caller asked for.
  if (author === "caller") refuseTenant(ctx, "tenant", c.tenant);
  return { taskId, pushNotificationConfig: pushConfigFields(ctx, author, to, "params", c) };
}
