/**
 * The per-isolate token cache and the Entra ID client-credentials source: a token is reused until
 * a margin before it expires, concurrent callers share one mint, a failed mint is held briefly
 * and never hides a still-valid token, and neither the client secret nor a token reaches an error.
 */
import { describe, expect, it } from "vitest";
import { entraTokenSource } from "../../../src/invoker/auth/entra.ts";
import { TokenCache, type TokenSource } from "../../../src/invoker/auth/token-cache.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { FakeClock } from "../support/fixtures.ts";

const SECRET = "entra-client-secret-9f3a";
const never = new AbortController().signal;

/** A source whose mints the test resolves one by one. */
function manualSource(key = "k") {
  const pending: { resolve: (t: { token: string; expiresAt: number }) => void; reject: (e: unknown) => void }[] = [];
  const source: TokenSource = {
    key,
    mint: () => new Promise((resolve, reject) => pending.push({ resolve, reject })),
  };
  return { source, pending };
}

/** Lets queued promise callbacks run. */
const settle = () => new Promise((r) => setTimeout(r, 0));

describe("TokenCache", () => {
  it("mints once for concurrent callers and hands each the same token", async () => {
    const clock = new FakeClock();
    const cache = new TokenCache({ clock });
    const { source, pending } = manualSource();
    const callers = Array.from({ length: 20 }, () => cache.token(source, never));
    await settle();
    expect(pending).toHaveLength(1);
    pending[0]!.resolve({ token: "t1", expiresAt: clock.now() + 3_600_000 });
    expect(await Promise.all(callers)).toEqual(Array(20).fill("t1"));
    expect(cache.stats()).toEqual({ minted: 1, failed: 0 });
    // Cached: no mint.
    expect(await cache.token(source, never)).toBe("t1");
    expect(pending).toHaveLength(1);
  });

  it("replaces a token a margin before it expires, never handing out an expired one", async () => {
    const clock = new FakeClock();
    const cache = new TokenCache({ clock, refreshMarginMs: 300_000 });
    let n = 0;
    const source: TokenSource = { key: "k", mint: async () => ({ token: `t${++n}`, expiresAt: clock.now() + 3_600_000 }) };
    expect(await cache.token(source, never)).toBe("t1");
    clock.advance(3_600_000 - 300_001);
    expect(await cache.token(source, never)).toBe("t1");
    clock.advance(2);
    // Inside the margin: a new token before the old one expires.
    expect(await cache.token(source, never)).toBe("t2");
    // A short-lived token: the margin is at most half its life.
    const short: TokenSource = { key: "short", mint: async () => ({ token: `s${++n}`, expiresAt: clock.now() + 10_000 }) };
    const first = await cache.token(short, never);
    clock.advance(4_000);
    expect(await cache.token(short, never)).toBe(first);
    clock.advance(1_001);
    expect(await cache.token(short, never)).not.toBe(first);
  });

  it("keeps credentials apart by key", async () => {
    const clock = new FakeClock();
    const cache = new TokenCache({ clock });
    const a: TokenSource = { key: "a", mint: async () => ({ token: "ta", expiresAt: clock.now() + 60_000 }) };
    const b: TokenSource = { key: "b", mint: async () => ({ token: "tb", expiresAt: clock.now() + 60_000 }) };
    expect([await cache.token(a, never), await cache.token(b, never)]).toEqual(["ta", "tb"]);
  });

  it("fails every waiting caller with the mint's error, holds the failure briefly, then asks again", async () => {
    const clock = new FakeClock();
    const cache = new TokenCache({ clock, failureHoldMs: 1_000 });
    let calls = 0;
    const down = new GatewayError("upstream_unreachable", "The model provider's token service could not be reached.");
    const source: TokenSource = { key: "k", mint: async () => (calls++, Promise.reject(down)) };
    const results = await Promise.allSettled([cache.token(source, never), cache.token(source, never)]);
    expect(results.map((r) => r.status === "rejected" && r.reason)).toEqual([down, down]);
    expect(calls).toBe(1);
    await expect(cache.token(source, never)).rejects.toBe(down);
    expect(calls).toBe(1);
    clock.advance(1_000);
    await expect(cache.token(source, never)).rejects.toBe(down);
    expect(calls).toBe(2);
    expect(cache.stats()).toEqual({ minted: 0, failed: 2 });
  });

  it("uses a still-valid token while its replacement cannot be minted", async () => {
    const clock = new FakeClock();
    const cache = new TokenCache({ clock, refreshMarginMs: 60_000 });
    let up = true;
    const source: TokenSource = { key: "k", mint: async () => (up ? { token: "t1", expiresAt: clock.now() + 600_000 } : Promise.reject(new GatewayError("upstream_unreachable", "down"))) };
    expect(await cache.token(source, never)).toBe("t1");
    up = false;
    clock.advance(560_000);
    expect(await cache.token(source, never)).toBe("t1");
    clock.advance(40_000);
    await expect(cache.token(source, never)).rejects.toBeInstanceOf(GatewayError);
  });

  it("stops one caller's wait on its signal without failing the shared mint", async () => {
    const clock = new FakeClock();
    const cache = new TokenCache({ clock });
    const { source, pending } = manualSource();
    const stop = new AbortController();
    const leaving = cache.token(source, stop.signal);
    const staying = cache.token(source, never);
    stop.abort(new Error("client left"));
    await expect(leaving).rejects.toThrow("client left");
    pending[0]!.resolve({ token: "t1", expiresAt: clock.now() + 60_000 });
    expect(await staying).toBe("t1");
  });
});

describe("entraTokenSource", () => {
  const credential = { tenantId: "contoso.onmicrosoft.com", clientId: "app-1", scope: "https://cognitiveservices.azure.com/.default" };

  it("posts the client credentials grant to the tenant's endpoint and reads the token and its lifetime", async () => {
    const clock = new FakeClock();
    const seen: { url: string; init: RequestInit }[] = [];
    const fetch = (async (url: string, init: RequestInit) => {
      seen.push({ url, init });
      return Response.json({ token_type: "Bearer", expires_in: 3599, ext_expires_in: 3599, access_token: "minted-token-1" });
    }) as unknown as typeof globalThis.fetch;
    const source = entraTokenSource(credential, SECRET, { fetch, clock });
    expect(await source.mint(never)).toEqual({ token: "minted-token-1", expiresAt: clock.now() + 3_599_000 });
    expect(seen[0]!.url).toBe("https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token");
    expect(seen[0]!.init).toMatchObject({ method: "POST", redirect: "manual" });
    expect(Object.fromEntries(new URLSearchParams(String(seen[0]!.init.body)))).toEqual({ grant_type: "client_credentials", client_id: "app-1", client_secret: SECRET, scope: credential.scope });
    // The key names the application, never the secret.
    expect(source.key).toContain("app-1");
    expect(source.key).not.toContain(SECRET);
    expect(entraTokenSource(credential, "another-secret", { fetch, clock }).key).not.toBe(source.key);
  });

  it("turns a refusal, an outage, an unreachable endpoint and an egress refusal into errors that name no secret", async () => {
    const clock = new FakeClock();
    const answer = (status: number, body: unknown) => (async () => Response.json(body, { status })) as unknown as typeof globalThis.fetch;
    const cases: [typeof globalThis.fetch, string, { readonly allow: readonly string[] } | undefined, string?][] = [
      [answer(401, { error: "invalid_client", error_description: `AADSTS7000215: Invalid client secret provided: ${SECRET}` }), "upstream_auth_failed", undefined],
      [answer(503, { error: "temporarily_unavailable" }), "upstream_unreachable", undefined],
      [answer(200, { token_type: "Bearer" }), "upstream_protocol_error", undefined],
      [(async () => Promise.reject(new TypeError(`connect failed ${SECRET}`))) as unknown as typeof globalThis.fetch, "upstream_unreachable", undefined],
      // A token endpoint on a private address the allowlist does not name.
      [answer(200, { access_token: "x", expires_in: 60 }), "internal_error", { allow: ["127.0.0.1"] }, "http://10.0.0.7/token"],
    ];
    for (const [fetch, code, egress, tokenUrl] of cases) {
      const err = await entraTokenSource({ ...credential, tokenUrl }, SECRET, { fetch, clock, egress }).mint(never).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(GatewayError);
      expect((err as GatewayError).code).toBe(code);
      expect(JSON.stringify({ message: (err as GatewayError).message, cause: (err as GatewayError).cause })).not.toContain(SECRET);
    }
  });
});
