/**
 * Google service-account tokens: the JWT assertion's claims and RS256 signature (checked with jose
 * against the key pair's public half), the JWT-bearer exchange, and each failure's error — none of
 * which carries the key, the assertion or the token.
 */
import { exportPKCS8, generateKeyPair, jwtVerify, decodeProtectedHeader } from "jose";
import { beforeAll, describe, expect, it } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { CLOUD_PLATFORM_SCOPE, googleServiceAccountTokenSource } from "../../../src/invoker/auth/google-service-account.ts";

const TOKEN_URI = "http://127.0.0.1:9/token";
let keys: Awaited<ReturnType<typeof generateKeyPair>>;
let pem: string;
beforeAll(async () => {
  keys = await generateKeyPair("RS256", { extractable: true });
  pem = await exportPKCS8(keys.privateKey);
});

const account = (over: Record<string, unknown> = {}) =>
  JSON.stringify({ type: "service_account", project_id: "p", private_key_id: "kid-1", private_key: pem, client_email: "gw@p.iam.gserviceaccount.com", token_uri: "https://oauth2.googleapis.com/token", ...over });

interface Seen {
  url: string;
  init: RequestInit;
}
function fakeFetch(answer: () => Response, seen: Seen[]): typeof fetch {
  return (async (url: string | URL | Request, init?: RequestInit) => {
    seen.push({ url: String(url), init: init ?? {} });
    return answer();
  }) as typeof fetch;
}
const clock = { now: () => 1_800_000_000_000 };
const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

async function failure(p: Promise<unknown>): Promise<GatewayError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof GatewayError) return err;
    throw err;
  }
  throw new Error("expected a GatewayError");
}

describe("google service-account tokens", () => {
  it("signs an RS256 assertion with the account's claims and exchanges it with the JWT-bearer grant", async () => {
    const seen: Seen[] = [];
    const source = googleServiceAccountTokenSource({ credentials: account(), tokenUri: TOKEN_URI, fetch: fakeFetch(() => json({ access_token: "ya29.token", expires_in: 3599, token_type: "Bearer" }), seen), clock });
    const minted = await source.mint(new AbortController().signal);
    expect(minted).toEqual({ token: "ya29.token", expiresAt: clock.now() + 3599 * 1000 });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.url).toBe(TOKEN_URI);
    expect(seen[0]!.init.method).toBe("POST");
    expect(new Headers(seen[0]!.init.headers).get("content-type")).toBe("application/x-www-form-urlencoded");
    const form = new URLSearchParams(String(seen[0]!.init.body));
    expect(form.get("grant_type")).toBe("urn:ietf:params:oauth:grant-type:jwt-bearer");
    const assertion = form.get("assertion")!;
    expect(decodeProtectedHeader(assertion)).toEqual({ alg: "RS256", typ: "JWT", kid: "kid-1" });
    const { payload } = await jwtVerify(assertion, keys.publicKey, {
      issuer: "gw@p.iam.gserviceaccount.com",
      audience: TOKEN_URI,
      algorithms: ["RS256"],
      currentDate: new Date(clock.now()),
    });
    expect(payload).toEqual({ scope: CLOUD_PLATFORM_SCOPE, iss: "gw@p.iam.gserviceaccount.com", aud: TOKEN_URI, iat: clock.now() / 1000, exp: clock.now() / 1000 + 3600 });
    // The key names the account and where its token comes from, never a secret.
    expect(source.key).toBe(`google-service-account:gw@p.iam.gserviceaccount.com:kid-1:${CLOUD_PLATFORM_SCOPE}:${TOKEN_URI}`);
    expect(source.key).not.toContain("PRIVATE");
  });

  it("uses the key file's token_uri unless overridden, and a signature another key made does not verify", async () => {
    const seen: Seen[] = [];
    const source = googleServiceAccountTokenSource({ credentials: account({ token_uri: "http://127.0.0.1:9/custom" }), fetch: fakeFetch(() => json({ access_token: "t", expires_in: 60 }), seen), clock });
    await source.mint(new AbortController().signal);
    expect(seen[0]!.url).toBe("http://127.0.0.1:9/custom");
    const assertion = new URLSearchParams(String(seen[0]!.init.body)).get("assertion")!;
    const other = await generateKeyPair("RS256");
    await expect(jwtVerify(assertion, other.publicKey, { currentDate: new Date(clock.now()) })).rejects.toThrow();
  });

  it("fails with an error that names the field, never the key, for an unreadable key file", async () => {
    const never = fakeFetch(() => {
      throw new Error("must not be called");
    }, []);
    for (const [credentials, field] of [
      ["not json", "the key file"],
      [account({ type: "authorized_user" }), "type"],
      [account({ client_email: undefined }), "client_email"],
    ] as const) {
      const err = await failure(googleServiceAccountTokenSource({ credentials, fetch: never, clock }).mint(new AbortController().signal));
      expect(err.code).toBe("internal_error");
      expect(JSON.stringify(err.cause)).toContain(field);
    }
    const bad = await failure(googleServiceAccountTokenSource({ credentials: account({ private_key: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n" }), fetch: never, clock }).mint(new AbortController().signal));
    expect(bad.code).toBe("internal_error");
    expect(JSON.stringify(bad.cause)).not.toContain("AAAA");
  });

  it("refuses a token URI the egress guard refuses, before signing or sending anything", async () => {
    const seen: Seen[] = [];
    // A loopback token URI nobody allowlisted (the simulator's, in a deployment that forgot it).
    const source = googleServiceAccountTokenSource({ credentials: account({ token_uri: "http://127.0.0.1:8787/token" }), fetch: fakeFetch(() => json({}), seen), clock, egress: { allow: [] } });
    const err = await failure(source.mint(new AbortController().signal));
    expect(err.code).toBe("internal_error");
    expect(String(err.cause)).toContain("egress refused");
    expect(seen).toHaveLength(0);
  });

  it("reports a refusal by OAuth error code only, an unreadable answer and an unreachable endpoint", async () => {
    const refused = await failure(
      googleServiceAccountTokenSource({ credentials: account(), tokenUri: TOKEN_URI, fetch: fakeFetch(() => json({ error: "invalid_grant", error_description: "Invalid JWT Signature: secret-ish" }, 400), []), clock }).mint(new AbortController().signal),
    );
    expect(refused.code).toBe("upstream_auth_failed");
    expect(refused.cause).toEqual({ tokenEndpoint: TOKEN_URI, status: 400, error: "invalid_grant" });
    // A token endpoint that is down is unavailable, not a refusal of the credential.
    const unavailable = await failure(googleServiceAccountTokenSource({ credentials: account(), tokenUri: TOKEN_URI, fetch: fakeFetch(() => json({ error: "internal_failure" }, 503), []), clock }).mint(new AbortController().signal));
    expect(unavailable.code).toBe("upstream_unreachable");
    expect(unavailable.cause).toEqual({ tokenEndpoint: TOKEN_URI, status: 503, error: "internal_failure" });
    const unreadable = await failure(googleServiceAccountTokenSource({ credentials: account(), tokenUri: TOKEN_URI, fetch: fakeFetch(() => json({ access_token: "t" }), []), clock }).mint(new AbortController().signal));
    expect(unreadable.code).toBe("upstream_protocol_error");
    const down = googleServiceAccountTokenSource({
      credentials: account(),
      tokenUri: TOKEN_URI,
      fetch: (async () => {
        throw new TypeError("connection refused");
      }) as typeof fetch,
      clock,
    });
    expect((await failure(down.mint(new AbortController().signal))).code).toBe("upstream_unreachable");
  });
});
