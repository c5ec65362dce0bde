import { GatewayError } from "../errors/gateway-error.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import type { A2aGeneration } from "../protocol/a2a/agent-card.ts";
import { streamResponse, type JsonObject } from "../protocol/a2a/bridge-objects.ts";

/**
 * One push notification as an agent sends it to the relay, and as the caller's webhook gets it.
 * An A2A 1.0 agent sends a `StreamResponse` (`{task}`, `{statusUpdate}`, `{artifactUpdate}` or
 * `{message}`); an A2A 0.3 agent sends the task itself (`kind: "task"`). A notification crosses
 * generations like a stream event does (src/protocol/a2a/bridge-objects.ts).
 */

/** A notification read in the agent's generation: its body and the task it is about. */
export interface AgentNotification {
  readonly body: JsonObject;
  /** The agent's id of the task (empty: none named). */
  readonly taskId: string;
}

const PAYLOADS_1 = ["task", "statusUpdate", "artifactUpdate", "message"] as const;
const KINDS_03 = ["task", "status-update", "artifact-update", "message"] as const;

function refuse(generation: A2aGeneration, why: string): GatewayError {
  return new GatewayError("invalid_request", `The push notification is not an A2A ${generation} notification: ${why}.`);
}

/** Reads a notification of `generation`; refused (`invalid_request`) when it is not one. */
export function readNotification(generation: A2aGeneration, body: unknown): AgentNotification {
  if (!isRecord(body)) throw refuse(generation, "the body is not a JSON object");
  if (generation === "1.0") {
    const present = PAYLOADS_1.filter((k) => body[k] !== undefined && body[k] !== null);
    if (present.length !== 1) throw refuse(generation, `it must carry exactly one of ${PAYLOADS_1.join(", ")}`);
    const key = present[0]!;
    const inner = body[key];
    if (!isRecord(inner)) throw refuse(generation, `${key} is not an object`);
    const taskId = key === "task" ? inner.id : inner.taskId;
    return { body, taskId: typeof taskId === "string" ? taskId : "" };
  }
  const kind = body.kind;
  if (typeof kind !== "string" || !(KINDS_03 as readonly string[]).includes(kind)) throw refuse(generation, `its kind must be one of ${KINDS_03.join(", ")}`);
  const taskId = kind === "task" ? body.id : body.taskId;
  return { body, taskId: typeof taskId === "string" ? taskId : "" };
}

/**
 * The notification in the caller's generation, with the task id the caller is shown. Bridged like a
 * stream event; what cannot be bridged is refused (`agent_call_not_bridgeable`, `invalid_request`).
 */
export function notificationFor(n: AgentNotification, agent: A2aGeneration, caller: A2aGeneration): JsonObject {
  let out: JsonObject;
  try {
    // The agent is the author of this request, but it is read as a caller's input: a bad one is the sender's error.
    out = agent === caller ? n.body : streamResponse({ method: "push notification", caller: agent, agent: caller }, "caller", caller, n.body, true);
  } catch (err) {
    if (err instanceof GatewayError && err.code === "upstream_protocol_error") throw new GatewayError("invalid_request", err.message);
    throw err;
  }
  return out;
}
