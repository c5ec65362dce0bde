/**
 * The task id of an A2A message that waits for a human approval. The gateway did not send the
 * message and keeps nothing of it, so the id is the message itself (approval, principal, endpoint,
 * agent, skill, the message as the caller wrote it, lifetime), sealed with AES-256-GCM under a key
 * derived (HKDF) from the approvals' state secret with its own info, apart from MCP's task handles
 * and the requestState. The caller can neither read the message back out of it nor forge one;
 * presented by another principal, on another endpoint, tampered or past its lifetime, it is to the
 * caller a task that does not exist.
 *
 * It is `ga1.<iv>.<ciphertext>` in base64url (MCP's handles are `t1.`); the version is
 * authenticated as associated data.
 */

import { openToken, sealToken } from "../digest/sealed-json.ts";
import type { A2aGeneration } from "../protocol/a2a/agent-card.ts";
import { deriveApprovalKey } from "./approval-key.ts";

/** What an agent task handle carries. */
export interface AgentTaskHandle {
  /** The approval the message waits for (its state is read from the desk, never from the handle). */
  readonly approvalId: string;
  readonly tenant: string;
  /** The key id (or token subject) of the principal that sent the message. */
  readonly key: string;
  /** The endpoint the message came in on: an agent's name (`/a2a/<agent>`), or `*` for the virtual agent `/a2a`. */
  readonly endpoint: string;
  /** The agent the message goes to (for the virtual agent: the one routing chose). */
  readonly agent: string;
  /** The skill the message was decided by; undefined: it named none. */
  readonly skill: string | undefined;
  /** The generation the message is written in. */
  readonly generation: A2aGeneration;
  /** The message as the caller sent it, the one sent once it is approved. */
  readonly message: Readonly<Record<string, unknown>>;
  /** The A2A context the task is shown in (the message's, or one minted for it). */
  readonly contextId: string;
  /** Epoch ms: when the task was made, and after which the handle is refused. */
  readonly issuedAt: number;
  readonly expiresAt: number;
}

/** Why a presented handle was refused (each answers "task not found"). */
export type AgentHandleFailure = "malformed" | "tampered" | "expired" | "other_principal" | "other_endpoint";

/** The largest message a handle carries (its JSON, in bytes); a bigger one that needs approval is refused. */
export const MAX_HELD_MESSAGE_BYTES = 32 * 1024;

/** The longest handle read at all: what sealing the largest message can produce, with room for the rest. */
const MAX_HANDLE_CHARS = 64 * 1024;

const VERSION = "ga1";
const PREFIX = `${VERSION}.`;
const enc = new TextEncoder();

/** Whether a message is small enough to be carried in a handle. */
export function fitsAgentTaskHandle(message: unknown): boolean {
  return enc.encode(JSON.stringify(message ?? {})).length <= MAX_HELD_MESSAGE_BYTES;
}

/**
 * Whether a task id a caller presents is one of the gateway's own approval tasks (by its prefix
 * only: whether it opens is {@link AgentTaskHandleSealer.open}'s to say). Such an id never goes to
 * an agent.
 */
export function isApprovalTaskId(id: unknown): id is string {
  return typeof id === "string" && id.startsWith(PREFIX);
}

/** Seals and opens agent task handles under one secret. */
export class AgentTaskHandleSealer {
  readonly #key: CryptoKey;

  private constructor(key: CryptoKey) {
    this.#key = key;
  }

  /** Derives the AES key from the approvals' state secret (HKDF-SHA-256, info of its own). */
  static async fromSecret(secret: string): Promise<AgentTaskHandleSealer> {
    const key = await deriveApprovalKey(secret, "agent-task-handle v1", { name: "AES-GCM", length: 256 }, ["encrypt", "decrypt"]);
    return new AgentTaskHandleSealer(key);
  }

  /** The sealed handle; undefined when the message is larger than {@link MAX_HELD_MESSAGE_BYTES}. */
  async seal(handle: AgentTaskHandle): Promise<string | undefined> {
    if (!fitsAgentTaskHandle(handle.message)) return undefined;
    return await sealToken(this.#key, VERSION, handle);
  }

  /** The handle `presented` by `principal` on `endpoint` at `now`, or why it is refused. */
  async open(
    presented: string,
    principal: { readonly tenant: string; readonly key: string },
    endpoint: string,
    now: number,
  ): Promise<{ readonly ok: true; readonly handle: AgentTaskHandle } | { readonly ok: false; readonly why: AgentHandleFailure }> {
    const opened = await openToken<AgentTaskHandle>(this.#key, VERSION, presented, MAX_HANDLE_CHARS);
    if (!opened.ok) return opened;
    const handle = opened.value;
    if (handle.tenant !== principal.tenant || handle.key !== principal.key) return { ok: false, why: "other_principal" };
    if (handle.endpoint !== endpoint) return { ok: false, why: "other_endpoint" };
    if (!(now < handle.expiresAt)) return { ok: false, why: "expired" };
    return { ok: true, handle };
  }
}
