/**
 * Console sessions: a browser cannot send the admin bearer header, so the console trades a token
 * typed into its login form for a cookie. The cookie never holds the token: it holds the role, an
 * expiry and a nonce, MACed with a key derived from the admin token and bound to a digest of the
 * role's own token, so rotating either token ends every session it opened.
 */

import { toBase64url } from "../digest/base64url.ts";

/** Who signed in: the admin (everything) or an approver (the approvals inbox only). */
export type ConsoleRole = "admin" | "approver";

/** A verified session. */
export interface ConsoleSession {
  readonly role: ConsoleRole;
  readonly expiresAt: number;
  /** The per-session token every state-changing form carries. */
  readonly csrf: string;
}

/** The cookie's name; its Path is the console's, so no other admin URL ever receives it. */
export const SESSION_COOKIE = "sluice_console";
/** How long a session lasts after login. */
export const SESSION_TTL_MS = 8 * 60 * 60 * 1000;

const enc = new TextEncoder();


async function hmac(keyMaterial: string, data: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", enc.encode(keyMaterial), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return toBase64url(await crypto.subtle.sign("HMAC", key, enc.encode(data)));
}

async function sha256(text: string): Promise<string> {
  return toBase64url(await crypto.subtle.digest("SHA-256", enc.encode(text)));
}

/** Equal strings, compared over their digests so timing reveals no matching prefix. */
export async function constantTimeEqual(a: string, b: string): Promise<boolean> {
  const [x, y] = await Promise.all([sha256(a), sha256(b)]);
  let diff = x.length ^ y.length;
  for (let i = 0; i < Math.min(x.length, y.length); i++) diff |= x.charCodeAt(i) ^ y.charCodeAt(i);
  return diff === 0;
}

/** The tokens that may sign in; an approver token is absent when none is configured. */
export interface ConsoleCredentials {
  readonly adminToken: string;
  readonly approverToken: string | undefined;
}

/** The role a presented token signs in as, or undefined when it matches neither token. */
export async function roleOfToken(presented: string, creds: ConsoleCredentials): Promise<ConsoleRole | undefined> {
  if (presented === "") return undefined;
  if (await constantTimeEqual(presented, creds.adminToken)) return "admin";
  if (creds.approverToken !== undefined && creds.approverToken !== "" && (await constantTimeEqual(presented, creds.approverToken))) return "approver";
  return undefined;
}

function tokenOf(role: ConsoleRole, creds: ConsoleCredentials): string | undefined {
  return role === "admin" ? creds.adminToken : creds.approverToken;
}

// The key is derived from the admin token, not random per isolate, so a session survives a restart
// and works on every isolate behind the admin listener.
async function mac(creds: ConsoleCredentials, role: ConsoleRole, payload: string): Promise<string | undefined> {
  const roleToken = tokenOf(role, creds);
  if (roleToken === undefined || roleToken === "") return undefined;
  const key = await hmac(creds.adminToken, "sluice console session key v1");
  return await hmac(key, `${payload}.${await sha256(roleToken)}`);
}

async function csrfOf(creds: ConsoleCredentials, cookie: string): Promise<string> {
  return await hmac(await hmac(creds.adminToken, "sluice console csrf key v1"), cookie);
}

/** A new session cookie value for `role`, valid until `now + SESSION_TTL_MS`. */
export async function mintSession(role: ConsoleRole, creds: ConsoleCredentials, now: number): Promise<string> {
  const nonce = toBase64url(crypto.getRandomValues(new Uint8Array(16)));
  const payload = `${role}.${now + SESSION_TTL_MS}.${nonce}`;
  const m = await mac(creds, role, payload);
  if (m === undefined) throw new Error(`no ${role} token is configured`);
  return `${payload}.${m}`;
}

/** The session a cookie value proves, or undefined when it is malformed, forged or expired. */
export async function verifySession(cookie: string | undefined, creds: ConsoleCredentials, now: number): Promise<ConsoleSession | undefined> {
  if (cookie === undefined) return undefined;
  const m = /^(admin|approver)\.(\d{1,16})\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/.exec(cookie);
  if (!m) return undefined;
  const role = m[1] as ConsoleRole;
  const expiresAt = Number(m[2]);
  const expected = await mac(creds, role, `${role}.${m[2]}.${m[3]}`);
  if (expected === undefined || !(await constantTimeEqual(m[4]!, expected))) return undefined;
  if (expiresAt <= now) return undefined;
  return { role, expiresAt, csrf: await csrfOf(creds, cookie) };
}

/** The session cookie's value in a Cookie header, or undefined. */
export function sessionCookieOf(header: string | undefined): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const i = part.indexOf("=");
    if (i > 0 && part.slice(0, i).trim() === SESSION_COOKIE) return part.slice(i + 1).trim();
  }
  return undefined;
}

/** `Set-Cookie` for a session (or, with an empty value and no age, its removal). */
export function sessionCookieHeader(value: string, secure: boolean, maxAgeSeconds: number): string {
  return `${SESSION_COOKIE}=${value}; Path=/admin/console; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}${secure ? "; Secure" : ""}`;
}

/**
 * Whether a state-changing request comes from the console's own pages: the browser's Origin must be
 * ours, or, without one, Fetch Metadata must say same-origin. A request with neither is refused.
 */
export function sameOrigin(headers: { get(name: string): string | null }, ownOrigin: string): boolean {
  const site = headers.get("sec-fetch-site");
  if (site !== null && site !== "same-origin") return false;
  const origin = headers.get("origin");
  // `null` is what a browser sends when it will not say (a privacy-sensitive context): then only
  // Fetch Metadata can vouch for the request.
  if (origin !== null && origin !== "null") return origin === ownOrigin;
  return site === "same-origin";
}
