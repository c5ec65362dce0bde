/**
 * The task handle of a task-augmented tool call that waits for an approval (MCP tasks, 2025-11-25).
 * The gateway keeps no call arguments and holds no connection, so the handle is the task: the
 * `taskId` the client polls with is the call itself (approval, principal, endpoint, server, tool,
 * arguments, lifetime), sealed with AES-256-GCM under a key derived (HKDF) from the approvals'
 * state secret. The client can neither read the arguments back out of it nor forge one, and a
 * handle presented by another principal, tampered or past its lifetime is to the caller a task
 * that does not exist.
 *
 * It is `t1.<iv>.<ciphertext>` in base64url; the version is authenticated as associated data.
 */

import { openToken, sealToken } from "../digest/sealed-json.ts";
import { deriveApprovalKey } from "./approval-key.ts";

/** What a handle carries. */
export interface TaskHandle {
  /** The approval the call waits for (its state is read from the desk, never from the handle). */
  readonly approvalId: string;
  readonly tenant: string;
  /** The key id (or token subject) of the principal that made the call. */
  readonly key: string;
  /** The endpoint the call came in on: a server's name (`/mcp/<server>`), or `*` for the virtual server. */
  readonly endpoint: string;
  /** The server and the tool's own name there. */
  readonly server: string;
  readonly tool: string;
  readonly arguments: unknown;
  /** Epoch ms: when the task was created, and after which the handle is refused. */
  readonly issuedAt: number;
  readonly expiresAt: number;
}

/** Why a presented handle was refused (all of them answer "unknown task"). */
export type HandleFailure = "malformed" | "tampered" | "expired" | "other_principal";

/** The largest arguments a handle carries (their JSON, in bytes); a bigger call is answered without a task. */
export const MAX_TASK_ARGUMENTS_BYTES = 32 * 1024;

/** Whether a call's arguments are small enough to be carried in a handle. */
export function fitsTaskHandle(args: unknown): boolean {
  return enc.encode(JSON.stringify(args ?? {})).length <= MAX_TASK_ARGUMENTS_BYTES;
}

/** The longest handle read at all: what sealing the largest arguments can produce, with room for the rest. */
const MAX_HANDLE_CHARS = 64 * 1024;

const VERSION = "t1";
const enc = new TextEncoder();

/** Seals and opens task handles under one secret. */
export class TaskHandleSealer {
  readonly #key: CryptoKey;

  private constructor(key: CryptoKey) {
    this.#key = key;
  }

  /** Derives the AES key from the approvals' state secret (HKDF-SHA-256 with its own info, apart from the requestState's key). */
  static async fromSecret(secret: string): Promise<TaskHandleSealer> {
    const key = await deriveApprovalKey(secret, "task-handle v1", { name: "AES-GCM", length: 256 }, ["encrypt", "decrypt"]);
    return new TaskHandleSealer(key);
  }

  /** The sealed handle; undefined when the arguments are larger than {@link MAX_TASK_ARGUMENTS_BYTES}. */
  async seal(handle: TaskHandle): Promise<string | undefined> {
    if (!fitsTaskHandle(handle.arguments)) return undefined;
    return await sealToken(this.#key, VERSION, handle);
  }

  /** The handle `presented` by `principal` at `now`, or why it is refused. */
  async open(presented: string, principal: { readonly tenant: string; readonly key: string }, now: number): Promise<{ readonly ok: true; readonly handle: TaskHandle } | { readonly ok: false; readonly why: HandleFailure }> {
    const opened = await openToken<TaskHandle>(this.#key, VERSION, presented, MAX_HANDLE_CHARS);
    if (!opened.ok) return opened;
    const handle = opened.value;
    if (handle.tenant !== principal.tenant || handle.key !== principal.key) return { ok: false, why: "other_principal" };
    if (!(now < handle.expiresAt)) return { ok: false, why: "expired" };
    return { ok: true, handle };
  }
}
