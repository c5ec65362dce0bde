import Anthropic from "@anthropic-ai/sdk";
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from "jose";
import { createHash } from "node:crypto";
import OpenAI from "openai";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../local-stack/ports.ts";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { startLoopbackServer, type LoopbackServer } from "./support/loopback-server.ts";
import { ADMIN_TOKEN, backendsFor, bundledConfig, expectNothingLeft, generationCount, type Simulator } from "./support/stack.ts";

const ISSUER = "https://login.example.com/";
/** An API key charged to the same project as the tokens with `charge_to: platform/oauth-e2e`. */
const PROJECT_KEY = "sk-e2e-oauth-project";
const PROJECT = "platform/oauth-e2e";
/** The project's request quota: four calls, then 429 (a refill takes a minute, longer than the test needs). */
const BURST = 4;

/**
 * OAuth access tokens on the model API, through the one authenticator chain `/mcp` uses: the
 * official SDKs authenticate with a JWT from a test issuer whose JWKS is served on loopback; the
 * token's principal is charged to its project's budget and quota exactly as an API key of that
 * project is, and shows the same principal fields in the access line and the call ledger; its
 * scopes grant entrypoints as a key's `entrypoints` do; and a token that is not accepted is refused
 * in each protocol's own envelope with an RFC 6750 challenge.
 */
describe("OAuth access tokens on the model API", () => {
  let sim: Simulator;
  let jwks: LoopbackServer;
  let gateway: RunningGateway;
  let resource: string;
  let privateKey: CryptoKey;
  let strangerKey: CryptoKey;

  beforeAll(async () => {
    const [pair, stranger] = await Promise.all([generateKeyPair("RS256", { extractable: true }), generateKeyPair("RS256", { extractable: true })]);
    privateKey = pair.privateKey;
    strangerKey = stranger.privateKey;
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: "e2e-model", alg: "RS256", use: "sig" };
    jwks = await startLoopbackServer(async (_req, _body, res) => void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: [jwk] })));
    sim = await startSimulatorProcess({ apiKey: SIMULATOR_API_KEY });
    const publicPort = await freePort();
    // The gateway's origin as the resource: a prefix of /mcp and of /v1 alike.
    resource = `http://127.0.0.1:${publicPort}/`;
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.breaker = { enabled: false };
    g.auth = {
      oauth: {
        resource,
        issuers: [{ name: "corp", issuer: ISSUER, jwksUrl: `${jwks.origin}/jwks.json`, algorithms: ["RS256"], tenant: "demo", claims: { chargeTo: "charge_to" } }],
        scopeEntrypoints: { "models:chat": ["sluice-chat"], "models:all": ["*"] },
      },
    };
    const p = bundledConfig("publication");
    const demo = p.tenants.find((t: any) => t.id === "demo");
    demo.teams[0].projects.push({ id: "oauth-e2e", limits: { tokens: { limit: 1_000_000, window: "1h" }, requests: { perMinute: 1, burst: BURST } } });
    demo.apiKeys.push({ id: "oauth-project", sha256: createHash("sha256").update(PROJECT_KEY).digest("hex"), entrypoints: ["*"], chargeTo: PROJECT });
    gateway = await startGateway({ adminToken: ADMIN_TOKEN, publicPort, config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) } });
  });

  afterAll(async () => {
    try {
      if (gateway) await expectNothingLeft(gateway.adminUrl);
    } finally {
      await Promise.all([gateway?.stop(), sim?.stop(), jwks?.close()]);
    }
  });

  const accessToken = (o: { sub?: string; scope?: string; chargeTo?: string; aud?: string; iss?: string; expiresIn?: number; key?: CryptoKey } = {}) => {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ scope: o.scope ?? "models:all", charge_to: o.chargeTo ?? PROJECT })
      .setProtectedHeader({ alg: "RS256", kid: "e2e-model", typ: "at+jwt" })
      .setIssuer(o.iss ?? ISSUER)
      .setAudience(o.aud ?? resource)
      .setSubject(o.sub ?? "alice")
      .setIssuedAt(now - 600)
      .setExpirationTime(now + (o.expiresIn ?? 300))
      .sign(o.key ?? privateKey);
  };
  const openai = (credential: string) => new OpenAI({ apiKey: credential, baseURL: `${gateway.publicUrl}/v1`, maxRetries: 0 });
  const post = (path: string, credential: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${gateway.publicUrl}${path}`, { method: "POST", headers: { authorization: `Bearer ${credential}`, "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  const admin = async (path: string, init: RequestInit = {}): Promise<any> =>
    (await fetch(`${gateway.adminUrl}${path}`, { ...init, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json", ...(init.headers ?? {}) } })).json();
  const tokens = async (scope: string) => (await admin(`/admin/budgets/demo/balance?scope=${encodeURIComponent(scope)}`)).balances[0]?.tokens;
  /** Settlement lands after the response: poll until a scope shows what was spent. */
  const spentOn = async (scope: string, expected: number) => {
    const deadline = Date.now() + 10_000;
    let seen = await tokens(scope);
    while (seen?.spent !== expected && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      seen = await tokens(scope);
    }
    return seen;
  };
  const requestLines = () =>
    gateway
      .output()
      .split("\n")
      .filter((l) => l.includes('{"kind":"request"'))
      .map((l) => JSON.parse(l.slice(l.indexOf('{"kind":"request"'))) as Record<string, unknown>);

  it("the official openai client with a JWT is served and charged to its project's budget exactly like a key of that project; the exhausted project refuses both alike", async () => {
    const jwt = await accessToken();
    const ask = (credential: string) => openai(credential).chat.completions.create({ model: "sluice-chat", max_tokens: 16, messages: [{ role: "user", content: "hello" }] }, { headers: { "x-sluice-task-id": "oauth-model-task" } });
    const byToken = await ask(jwt);
    const byKey = await ask(PROJECT_KEY);
    expect(byToken.choices[0]!.message.content).toBeTruthy();
    const used = (r: OpenAI.Chat.Completions.ChatCompletion) => r.usage!.total_tokens;
    // The project carries both; each caller's own scope carries its part.
    expect(await spentOn(`project:${PROJECT}`, used(byToken) + used(byKey))).toMatchObject({ spent: used(byToken) + used(byKey), held: 0 });
    // Each caller's own scope (no limits of its own) shows its part of the spend, key and token alike.
    const usage = async (scope: string) => (await admin(`/admin/budgets/demo/usage?scope=${encodeURIComponent(scope)}`)).models;
    const [tokenUsage, keyUsage] = await Promise.all([usage("key:corp:alice"), usage("key:oauth-project")]);
    expect(tokenUsage).toEqual([expect.objectContaining({ attempts: 1 })]);
    expect(keyUsage).toEqual([expect.objectContaining({ model: tokenUsage[0].model, attempts: 1 })]);
    // Another subject of the project shares its quota: the burst runs out for keys and tokens alike.
    for (let i = 2; i < BURST; i++) await ask(i % 2 === 0 ? await accessToken({ sub: "carol" }) : PROJECT_KEY);
    const refusals = await Promise.all([post("/v1/chat/completions", jwt, { model: "sluice-chat", messages: [{ role: "user", content: "more" }] }), post("/v1/chat/completions", PROJECT_KEY, { model: "sluice-chat", messages: [{ role: "user", content: "more" }] })]);
    const [tokenRefusal, keyRefusal] = await Promise.all(refusals.map(async (r) => ({ status: r.status, code: r.headers.get("x-sluice-error-code"), body: (await r.json()) as any })));
    expect(tokenRefusal!.status).toBe(429);
    expect(tokenRefusal!.body.error.details[0]).toMatchObject({ scope: `project:${PROJECT}` });
    // The same refusal, word for word, whichever credential the caller used.
    expect(keyRefusal).toEqual(tokenRefusal);
    // The access line and the call ledger show the same principal fields for both.
    const served = requestLines().filter((l) => l.errorCode === undefined && l.chargeTo === PROJECT);
    expect(served.find((l) => l.key === "corp:alice")).toMatchObject({ tenant: "demo", key: "corp:alice", chargeTo: PROJECT });
    expect(served.find((l) => l.key === "oauth-project")).toMatchObject({ tenant: "demo", key: "oauth-project", chargeTo: PROJECT });
    const deadline = Date.now() + 15_000;
    let task: any;
    while (!(task?.calls?.length >= BURST) && Date.now() < deadline) task = await admin("/admin/tasks/oauth-model-task?tenant=demo");
    expect(new Set(task.calls.map((c: any) => `${c.key} ${c.chargeTo}`))).toEqual(new Set([`corp:alice ${PROJECT}`, `oauth-project ${PROJECT}`, `corp:carol ${PROJECT}`]));
    expect(task.task).toMatchObject({ project: PROJECT });
  });

  it("serves every model endpoint to a token: responses, messages (the Anthropic client's authToken), count_tokens, embeddings and the model list", async () => {
    const jwt = await accessToken({ sub: "dave", chargeTo: "platform/playground" });
    const responses = await openai(jwt).responses.create({ model: "sluice-chat", input: "hello", max_output_tokens: 16 });
    expect(responses.output_text).toBeTruthy();
    const embeddings = await openai(jwt).embeddings.create({ model: "sluice-embed", input: "hello" });
    expect(embeddings.data[0]!.embedding.length).toBeGreaterThan(0);
    const anthropic = new Anthropic({ apiKey: null, authToken: jwt, baseURL: gateway.publicUrl, maxRetries: 0 });
    const message = await anthropic.messages.create({ model: "sluice-chat", max_tokens: 16, messages: [{ role: "user", content: "hello" }] });
    expect(message.content[0]).toMatchObject({ type: "text" });
    const counted = await anthropic.messages.countTokens({ model: "sluice-chat", messages: [{ role: "user", content: "hello" }] });
    expect(counted.input_tokens).toBeGreaterThan(0);
    const listed = await openai(jwt).models.list();
    expect(listed.data.map((m) => m.id)).toContain("sluice-embed");
    expect(requestLines().filter((l) => l.key === "corp:dave").map((l) => l.chargeTo)).toEqual(expect.arrayContaining(["platform/playground"]));
  });

  it("grants a token the entrypoints its scopes map to, as a key's entrypoints: others are 403 model_not_allowed and missing from its model list", async () => {
    const chatOnly = await accessToken({ sub: "erin", scope: "models:chat openid", chargeTo: "platform/playground" });
    expect((await openai(chatOnly).models.list()).data.map((m) => m.id)).toEqual(["sluice-chat"]);
    const refused = await post("/v1/embeddings", chatOnly, { model: "sluice-embed", input: "hello" });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as any).error).toMatchObject({ code: "model_not_allowed", param: "model", message: "The access token's scopes do not grant the model 'sluice-embed'." });
    // A token whose scopes grant nothing: authenticated, but no model is its to call.
    const none = await accessToken({ sub: "erin", scope: "openid", chargeTo: "platform/playground" });
    expect((await openai(none).models.list()).data).toEqual([]);
    await expect(openai(none).chat.completions.create({ model: "sluice-chat", messages: [{ role: "user", content: "hi" }] })).rejects.toBeInstanceOf(OpenAI.PermissionDeniedError);
  });

  it("refuses an expired, another audience's, an unknown issuer's and a forged token in the OpenAI and the Anthropic envelope, with an RFC 6750 challenge, before anything is sent upstream", async () => {
    const before = await generationCount(sim);
    const bad = {
      expired: await accessToken({ expiresIn: -3600 }),
      audience: await accessToken({ aud: "https://other.example.com/" }),
      issuer: await accessToken({ iss: "https://impostor.example.com/" }),
      signature: await accessToken({ key: strangerKey }),
    };
    for (const [what, jwt] of Object.entries(bad)) {
      const err = await openai(jwt)
        .chat.completions.create({ model: "sluice-chat", messages: [{ role: "user", content: "hi" }] })
        .catch((e: unknown) => e);
      expect(err, what).toBeInstanceOf(OpenAI.AuthenticationError);
      const o = err as InstanceType<typeof OpenAI.AuthenticationError>;
      expect(o.status).toBe(401);
      expect(o.error).toMatchObject({ code: "invalid_token", type: "authentication_error" });
      expect(o.headers.get("www-authenticate")).toBe('Bearer error="invalid_token", error_description="The access token is not valid"');
      const a = await post("/v1/messages", jwt, { model: "sluice-chat", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }, { "anthropic-version": "2023-06-01" });
      expect(a.status, what).toBe(401);
      expect(a.headers.get("www-authenticate")).toMatch(/^Bearer error="invalid_token"/);
      expect(a.headers.get("x-sluice-error-code")).toBe("invalid_token");
      expect(await a.json()).toMatchObject({ type: "error", error: { type: "authentication_error", message: expect.any(String) } });
    }
    const messages = await Promise.all(Object.values(bad).map(async (jwt) => ((await (await post("/v1/chat/completions", jwt, { model: "sluice-chat", messages: [] })).json()) as any).error.message));
    expect(messages).toEqual(["The access token has expired.", "The access token was not issued for this resource (audience).", "The access token's issuer is not accepted by this gateway.", "The access token's signature does not verify."]);
    expect(await generationCount(sim)).toBe(before);
    // An API key's refusal is as it always was on the model API: no challenge.
    const key = await post("/v1/chat/completions", "sk-nope", { model: "sluice-chat", messages: [] });
    expect(key.status).toBe(401);
    expect(key.headers.get("www-authenticate")).toBeNull();
  });
});
