/**
 * The `requestState` of an approval's `input_required` result (MCP 2026-07-28, SEP-2322): the
 * client echoes it on its retry, and nothing in it may be trusted unless the gateway made it.
 * It is `a1.<payload>.<mac>` in base64url, the payload naming the approval, a digest of the facts
 * it is bound to, a fresh nonce and an expiry, and the MAC an HMAC-SHA-256 under a key derived
 * (HKDF) from a secret. Single use: the nonce is spent at the approval desk when presented.
 */

import { canonicalDigest } from "../digest/canonical-digest.ts";
import type { ApprovalFacts } from "./approval-desk.ts";
import { deriveApprovalKey } from "./approval-key.ts";
import { fromBase64url, toBase64url } from "../digest/base64url.ts";

/** What a sealed state says. */
export interface RequestStatePayload {
  readonly approvalId: string;
  /** `canonicalDigest` of the approval's facts. */
  readonly facts: string;
  readonly nonce: string;
  readonly expiresAt: number;
}

/** Why a presented state was refused. */
export type StateFailure = "malformed" | "tampered" | "expired" | "wrong_facts";

const enc = new TextEncoder();


/** The digest a state binds: every fact of the approval. */
export function factsDigest(facts: ApprovalFacts): Promise<string> {
  return canonicalDigest(facts);
}

/** Seals and opens approval request states under one secret. */
export class RequestStateSealer {
  readonly #key: CryptoKey;

  private constructor(key: CryptoKey) {
    this.#key = key;
  }

  /** Derives the HMAC key from a secret (HKDF-SHA-256, its own info, so the secret may serve elsewhere too). */
  static async fromSecret(secret: string): Promise<RequestStateSealer> {
    const key = await deriveApprovalKey(secret, "request-state v1", { name: "HMAC", hash: "SHA-256", length: 256 }, ["sign", "verify"]);
    return new RequestStateSealer(key);
  }

  async seal(payload: RequestStatePayload): Promise<string> {
    const body = toBase64url(enc.encode(JSON.stringify(payload)));
    const mac = new Uint8Array(await crypto.subtle.sign("HMAC", this.#key, enc.encode(`a1.${body}`)));
    return `a1.${body}.${toBase64url(mac)}`;
  }

  /** Opens a state the gateway sealed, unexpired, bound to exactly these facts. */
  async open(state: string, facts: ApprovalFacts, now: number): Promise<{ ok: true; payload: RequestStatePayload } | { ok: false; why: StateFailure }> {
    const parts = state.split(".");
    if (parts.length !== 3 || parts[0] !== "a1") return { ok: false, why: "malformed" };
    const body = fromBase64url(parts[1]!);
    const mac = fromBase64url(parts[2]!);
    if (!body || !mac) return { ok: false, why: "malformed" };
    if (!(await crypto.subtle.verify("HMAC", this.#key, mac, enc.encode(`a1.${parts[1]}`)))) return { ok: false, why: "tampered" };
    let payload: RequestStatePayload;
    try {
      payload = JSON.parse(new TextDecoder().decode(body)) as RequestStatePayload;
    } catch {
      return { ok: false, why: "malformed" };
    }
    if (typeof payload.approvalId !== "string" || typeof payload.nonce !== "string" || typeof payload.facts !== "string" || typeof payload.expiresAt !== "number") return { ok: false, why: "malformed" };
    if (now >= payload.expiresAt) return { ok: false, why: "expired" };
    if (payload.facts !== (await factsDigest(facts))) return { ok: false, why: "wrong_facts" };
    return { ok: true, payload };
  }
}
