/**
 * Where A2A task and context ids sit in requests and answers, so the gateway can swap each
 * between the id the agent made and the one the caller holds (src/a2a/task-binding.ts). Only the
 * protocol's own id fields are visited: a task's `id` and `contextId`, a message's, an event's or
 * a push config's `taskId` and `contextId`, a message's `referenceTaskIds`, a list's
 * `contextId`, in the places the wire puts them (1.0's wrappers, 0.3's bare objects, a task's
 * status message and history, task and config lists). Parts, artifacts and metadata are the
 * parties' data and are never read.
 */

import { isRecord } from "../fast-guard.ts";
import type { A2aRequest } from "./a2a-request.ts";

/** One id in place: `holder[key]` is `id`, a task's or a context's. */
export interface IdSlot {
  readonly kind: "task" | "context";
  readonly holder: Record<string, unknown> | unknown[];
  readonly key: string | number;
  readonly id: string;
  /** The request field it came from (for a refusal); answers leave it undefined. */
  readonly param?: string | undefined;
}

type Obj = Record<string, unknown>;

function field(out: IdSlot[], kind: IdSlot["kind"], o: Obj, key: string, param?: string): void {
  const v = o[key];
  if (typeof v === "string" && v !== "") out.push({ kind, holder: o, key, id: v, param: param === undefined ? undefined : `${param}.${key}` });
}

function references(out: IdSlot[], o: Obj, param?: string): void {
  const refs = o.referenceTaskIds;
  if (!Array.isArray(refs)) return;
  refs.forEach((v, i) => {
    if (typeof v === "string" && v !== "") out.push({ kind: "task", holder: refs, key: i, id: v, param: param === undefined ? undefined : `${param}.referenceTaskIds[${i}]` });
  });
}

/** The ids of a request, in the caller's generation (the caller's ids, to be opened). */
export function requestIdSlots(req: A2aRequest): IdSlot[] {
  const out: IdSlot[] = [];
  const p = req.params as Obj;
  switch (req.info.kind) {
    case "message":
      if (isRecord(p.message)) {
        field(out, "task", p.message, "taskId", "params.message");
        field(out, "context", p.message, "contextId", "params.message");
        references(out, p.message, "params.message");
      }
      break;
    case "task":
      field(out, "task", p, "id", "params");
      break;
    case "list":
      field(out, "context", p, "contextId", "params");
      break;
    case "push":
      // 1.0 names the task `taskId` in every config method; 0.3's set carries a config ({taskId, …}), its get, list and delete name the task `id`.
      field(out, "task", p, req.generation === "1.0" || req.method === "tasks/pushNotificationConfig/set" ? "taskId" : "id", "params");
      break;
    case "card":
      break;
  }
  return out;
}

/** A message, a task, a status or artifact update, or a push config: its own id fields. */
function objectSlots(out: IdSlot[], o: Obj): void {
  field(out, "task", o, "taskId");
  field(out, "context", o, "contextId");
  references(out, o);
  // A task: an `id` beside a `status` (an update event has `taskId`, a config has no status; 0.3 says `kind: "task"`).
  if (isRecord(o.status) && (o.kind === undefined || o.kind === "task")) {
    if (!("taskId" in o)) field(out, "task", o, "id");
    if (isRecord(o.status.message)) objectSlots(out, o.status.message);
  }
  if (Array.isArray(o.history)) for (const m of o.history) if (isRecord(m)) objectSlots(out, m);
}

const WRAPPERS = ["task", "message", "statusUpdate", "artifactUpdate"] as const;

/**
 * The ids of an answer's `result` (or one stream event's), in the caller's generation: 1.0's
 * wrapped stream responses and lists (`{task}`, `{tasks: […]}`, `{configs: […]}`), 0.3's bare
 * objects and config lists.
 */
export function resultIdSlots(result: unknown): IdSlot[] {
  const out: IdSlot[] = [];
  if (Array.isArray(result)) {
    for (const x of result) if (isRecord(x)) objectSlots(out, x);
    return out;
  }
  if (!isRecord(result)) return out;
  let wrapped = false;
  for (const k of WRAPPERS) {
    if (isRecord(result[k])) {
      wrapped = true;
      objectSlots(out, result[k]);
    }
  }
  for (const k of ["tasks", "configs"] as const) {
    const list = result[k];
    if (Array.isArray(list)) {
      wrapped = true;
      for (const x of list) if (isRecord(x)) objectSlots(out, x);
    }
  }
  if (!wrapped) objectSlots(out, result);
  return out;
}

/** Puts `map(slot)` in every slot (the same kind and id mapped once). */
export async function mapIds(slots: readonly IdSlot[], map: (kind: IdSlot["kind"], id: string) => Promise<string>): Promise<void> {
  if (slots.length === 0) return;
  const done = new Map<string, string>();
  for (const s of slots) {
    const memo = `${s.kind}\n${s.id}`;
    let to = done.get(memo);
    if (to === undefined) {
      to = await map(s.kind, s.id);
      done.set(memo, to);
    }
    (s.holder as Record<string | number, unknown>)[s.key] = to;
  }
}
