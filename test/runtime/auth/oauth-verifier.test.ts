import { exportJWK, generateKeyPair, SignJWT, UnsecuredJWT, type CryptoKey, type JWK } from "jose";
import { beforeAll, describe, expect, it } from "vitest";
import { authenticateCaller, type PresentedCredentials } from "../../../src/auth/authenticator-chain.ts";
import { systemClock } from "../../../src/deps/clock.ts";
import { OAuthVerifier, protectedResourceMetadataUrl } from "../../../src/auth/oauth-verifier.ts";
import { oauthConfigSchema } from "../../../src/config/oauth-schema.ts";
import { sha256Hex } from "../../../src/digest/canonical-digest.ts";
import { renderBearerChallenge } from "../../../src/errors/bearer-challenge.ts";
import type { GatewayError } from "../../../src/errors/gateway-error.ts";
import { publicationSchema } from "../../../src/config/publication-schema.ts";
import { compilePublication, type CompiledPublication } from "../../../src/publication/compile-publication.ts";
import { bundled } from "../support/fixtures.ts";

const RESOURCE = "https://gateway.example.com/mcp";
const ISSUER = "https://login.example.com/";
const JWKS_URL = "https://login.example.com/jwks.json";
const T0 = Date.UTC(2026, 11, 1, 12, 0, 0);

interface Key {
  readonly kid: string;
  readonly privateKey: CryptoKey;
  readonly jwk: JWK;
}
async function key(kid: string, alg: "RS256" | "ES256" = "RS256"): Promise<Key> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: "sig" } };
}

/** The tenants the verifier knows, with their teams and projects (as chargeTargetsOf builds them). */
const TENANTS: ReadonlyMap<string, ReadonlySet<string>> = new Map([
  ["acme", new Set(["research", "research/search", "research/infra"])],
  ["globex", new Set(["ops", "ops/billing"])],
]);

/** A JWKS endpoint in a function: what it publishes can change, and every fetch is recorded. */
function jwksServer(keys: Key[]) {
  const state = { published: keys, calls: [] as { url: string; init: RequestInit | undefined }[], answer: undefined as Response | undefined };
  const fetcher = (async (input: RequestInfo | URL, init?: RequestInit) => {
    state.calls.push({ url: String(input), init });
    return state.answer ?? new Response(JSON.stringify({ keys: state.published.map((k) => k.jwk) }), { headers: { "content-type": "application/json" } });
  }) as typeof fetch;
  return { state, fetcher };
}

function setup(keys: Key[], overrides: Record<string, unknown> = {}, issuerOverrides: Record<string, unknown> = {}) {
  const clock = { t: T0, now() { return this.t; } };
  const server = jwksServer(keys);
  const config = oauthConfigSchema.parse({
    resource: RESOURCE,
    requiredScopes: ["mcp:tools"],
    issuers: [{ name: "corp", issuer: ISSUER, jwksUrl: JWKS_URL, algorithms: ["RS256"], tenant: "acme", ...issuerOverrides }],
    ...overrides,
  });
  const errors: unknown[] = [];
  const verifier = new OAuthVerifier(config, { tenants: TENANTS, egress: { allow: [] }, fetch: server.fetcher, clock, onError: (e) => errors.push(e) });
  return { verifier, clock, server, errors };
}

/** A token as the issuer would sign it, valid at T0 unless told otherwise. */
async function token(k: Key, claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}): Promise<string> {
  const now = Math.floor(T0 / 1000);
  return await new SignJWT({ scope: "mcp:tools openid", ...claims })
    .setProtectedHeader({ alg: "RS256", kid: k.kid, typ: "at+jwt", ...header })
    .setIssuer((claims.iss as string | undefined) ?? ISSUER)
    .setAudience((claims.aud as string | undefined) ?? RESOURCE)
    .setSubject((claims.sub as string | undefined) ?? "alice")
    .setIssuedAt(now)
    .setExpirationTime((claims.exp as number | undefined) ?? now + 300)
    .sign(k.privateKey);
}

const refusal = async (p: Promise<unknown>): Promise<GatewayError> => {
  try {
    await p;
  } catch (err) {
    return err as GatewayError;
  }
  throw new Error("expected a refusal");
};

describe("OAuthVerifier", () => {
  let k1: Key;
  let k2: Key;
  let ec: Key;
  beforeAll(async () => {
    [k1, k2, ec] = await Promise.all([key("k1"), key("k2"), key("ec1", "ES256")]);
  });

  it("accepts a valid token: the principal is the fixed tenant and <issuer name>:<subject>, with its scopes", async () => {
    const { verifier, server } = setup([k1]);
    const v = await verifier.authenticate(await token(k1));
    expect(v.principal).toEqual({ tenantId: "acme", keyId: "corp:alice", entrypoints: [] });
    expect([...v.scopes].sort()).toEqual(["mcp:tools", "openid"]);
    // Fetched once, then served from the isolate's cache.
    await verifier.authenticate(await token(k1, { sub: "bob" }));
    expect(server.state.calls).toHaveLength(1);
    expect(server.state.calls[0]).toMatchObject({ url: JWKS_URL, init: { redirect: "manual" } });
  });

  it("a later publication revision's verifier keeps the key set (no refetch) and maps tokens to that revision's tenants", async () => {
    const { verifier, server } = setup([k1]);
    await verifier.authenticate(await token(k1));
    const next = verifier.withTenants(new Map([["globex", new Set(["ops"])]]));
    expect(server.state.calls).toHaveLength(1);
    // acme is not a tenant of the next revision: the token is refused there, without fetching keys again.
    await expect(next.authenticate(await token(k1))).rejects.toMatchObject({ code: "invalid_token" });
    const again = verifier.withTenants(new Map([["acme", new Set<string>()]]));
    expect((await again.authenticate(await token(k1))).principal.tenantId).toBe("acme");
    expect(server.state.calls).toHaveLength(1);
  });

  it("refuses a token for another audience, with the challenge pointing at the resource metadata", async () => {
    const { verifier } = setup([k1]);
    const err = await refusal(verifier.authenticate(await token(k1, { aud: "https://other.example.com/mcp" })));
    expect(err).toMatchObject({ code: "invalid_token", status: 401, message: expect.stringMatching(/audience/) });
    expect(err.challenge).toEqual({ error: "invalid_token", errorDescription: "The access token is not valid", scope: "mcp:tools", resourceMetadata: "https://gateway.example.com/.well-known/oauth-protected-resource/mcp" });
  });

  it("accepts an issuer's configured audience instead of the resource when one is set", async () => {
    const { verifier } = setup([k1], {}, { audience: "api://sluice" });
    expect((await verifier.authenticate(await token(k1, { aud: "api://sluice" }))).principal.tenantId).toBe("acme");
    await expect(verifier.authenticate(await token(k1))).rejects.toMatchObject({ code: "invalid_token" });
  });

  it("refuses an issuer that is not configured, and never fetches anything for it", async () => {
    const { verifier, server } = setup([k1]);
    const err = await refusal(verifier.authenticate(await token(k1, { iss: "https://evil.example.com/" })));
    expect(err).toMatchObject({ code: "invalid_token", message: expect.stringMatching(/issuer/) });
    expect(server.state.calls).toHaveLength(0);
  });

  it("refuses an expired token past the clock skew, and accepts one within it", async () => {
    const { verifier, clock } = setup([k1], { clockSkewSeconds: 30 });
    const t = await token(k1);
    clock.t = T0 + 300_000 + 20_000;
    expect((await verifier.authenticate(t)).principal.keyId).toBe("corp:alice");
    clock.t = T0 + 300_000 + 31_000;
    await expect(verifier.authenticate(t)).rejects.toMatchObject({ code: "invalid_token", message: expect.stringMatching(/expired/) });
  });

  it("refuses a token whose nbf is still to come (past the skew), and one without exp", async () => {
    const { verifier } = setup([k1], { clockSkewSeconds: 10 });
    const now = Math.floor(T0 / 1000);
    await expect(verifier.authenticate(await token(k1, { nbf: now + 60 }))).rejects.toMatchObject({ code: "invalid_token", message: expect.stringMatching(/not valid yet/) });
    expect((await verifier.authenticate(await token(k1, { nbf: now + 5 }))).principal.keyId).toBe("corp:alice");
    const noExp = await new SignJWT({ scope: "mcp:tools" }).setProtectedHeader({ alg: "RS256", kid: "k1" }).setIssuer(ISSUER).setAudience(RESOURCE).setSubject("alice").sign(k1.privateKey);
    await expect(verifier.authenticate(noExp)).rejects.toMatchObject({ code: "invalid_token" });
  });

  it("refetches the JWKS once for an unknown kid (a rotation), and rate-limits refetches for made-up kids", async () => {
    const { verifier, server, clock } = setup([k1], { jwksMinRefetchMs: 30_000 });
    await verifier.authenticate(await token(k1));
    expect(server.state.calls).toHaveLength(1);
    // The issuer rotates: k2 is published after the gateway cached the set.
    server.state.published = [k1, k2];
    clock.t += 31_000;
    expect((await verifier.authenticate(await token(k2))).principal.keyId).toBe("corp:alice");
    expect(server.state.calls).toHaveLength(2);
    // A flood of kids nobody publishes: refused, and the issuer is not asked again within the interval.
    const bogus = await Promise.all(Array.from({ length: 20 }, (_, i) => token(k2, {}, { kid: `bogus-${i}` })));
    for (const b of bogus) await expect(verifier.authenticate(b)).rejects.toMatchObject({ code: "invalid_token", message: expect.stringMatching(/key the issuer does not publish/) });
    expect(server.state.calls).toHaveLength(2);
    // After the interval, one more refetch is allowed (and the kid is still unknown).
    clock.t += 30_000;
    await Promise.all(bogus.slice(0, 5).map((b) => verifier.authenticate(b).catch(() => undefined)));
    expect(server.state.calls).toHaveLength(3);
  });

  it("refuses algorithms the issuer is not pinned to: another asymmetric one, HS256, and none", async () => {
    const { verifier, server } = setup([k1, ec]);
    const es = await new SignJWT({ scope: "mcp:tools" }).setProtectedHeader({ alg: "ES256", kid: "ec1" }).setIssuer(ISSUER).setAudience(RESOURCE).setSubject("alice").setExpirationTime(Math.floor(T0 / 1000) + 60).sign(ec.privateKey);
    await expect(verifier.authenticate(es)).rejects.toMatchObject({ code: "invalid_token", message: expect.stringMatching(/algorithm/) });
    // HS256 keyed with the public key's bytes: the classic confusion attack.
    const secret = new TextEncoder().encode(JSON.stringify(k1.jwk));
    const hs = await new SignJWT({ scope: "mcp:tools" }).setProtectedHeader({ alg: "HS256", kid: "k1" }).setIssuer(ISSUER).setAudience(RESOURCE).setSubject("alice").setExpirationTime(Math.floor(T0 / 1000) + 60).sign(secret);
    await expect(verifier.authenticate(hs)).rejects.toMatchObject({ code: "invalid_token", message: expect.stringMatching(/algorithm/) });
    const none = new UnsecuredJWT({ scope: "mcp:tools" }).setIssuer(ISSUER).setAudience(RESOURCE).setSubject("alice").setExpirationTime(Math.floor(T0 / 1000) + 60).encode();
    await expect(verifier.authenticate(none)).rejects.toMatchObject({ code: "invalid_token" });
    expect(server.state.calls).toHaveLength(0);
  });

  it("refuses a bad signature: a payload changed after signing, or a token signed by a key the JWKS does not hold under that kid", async () => {
    const { verifier } = setup([k1]);
    const [h, p, s] = (await token(k1)).split(".");
    const forged = JSON.parse(atob(p!.replace(/-/g, "+").replace(/_/g, "/")));
    forged.sub = "admin";
    const forgedPayload = btoa(JSON.stringify(forged)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    await expect(verifier.authenticate(`${h}.${forgedPayload}.${s}`)).rejects.toMatchObject({ code: "invalid_token", message: expect.stringMatching(/signature/) });
    const impostor = await key("k1");
    await expect(verifier.authenticate(await token(impostor))).rejects.toMatchObject({ code: "invalid_token", message: expect.stringMatching(/signature/) });
  });

  it("maps the tenant from a configured claim, and refuses a tenant that is missing or not configured", async () => {
    const { verifier } = setup([k1], {}, { tenant: undefined, claims: { tenant: "org_id" } });
    expect((await verifier.authenticate(await token(k1, { org_id: "globex", sub: "svc-7" }))).principal).toEqual({ tenantId: "globex", keyId: "corp:svc-7", entrypoints: [] });
    await expect(verifier.authenticate(await token(k1, { org_id: "initech" }))).rejects.toMatchObject({ code: "invalid_token", message: expect.stringMatching(/tenant/) });
    await expect(verifier.authenticate(await token(k1))).rejects.toMatchObject({ code: "invalid_token", message: expect.stringMatching(/tenant/) });
  });

  it("charges every caller of an issuer to its fixed chargeTo, and a caller of an issuer without one to its tenant alone", async () => {
    const { verifier } = setup([k1], {}, { chargeTo: "research/search" });
    expect((await verifier.authenticate(await token(k1))).principal).toEqual({ tenantId: "acme", keyId: "corp:alice", chargeTo: "research/search", entrypoints: [] });
    // A claim of the same name is not read when the issuer fixes the target.
    expect((await verifier.authenticate(await token(k1, { charge_to: "research/infra" }))).principal.chargeTo).toBe("research/search");
    const { verifier: team } = setup([k1], {}, { chargeTo: "research" });
    expect((await team.authenticate(await token(k1))).principal.chargeTo).toBe("research");
    const { verifier: plain } = setup([k1]);
    expect((await plain.authenticate(await token(k1, { charge_to: "research/infra" }))).principal.chargeTo).toBeUndefined();
  });

  it("maps chargeTo from a configured claim: a team or a team/project of the token's own tenant", async () => {
    const { verifier } = setup([k1], {}, { tenant: undefined, claims: { tenant: "org_id", chargeTo: "charge_to" } });
    expect((await verifier.authenticate(await token(k1, { org_id: "acme", charge_to: "research/infra" }))).principal).toEqual({ tenantId: "acme", keyId: "corp:alice", chargeTo: "research/infra", entrypoints: [] });
    expect((await verifier.authenticate(await token(k1, { org_id: "globex", charge_to: "ops" }))).principal).toEqual({ tenantId: "globex", keyId: "corp:alice", chargeTo: "ops", entrypoints: [] });
  });

  it("refuses a token without its chargeTo claim as invalid_token (401): it is never charged to its tenant alone instead", async () => {
    const { verifier } = setup([k1], {}, { claims: { chargeTo: "charge_to" } });
    const err = await refusal(verifier.authenticate(await token(k1)));
    expect(err).toMatchObject({ code: "invalid_token", status: 401, message: expect.stringMatching(/no charge_to claim/) });
    expect(err.challenge).toMatchObject({ error: "invalid_token", resourceMetadata: "https://gateway.example.com/.well-known/oauth-protected-resource/mcp" });
  });

  it("refuses a malformed chargeTo claim as invalid_token (401), like any other unusable claim", async () => {
    const { verifier } = setup([k1], {}, { claims: { chargeTo: "charge_to" } });
    for (const bad of [42, "", "Research", "research/", "/search", "research/search/deep", "research search", ["research"], { team: "research" }, null, "x".repeat(65)]) {
      const err = await refusal(verifier.authenticate(await token(k1, { charge_to: bad })));
      expect(err, JSON.stringify(bad)).toMatchObject({ code: "invalid_token", status: 401, message: expect.stringMatching(/charge_to claim must be a team id or team\/project/) });
    }
  });

  it("refuses a well-formed chargeTo its tenant does not have with 403 tool_not_allowed and no Bearer challenge: never charged to nothing", async () => {
    const { verifier } = setup([k1], {}, { tenant: undefined, claims: { tenant: "org_id", chargeTo: "charge_to" } });
    for (const [tenant, chargeTo, kind] of [
      ["acme", "sales", "team"],
      ["acme", "research/nope", "project"],
      // Another tenant's team and project are not this tenant's.
      ["acme", "ops/billing", "project"],
      ["globex", "research", "team"],
    ] as const) {
      const err = await refusal(verifier.authenticate(await token(k1, { org_id: tenant, charge_to: chargeTo })));
      expect(err).toMatchObject({ code: "tool_not_allowed", status: 403, retryable: false, message: `The access token charges ${kind} '${chargeTo}', which tenant '${tenant}' does not have; ask the gateway's operator to configure it, or get a token for a configured one.` });
      // insufficient_scope would send a client to its issuer for a scope that cannot help.
      expect(err.challenge).toBeUndefined();
    }
  });

  it("refuses a token without a required scope as insufficient_scope (403), naming the scopes in the challenge; scp lists count", async () => {
    const { verifier } = setup([k1], { requiredScopes: ["mcp:tools", "mcp:call"] });
    const err = await refusal(verifier.authenticate(await token(k1, { scope: "mcp:tools" })));
    expect(err).toMatchObject({ code: "insufficient_scope", status: 403, message: expect.stringMatching(/mcp:call/) });
    expect(err.challenge).toMatchObject({ error: "insufficient_scope", scope: "mcp:tools mcp:call", resourceMetadata: "https://gateway.example.com/.well-known/oauth-protected-resource/mcp" });
    const { verifier: scp } = setup([k1], {}, { claims: { scope: "scp" } });
    expect((await scp.authenticate(await token(k1, { scope: undefined, scp: ["mcp:tools"] }))).principal.keyId).toBe("corp:alice");
  });

  it("fetches the JWKS only through the egress guard, never follows a redirect, and keeps a stale set when a refetch fails", async () => {
    const privateJwks = setup([k1], {}, { jwksUrl: "http://10.0.0.5/jwks.json" });
    await expect(privateJwks.verifier.authenticate(await token(k1))).rejects.toMatchObject({ code: "jwks_unavailable", status: 503 });
    expect(privateJwks.server.state.calls).toHaveLength(0);
    expect(JSON.stringify(privateJwks.errors)).toMatch(/egress guard/);

    const redirected = setup([k1]);
    redirected.server.state.answer = new Response(null, { status: 302, headers: { location: "http://169.254.169.254/" } });
    await expect(redirected.verifier.authenticate(await token(k1))).rejects.toMatchObject({ code: "jwks_unavailable" });
    expect(redirected.server.state.calls).toHaveLength(1);
    expect(JSON.stringify(redirected.errors)).toMatch(/answered 302/);

    const stale = setup([k1], { jwksCacheTtlMs: 60_000 });
    await stale.verifier.authenticate(await token(k1));
    stale.server.state.answer = new Response("down", { status: 503 });
    stale.clock.t += 61_000;
    expect((await stale.verifier.authenticate(await token(k1, { exp: Math.floor(T0 / 1000) + 3600 }))).principal.keyId).toBe("corp:alice");
    expect(stale.server.state.calls).toHaveLength(2);
  });

  it("serves RFC 9728 metadata for the resource, at the path-inserted URL", () => {
    const { verifier } = setup([]);
    expect(verifier.metadata()).toEqual({ resource: RESOURCE, authorization_servers: [ISSUER], scopes_supported: ["mcp:tools"], bearer_methods_supported: ["header"], resource_name: "Sluice MCP gateway" });
    expect(verifier.metadataUrl).toBe("https://gateway.example.com/.well-known/oauth-protected-resource/mcp");
    expect(protectedResourceMetadataUrl("https://gw.example.com/")).toBe("https://gw.example.com/.well-known/oauth-protected-resource");
    expect(protectedResourceMetadataUrl("http://127.0.0.1:8787/tools/mcp/")).toBe("http://127.0.0.1:8787/.well-known/oauth-protected-resource/tools/mcp");
  });

  it("refuses a configuration that gives both or neither of a fixed tenant and a tenant claim, or an HMAC or none algorithm", () => {
    const base = { resource: RESOURCE, issuers: [{ name: "corp", issuer: ISSUER, jwksUrl: JWKS_URL, algorithms: ["RS256"] }] };
    expect(oauthConfigSchema.safeParse(base).success).toBe(false);
    expect(oauthConfigSchema.safeParse({ ...base, issuers: [{ ...base.issuers[0], tenant: "acme", claims: { tenant: "org" } }] }).success).toBe(false);
    expect(oauthConfigSchema.safeParse({ ...base, issuers: [{ ...base.issuers[0], tenant: "acme", algorithms: ["HS256"] }] }).success).toBe(false);
    expect(oauthConfigSchema.safeParse({ ...base, issuers: [{ ...base.issuers[0], tenant: "acme", algorithms: ["none"] }] }).success).toBe(false);
  });
});

describe("authenticateCaller: one chain, API key then access token, for every endpoint", () => {
  it("on the MCP endpoint: keeps API keys working, and answers a missing or unknown credential with the challenge", async () => {
    const k = await key("k1");
    const { verifier } = setup([k]);
    const publication = { keys: new Map([[await sha256Hex("sk-demo"), { principal: { tenantId: "acme", keyId: "demo" }, disabled: false }]]) } as unknown as CompiledPublication;
    const mcp = (c: PresentedCredentials) => authenticateCaller({ publication, oauth: verifier, clock: systemClock }, c, "mcp");
    expect(await mcp({ apiKey: "sk-demo", bearer: "sk-demo" })).toEqual({ tenantId: "acme", keyId: "demo" });
    const jwt = await token(k);
    expect(await mcp({ apiKey: jwt, bearer: jwt })).toEqual({ tenantId: "acme", keyId: "corp:alice", entrypoints: [] });
    // Two dots do not make a token: a key of that shape is still looked up as a key.
    expect(verifier.claims("sk.live.demo")).toBe(false);
    expect(verifier.claims(jwt)).toBe(true);
    await expect(mcp({ apiKey: "sk.live.demo", bearer: "sk.live.demo" })).rejects.toMatchObject({ code: "invalid_api_key" });
    // A token in x-api-key is not a bearer token (RFC 6750 header method only): it is looked up as a key.
    await expect(mcp({ apiKey: jwt, bearer: undefined })).rejects.toMatchObject({ code: "invalid_api_key" });
    const missing = await refusal(mcp({ apiKey: undefined, bearer: undefined }));
    expect(missing).toMatchObject({ code: "missing_api_key", status: 401 });
    expect(renderBearerChallenge(missing.challenge!)).toBe('Bearer scope="mcp:tools", resource_metadata="https://gateway.example.com/.well-known/oauth-protected-resource/mcp"');
    const unknown = await refusal(mcp({ apiKey: "sk-nope", bearer: "sk-nope" }));
    expect(renderBearerChallenge(unknown.challenge!)).toBe('Bearer error="invalid_token", error_description="The credential is not valid", scope="mcp:tools", resource_metadata="https://gateway.example.com/.well-known/oauth-protected-resource/mcp"');
    // Without OAuth configured nothing changes: no challenge.
    expect((await refusal(authenticateCaller({ publication, clock: systemClock }, { apiKey: undefined, bearer: undefined }, "mcp"))).challenge).toBeUndefined();
  });

  it("on the model API: a token is verified without the MCP endpoint's required scopes, its refusals carry a plain challenge, and a key's carry none", async () => {
    const k = await key("k1");
    const { verifier } = setup([k]);
    const publication = { keys: new Map([[await sha256Hex("sk-demo"), { principal: { tenantId: "acme", keyId: "demo" }, disabled: false }]]) } as unknown as CompiledPublication;
    const model = (c: PresentedCredentials) => authenticateCaller({ publication, oauth: verifier, clock: systemClock }, c, "model");
    const mcp = (c: PresentedCredentials) => authenticateCaller({ publication, oauth: verifier, clock: systemClock }, c, "mcp");
    expect(await model({ apiKey: "sk-demo", bearer: "sk-demo" })).toEqual({ tenantId: "acme", keyId: "demo" });
    // requiredScopes are the MCP endpoint's: a token without mcp:tools still authenticates here.
    const plain = await token(k, { scope: "openid" });
    expect(await model({ apiKey: plain, bearer: plain })).toEqual({ tenantId: "acme", keyId: "corp:alice", entrypoints: [] });
    await expect(mcp({ apiKey: plain, bearer: plain })).rejects.toMatchObject({ code: "insufficient_scope" });
    // A refused token: RFC 6750's challenge, without the MCP resource's metadata URL or scopes.
    const expired = await token(k, { exp: Math.floor(T0 / 1000) - 3600 });
    const refused = await refusal(model({ apiKey: expired, bearer: expired }));
    expect(refused).toMatchObject({ code: "invalid_token", status: 401, message: "The access token has expired." });
    expect(renderBearerChallenge(refused.challenge!)).toBe('Bearer error="invalid_token", error_description="The access token is not valid"');
    // A key's refusals look as they do without OAuth: no challenge.
    expect((await refusal(model({ apiKey: undefined, bearer: undefined })))).toMatchObject({ code: "missing_api_key", challenge: undefined });
    expect((await refusal(model({ apiKey: "sk-nope", bearer: "sk-nope" })))).toMatchObject({ code: "invalid_api_key", challenge: undefined });
    // The same shape rule on every endpoint: a JWT in x-api-key is a key, and a dotted key stays a key.
    await expect(model({ apiKey: plain, bearer: undefined })).rejects.toMatchObject({ code: "invalid_api_key" });
    await expect(model({ apiKey: "sk.live.demo", bearer: "sk.live.demo" })).rejects.toMatchObject({ code: "invalid_api_key" });
  });

  it("maps a token's scopes to the entrypoints they grant (the union; * grants all), and mayUse honours them instead of the key grants", async () => {
    const k = await key("k1");
    const { verifier } = setup([k], { scopeEntrypoints: { "models:chat": ["sluice-chat"], "models:embed": ["sluice-embed", "sluice-chat"], "models:all": ["*"] } });
    const granted = async (scope: string) => (await verifier.verify(await token(k, { scope }))).principal.entrypoints;
    expect(await granted("openid")).toEqual([]);
    expect(await granted("models:chat")).toEqual(["sluice-chat"]);
    expect(await granted("models:chat models:embed openid")).toEqual(["sluice-chat", "sluice-embed"]);
    expect(await granted("models:chat models:all")).toEqual(["*"]);
    // A scope named like an object's own property grants nothing.
    expect(await granted("constructor toString __proto__")).toEqual([]);
    const pub = compilePublication(publicationSchema.parse(bundled("publication")));
    const chat = { tenantId: "demo", keyId: "corp:alice", entrypoints: ["sluice-chat"] };
    expect(pub.mayUse(chat, "sluice-chat")).toBe(true);
    expect(pub.mayUse(chat, "sluice-large")).toBe(false);
    expect(pub.mayUse({ ...chat, entrypoints: ["*"] }, "sluice-large")).toBe(true);
    // A token's grants are its own even when its key id is spelt like an API key's (it never is).
    expect(pub.mayUse({ tenantId: "demo", keyId: "demo", entrypoints: [] }, "sluice-chat")).toBe(false);
    expect(pub.mayUse({ tenantId: "demo", keyId: "limited" }, "sluice-chat")).toBe(true);
    expect(pub.mayUse({ tenantId: "demo", keyId: "limited" }, "sluice-large")).toBe(false);
  });
});
