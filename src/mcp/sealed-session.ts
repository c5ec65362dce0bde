/**
 * Stateful-era MCP sessions without a session store: the session id the gateway hands a client
 * *is* the session's state, sealed (AES-256-GCM) under a key derived from a secret. Any isolate
 * or replica holding the secret opens it and serves the next request; nothing is shared, and a
 * restart loses nothing. The id is bound to the principal that opened it (another caller
 * presenting it is refused, as if it did not exist) and expires.
 *
 * Keys rotate: the first key seals, every listed key opens, and each sealed id names the key it
 * was sealed with (a short fingerprint), so an old key can be retired once its ids expired.
 *
 * The id is `s1.<key id>.<iv>.<ciphertext>` in base64url: visible ASCII only, as the
 * specification requires of `Mcp-Session-Id` (0x21–0x7E).
 */

import { toBase64url } from "../digest/base64url.ts";
import { openJson, sealJson } from "../digest/sealed-json.ts";

/** What a session carries between requests. */
export interface SessionState {
  /** The principal the session belongs to (tenant and key id, or a token's subject). */
  readonly principal: string;
  /** The protocol version negotiated with the client. */
  readonly protocolVersion: string;
  readonly clientCapabilities: Readonly<Record<string, unknown>>;
  /** Upstream session ids the gateway holds, by server name. */
  readonly upstream: Readonly<Record<string, string>>;
  /** Epoch ms after which the id is refused. */
  readonly expiresAt: number;
}

/** Why an id was refused; the client re-initializes in every case (it gets 404). */
export type OpenFailure = "malformed" | "unknown_key" | "tampered" | "expired" | "other_principal";

const VERSION = "s1";
const encoder = new TextEncoder();


interface SealKey {
  readonly id: string;
  readonly key: CryptoKey;
}

/** Seals and opens session ids with keys derived from secrets. */
export class SessionSealer {
  readonly #keys: readonly SealKey[];

  private constructor(keys: readonly SealKey[]) {
    this.#keys = keys;
  }

  /**
   * Derives the keys (HKDF-SHA-256 from each secret, so any secret of enough entropy will do);
   * the first seals. Secrets shorter than 32 bytes are refused: a session id is a bearer
   * credential for the session.
   */
  static async fromSecrets(secrets: readonly string[]): Promise<SessionSealer> {
    if (secrets.length === 0) throw new RangeError("at least one session secret is needed");
    const keys: SealKey[] = [];
    for (const secret of secrets) {
      const raw = encoder.encode(secret);
      if (raw.length < 32) throw new RangeError("a session secret must be at least 32 bytes");
      const base = await crypto.subtle.importKey("raw", raw, "HKDF", false, ["deriveKey", "deriveBits"]);
      const info = encoder.encode("sluice mcp session v1");
      const key = await crypto.subtle.deriveKey({ name: "HKDF", hash: "SHA-256", salt: new Uint8Array(0), info }, base, { name: "AES-GCM", length: 256 }, false, ["encrypt", "decrypt"]);
      const fp = new Uint8Array(await crypto.subtle.deriveBits({ name: "HKDF", hash: "SHA-256", salt: new Uint8Array(0), info: encoder.encode("sluice mcp session key id") }, base, 48));
      keys.push({ id: toBase64url(fp), key });
    }
    return new SessionSealer(keys);
  }

  /** A session id carrying `state`, sealed with the current key. */
  async seal(state: SessionState): Promise<string> {
    const k = this.#keys[0]!;
    // The version and key id are authenticated too: an id cannot be moved to another key or format.
    return `${VERSION}.${k.id}.${await sealJson(k.key, `${VERSION}.${k.id}`, state)}`;
  }

  /** The state of a session id presented by `principal` at `now`, or why it is refused. */
  async open(id: string, principal: string, now: number): Promise<{ readonly ok: true; readonly state: SessionState } | { readonly ok: false; readonly reason: OpenFailure }> {
    const parts = id.length <= 8192 ? id.split(".") : [];
    if (parts.length !== 4 || parts[0] !== VERSION) return { ok: false, reason: "malformed" };
    const k = this.#keys.find((x) => x.id === parts[1]);
    if (!k) return { ok: false, reason: "unknown_key" };
    const opened = await openJson<SessionState>(k.key, `${VERSION}.${k.id}`, parts[2]!, parts[3]!);
    if (!opened.ok) return { ok: false, reason: opened.why };
    const state = opened.value;
    if (!(now < state.expiresAt)) return { ok: false, reason: "expired" };
    if (state.principal !== principal) return { ok: false, reason: "other_principal" };
    return { ok: true, state };
  }
}
