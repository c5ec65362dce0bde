/**
 * The console's session cookie, CSRF token, origin check and HTML escaping, without a browser
 * (the browser tests in test/browser drive the same code through Chromium).
 */
import { describe, expect, it } from "vitest";
import { escapeHtml, html, table } from "../../../src/http/console-html.ts";
import { money } from "../../../src/http/console-pages.ts";
import { mintSession, roleOfToken, sameOrigin, SESSION_TTL_MS, sessionCookieHeader, sessionCookieOf, verifySession } from "../../../src/http/console-session.ts";

const creds = { adminToken: "admin-token-0123456789", approverToken: "approver-token-0123456789" };
const NOW = 1_800_000_000_000;

describe("console sessions", () => {
  it("signs in by role and refuses any other token", async () => {
    expect(await roleOfToken(creds.adminToken, creds)).toBe("admin");
    expect(await roleOfToken(creds.approverToken, creds)).toBe("approver");
    expect(await roleOfToken("admin-token-012345678", creds)).toBeUndefined();
    expect(await roleOfToken("", creds)).toBeUndefined();
    // Without an approver token configured, nothing signs in as an approver (an empty one neither).
    expect(await roleOfToken("", { adminToken: creds.adminToken, approverToken: "" })).toBeUndefined();
    expect(await roleOfToken(creds.approverToken, { adminToken: creds.adminToken, approverToken: undefined })).toBeUndefined();
  });

  it("verifies its own cookie until it expires, and nothing the cookie holds is the token", async () => {
    const cookie = await mintSession("admin", creds, NOW);
    expect(cookie).not.toContain(creds.adminToken);
    const s = await verifySession(cookie, creds, NOW + 1000);
    expect(s).toMatchObject({ role: "admin", expiresAt: NOW + SESSION_TTL_MS });
    expect(s!.csrf).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await verifySession(cookie, creds, NOW + SESSION_TTL_MS)).toBeUndefined();
    // Two sessions have two CSRF tokens.
    const other = await verifySession(await mintSession("admin", creds, NOW), creds, NOW);
    expect(other!.csrf).not.toBe(s!.csrf);
  });

  it("refuses a tampered cookie: another role, a later expiry, another MAC, or junk", async () => {
    const cookie = await mintSession("approver", creds, NOW);
    const [role, exp, nonce, mac] = cookie.split(".");
    expect(role).toBe("approver");
    expect(await verifySession(["admin", exp, nonce, mac].join("."), creds, NOW)).toBeUndefined();
    expect(await verifySession([role, String(Number(exp) + 1), nonce, mac].join("."), creds, NOW)).toBeUndefined();
    expect(await verifySession([role, exp, nonce, mac!.replace(/^./, (c) => (c === "A" ? "B" : "A"))].join("."), creds, NOW)).toBeUndefined();
    for (const junk of [undefined, "", "admin", `${cookie}.x`, cookie.replace(".", "..")]) expect(await verifySession(junk, creds, NOW)).toBeUndefined();
  });

  it("ends sessions when a token rotates: the admin token ends all, the approver token the approvers'", async () => {
    const admin = await mintSession("admin", creds, NOW);
    const approver = await mintSession("approver", creds, NOW);
    const newApprover = { ...creds, approverToken: "approver-token-rotated-000" };
    expect(await verifySession(admin, newApprover, NOW)).toBeDefined();
    expect(await verifySession(approver, newApprover, NOW)).toBeUndefined();
    expect(await verifySession(approver, { ...creds, approverToken: undefined }, NOW)).toBeUndefined();
    const newAdmin = { ...creds, adminToken: "admin-token-rotated-00000" };
    expect(await verifySession(admin, newAdmin, NOW)).toBeUndefined();
    expect(await verifySession(approver, newAdmin, NOW)).toBeUndefined();
  });

  it("sets a cookie only the console's path receives, HttpOnly and SameSite=Strict, Secure over https", () => {
    expect(sessionCookieHeader("v", false, 60)).toBe("sluice_console=v; Path=/admin/console; HttpOnly; SameSite=Strict; Max-Age=60");
    expect(sessionCookieHeader("v", true, 60)).toMatch(/; Secure$/);
    expect(sessionCookieOf("a=1; sluice_console=abc.def ; b=2")).toBe("abc.def");
    expect(sessionCookieOf("sluice_console_x=1")).toBeUndefined();
    expect(sessionCookieOf(undefined)).toBeUndefined();
  });

  it("accepts a state-changing request only from its own origin", () => {
    const own = "http://127.0.0.1:8788";
    const h = (o: Record<string, string>) => new Headers(o);
    expect(sameOrigin(h({ origin: own }), own)).toBe(true);
    expect(sameOrigin(h({ origin: own, "sec-fetch-site": "same-origin" }), own)).toBe(true);
    expect(sameOrigin(h({ origin: "http://127.0.0.1:9999" }), own)).toBe(false);
    // Same site (another port) is not same origin.
    expect(sameOrigin(h({ origin: own, "sec-fetch-site": "same-site" }), own)).toBe(false);
    expect(sameOrigin(h({ origin: "null", "sec-fetch-site": "same-origin" }), own)).toBe(true);
    expect(sameOrigin(h({ origin: "null" }), own)).toBe(false);
    expect(sameOrigin(h({ "sec-fetch-site": "cross-site" }), own)).toBe(false);
    expect(sameOrigin(h({}), own)).toBe(false);
  });
});

describe("console HTML", () => {
  it("escapes every interpolated value and leaves its own markup alone", () => {
    const evil = `<script>alert("x")</script>' onload='x' \``;
    expect(escapeHtml(evil)).toBe("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39; onload=&#39;x&#39; &#96;");
    expect(html`<td title="${evil}">${evil}</td>`.text).toBe(`<td title="${escapeHtml(evil)}">${escapeHtml(evil)}</td>`);
    expect(html`<p>${html`<b>${evil}</b>`}</p>`.text).toBe(`<p><b>${escapeHtml(evil)}</b></p>`);
    expect(html`${[1, "<", null, undefined, false]}`.text).toBe("1&lt;");
    // A plain object shaped like markup is not markup.
    expect(table(["h"], [[{ text: "<i>" } as unknown as string]]).text).toContain("[object Object]");
    expect(table(["h"], [], "none <here>").text).toBe('<p class="empty">none &lt;here&gt;</p>');
  });

  it("renders money in its currency", () => {
    expect(money(1_500_000, "USD")).toBe("$1.50");
    expect(money(undefined, "USD")).toBe("—");
  });
});
