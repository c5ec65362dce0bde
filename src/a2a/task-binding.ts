/**
 * A2A task and context ids bound to the caller. An agent behind the gateway sees every caller as
 * the gateway (one credential), so it cannot tell whose task or context an id is: left raw, any
 * caller allowed to use the agent could read, cancel or resubscribe to another caller's task, or
 * list another caller's context, by its id. The gateway hands callers bound ids instead — the
 * agent's id with an HMAC over (kind, tenant, key, agent, id) — and opens them again on the way
 * in: an id minted for another caller, another agent, or not by this gateway is, to the caller,
 * one that does not exist. A context id the caller chose itself is put in the caller's own
 * namespace before the agent sees it, so two callers choosing the same one never share a context.
 *
 * The binding is deterministic (one agent task is one caller id however often it is named, so a
 * client can match a stream's events to the task it holds) and stateless (nothing is stored). It
 * does not hide the agent's id, which is no secret; it only makes it unusable by anyone else.
 *
 * Forms: `at1.<agent's id, base64url>.<tag>` for a task, `ac1.…` for a context; the tag is the
 * first 128 bits of the HMAC, in base64url.
 */

import { deriveSecretKey, MIN_SECRET_LENGTH } from "../digest/derived-key.ts";
import { fromBase64url, toBase64url } from "../digest/base64url.ts";

/** What an id names. */
export type BoundIdKind = "task" | "context";

const PREFIX: Readonly<Record<BoundIdKind, string>> = { task: "at1.", context: "ac1." };
const TAG_BYTES = 16;
/** The longest agent id bound (an agent's longer ids are answered as not found when presented back). */
export const MAX_AGENT_ID = 512;
/** The longest bound id read at all: an agent id of {@link MAX_AGENT_ID} UTF-16 units as UTF-8, encoded, plus the tag. */
export const MAX_BOUND_ID = 4 + Math.ceil((MAX_AGENT_ID * 3 * 4) / 3) + 1 + 22;

const enc = new TextEncoder();
// `ignoreBOM` keeps a leading U+FEFF of an agent's id: the id opened is byte for byte the id bound.
const dec = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Whether a presented id has the bound form of `kind` (else it is one the caller chose itself); the form says nothing of whose it is. */
export function isBoundId(kind: BoundIdKind, presented: string): boolean {
  return presented.startsWith(PREFIX[kind]);
}

/** Who the ids are bound to: the caller (tenant and key) and the agent that holds the tasks. */
export interface IdOwner {
  readonly tenant: string;
  readonly key: string;
  readonly agent: string;
}

/** Mints and opens the bound ids of one owner; each id is computed once per instance. */
export interface CallerIds {
  /** The caller's id of an agent's task or context. */
  bind(kind: BoundIdKind, agentId: string): Promise<string>;
  /** The agent's id a caller presented, or undefined when it is not this owner's (forged, another caller's or agent's, malformed). */
  open(kind: BoundIdKind, callerId: string): Promise<string | undefined>;
  /** The agent's context id for one the caller chose itself: the caller's id in the caller's own namespace. */
  ownContext(callerChosen: string): Promise<string>;
}

/** The HMAC key the bound ids of an isolate are made with, from the configured secret. */
export class A2aIdBinding {
  readonly #key: CryptoKey;

  private constructor(key: CryptoKey) {
    this.#key = key;
  }

  /** Derives the HMAC key from `a2a.stateSecret`'s value (HKDF-SHA-256, its own info). */
  static async fromSecret(secret: string): Promise<A2aIdBinding> {
    if (secret.length < MIN_SECRET_LENGTH) throw new RangeError(`the A2A state secret must be at least ${MIN_SECRET_LENGTH} characters`);
    return new A2aIdBinding(await deriveSecretKey(secret, "sluice a2a", "id binding v1", { name: "HMAC", hash: "SHA-256", length: 256 }, ["sign"]));
  }

  /** The ids of one owner (one per request: its memo lives as long as the request). */
  forOwner(owner: IdOwner): CallerIds {
    const key = this.#key;
    const scope = JSON.stringify([owner.tenant, owner.key, owner.agent]);
    const minted = new Map<string, string>();
    const tag = async (kind: string, id: string) => new Uint8Array(await crypto.subtle.sign("HMAC", key, enc.encode(`${kind}\n${scope}\n${id}`))).subarray(0, TAG_BYTES);
    return {
      bind: async (kind, agentId) => {
        const memo = `${kind}\n${agentId}`;
        let id = minted.get(memo);
        if (id === undefined) {
          id = `${PREFIX[kind]}${toBase64url(enc.encode(agentId))}.${toBase64url(await tag(kind, agentId))}`;
          minted.set(memo, id);
        }
        return id;
      },
      open: async (kind, callerId) => {
        if (callerId.length > MAX_BOUND_ID || !callerId.startsWith(PREFIX[kind])) return undefined;
        const parts = callerId.slice(PREFIX[kind].length).split(".");
        if (parts.length !== 2) return undefined;
        const raw = fromBase64url(parts[0]!);
        const presented = fromBase64url(parts[1]!);
        if (!raw || !presented || presented.length !== TAG_BYTES) return undefined;
        let agentId: string;
        try {
          agentId = dec.decode(raw);
        } catch {
          return undefined;
        }
        if (agentId === "" || agentId.length > MAX_AGENT_ID) return undefined;
        const expected = await tag(kind, agentId);
        let diff = 0;
        for (let i = 0; i < TAG_BYTES; i++) diff |= expected[i]! ^ presented[i]!;
        if (diff !== 0) return undefined;
        minted.set(`${kind}\n${agentId}`, callerId);
        return agentId;
      },
      ownContext: async (callerChosen) => `sluice-${toBase64url(await tag("own-context", callerChosen)).slice(0, 16)}-${callerChosen}`,
    };
  }
}
