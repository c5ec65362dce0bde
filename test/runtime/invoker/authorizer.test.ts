/**
 * The one authorization seam: a backend's secrets read by name into a static header or an
 * authorizer, a SigV4 signature over exactly the body sent and at the clock of each send, and a
 * bearer token from the isolate's cache that a 401 drops.
 */
import { describe, expect, it } from "vitest";
import { signSigV4 } from "../../../src/invoker/auth/aws-sigv4.ts";
import { bearerTokenAuthorizer, sigV4Authorizer } from "../../../src/invoker/auth/authorizer.ts";
import { TokenCache, type TokenSource } from "../../../src/invoker/auth/token-cache.ts";
import { backendAuthorization } from "../../../src/invoker/backend-authorization.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import type { HttpBackend } from "../../../src/snapshot/normalize.ts";
import { FakeClock } from "../support/fixtures.ts";

const never = new AbortController().signal;
const AWS = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" };
const URL_ = "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse";

describe("sigV4Authorizer", () => {
  it("signs the exact body text as UTF-8, and a second send signs afresh at its own clock with no trace of the first signature", async () => {
    const clock = new FakeClock(Date.parse("2026-12-07T08:00:00Z"));
    const auth = sigV4Authorizer(AWS, "us-east-1", "bedrock", clock);
    const body = JSON.stringify({ messages: [{ role: "user", content: [{ text: "héllo ✓" }] }] });
    const headers = new Headers({ "content-type": "application/json", accept: "application/json", "user-agent": "sluice" });
    await auth.authorize({ url: URL_, headers, body }, never);
    const first = headers.get("authorization");
    expect(headers.get("x-amz-date")).toBe("20261207T080000Z");

    clock.advance(90_000);
    await auth.authorize({ url: URL_, headers, body }, never);
    expect(headers.get("x-amz-date")).toBe("20261207T080130Z");
    expect(headers.get("authorization")).not.toBe(first);
    // The same as signing a fresh request: the first signature's headers were not signed in, and user-agent is left out.
    const fresh = await signSigV4({ method: "POST", url: URL_, headers: { "content-type": "application/json", accept: "application/json" }, body: new TextEncoder().encode(body), credentials: AWS, region: "us-east-1", service: "bedrock", now: new Date(clock.now()) });
    expect(headers.get("authorization")).toBe(fresh.authorization);
    expect(fresh.authorization).toContain("SignedHeaders=accept;content-type;host;x-amz-date,");
  });

  it("adds the session token of temporary credentials, and signs it", async () => {
    const headers = new Headers({ "content-type": "application/json" });
    await sigV4Authorizer({ ...AWS, sessionToken: "session-xyz" }, "eu-west-1", "bedrock", new FakeClock()).authorize({ url: URL_, headers, body: "{}" }, never);
    expect(headers.get("x-amz-security-token")).toBe("session-xyz");
    expect(headers.get("authorization")).toMatch(/Credential=AKIDEXAMPLE\/\d{8}\/eu-west-1\/bedrock\/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token,/);
  });
});

describe("bearerTokenAuthorizer", () => {
  it("takes the cached token for every request, and after a 401 mints anew", async () => {
    const clock = new FakeClock();
    let mints = 0;
    const source: TokenSource = { key: "k", mint: async () => ({ token: `t${++mints}`, expiresAt: clock.now() + 3_600_000 }) };
    const tokens = new TokenCache({ clock });
    const requests = Array.from({ length: 5 }, () => ({ url: "https://x.example/", headers: new Headers(), body: "{}" }));
    const auths = requests.map(() => bearerTokenAuthorizer(source, tokens));
    await Promise.all(auths.map((a, i) => a.authorize(requests[i]!, never)));
    expect(mints).toBe(1);
    expect(requests.map((r) => r.headers.get("authorization"))).toEqual(Array(5).fill("Bearer t1"));
    auths[0]!.refused!();
    const next = { url: "https://x.example/", headers: new Headers(), body: "{}" };
    await bearerTokenAuthorizer(source, tokens).authorize(next, never);
    expect(next.headers.get("authorization")).toBe("Bearer t2");
    // A late 401 of a request that carried the old token does not drop the new one.
    auths[1]!.refused!();
    const after = { url: "https://x.example/", headers: new Headers(), body: "{}" };
    await bearerTokenAuthorizer(source, tokens).authorize(after, never);
    expect(after.headers.get("authorization")).toBe("Bearer t2");
    expect(mints).toBe(2);
  });
});

describe("backendAuthorization", () => {
  const base = { id: "be_x", name: "x", baseUrl: "https://x.example", headers: {}, capabilities: [], responseHeaders: [] } as unknown as HttpBackend;
  const deps = (secrets: Record<string, string>) => ({ credentials: { get: (n: string) => secrets[n] }, fetch, clock: new FakeClock() });
  const codec = (id: "openai-chat" | "anthropic-messages" | "azure-openai" | "bedrock-converse") => builtinCodecs.backend(id)!;

  it("sends a static secret as its scheme says", () => {
    const cases = [
      ["bearer", "authorization", "Bearer s3cret"],
      ["x-api-key", "x-api-key", "s3cret"],
      ["api-key", "api-key", "s3cret"],
    ] as const;
    for (const [scheme, header, value] of cases) {
      const a = backendAuthorization(deps({ KEY: "s3cret" }), { ...base, protocol: "openai-chat", credential: { secret: "KEY", scheme } } as HttpBackend, codec("openai-chat"));
      expect(a).toEqual({ ok: true, headers: { [header]: value } });
    }
    expect(backendAuthorization(deps({}), { ...base, protocol: "openai-chat" } as HttpBackend, codec("openai-chat"))).toEqual({ ok: true, headers: {} });
  });

  it("names the secret that is not set, never a value", () => {
    const entra = { kind: "entra", tenantId: "t", clientId: "c", secret: "AZ_SECRET", scope: "s" } as const;
    expect(backendAuthorization(deps({}), { ...base, protocol: "azure-openai", credential: entra } as unknown as HttpBackend, codec("azure-openai"))).toEqual({ ok: false, missing: "AZ_SECRET" });
    const aws = { ...base, protocol: "bedrock-converse", region: "us-east-1", awsCredential: { accessKeyId: "AK", secretAccessKey: "SK", sessionToken: "ST" } } as unknown as HttpBackend;
    expect(backendAuthorization(deps({ AK: "id" }), aws, codec("bedrock-converse"))).toEqual({ ok: false, missing: "SK" });
    expect(backendAuthorization(deps({ AK: "id", SK: "secret" }), aws, codec("bedrock-converse"))).toEqual({ ok: false, missing: "ST" });
    const ok = backendAuthorization(deps({ AK: "id", SK: "secret", ST: "tok" }), aws, codec("bedrock-converse"));
    expect(ok.ok && ok.headers).toEqual({});
    expect(ok.ok && typeof ok.authorizer?.authorize).toBe("function");
  });
});
