import { createHash, randomBytes } from "node:crypto";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, startSimulatorProcess, type RunningGateway } from "../../local-stack/stack.ts";
import { startSimulator } from "../../simulator/server.ts";
import { startOtlpReceiver, type OtlpReceiver } from "./support/otlp-receiver.ts";
import { keyFingerprint, testServiceAccount } from "./support/service-account.ts";
import { backendsFor, bundledConfig, DEMO_KEY, type Simulator } from "./support/stack.ts";

/**
 * Canary values for every secret a request touches — the provider credential, the admin token,
 * a caller's API key, an Entra ID client secret and the tokens minted with it, a Google service
 * account's private key, the tokens minted with it and a Gemini API key, an AWS secret access key
 * and session token — and for a prompt, pushed through success, failure, stream cut, admin and
 * config-error paths. None may appear in any log line, span, metric, error body or response
 * header.
 */
const tag = () => randomBytes(9).toString("hex");
const CANARY = {
  provider: `sk-canary-provider-${tag()}`,
  admin: `canary-admin-${tag()}`,
  apiKey: `sk-canary-key-${tag()}`,
  prompt: `canary-prompt-${tag()}`,
};
/**
 * A value a caller puts where the protocol names things (a model, a field). Like OpenAI, the
 * gateway names it back to that caller in the error ("The model 'x' does not exist"), so it may
 * appear in that response; it must still never reach a log line, a span or a metric.
 */
const CALLER_NAME = `canary-name-${tag()}`;

describe("leak scan: secrets and prompts never reach logs, spans, metrics, error bodies or headers", () => {
  let sim: Simulator;
  let receiver: OtlpReceiver;
  let gateway: RunningGateway;
  /** Everything a client or an operator could read, besides the log and the receiver. */
  const seen: string[] = [];

  const keep = async (res: Response): Promise<Response> => {
    const body = await res.text();
    seen.push(`${res.status} ${JSON.stringify([...res.headers])}\n${body}`);
    return new Response(body, { status: res.status, headers: res.headers });
  };

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    sim = await startSimulatorProcess({ apiKey: CANARY.provider });
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.security.adminTokenSecret = "CANARY_ADMIN_TOKEN";
    g.breaker = { enabled: false };
    g.observability.otlp = { endpoint: receiver.url, flushIntervalMs: 100, batchSpans: 16, metricsIntervalMs: 1000 };
    const p = bundledConfig("publication");
    p.tenants[0].apiKeys.push({ id: "canary", sha256: createHash("sha256").update(CANARY.apiKey).digest("hex"), entrypoints: ["*"], chargeTo: "platform/playground" });
    gateway = await startGateway({
      adminToken: CANARY.admin,
      secretNames: ["CANARY_ADMIN_TOKEN"],
      secrets: { SIMULATOR_API_KEY: CANARY.provider, CANARY_ADMIN_TOKEN: CANARY.admin },
      config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) },
    });
  });

  afterAll(async () => {
    await gateway?.stop();
    await sim?.stop();
    await receiver?.stop();
  });

  const chat = async (content: string, extra: Record<string, unknown> = {}, key = CANARY.apiKey) =>
    keep(
      await fetch(`${gateway.publicUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content }], ...extra }),
      }),
    );
  const admin = async (path: string, token = CANARY.admin, init: RequestInit = {}) =>
    keep(await fetch(`${gateway.adminUrl}/admin${path}`, { ...init, headers: { authorization: `Bearer ${token}`, ...init.headers } }));

  it("across success, failure, stream cut and admin paths", async () => {
    expect((await chat(`hello ${CANARY.prompt}`)).status).toBe(200);
    expect((await chat(`stream ${CANARY.prompt}`, { stream: true })).status).toBe(200);
    const cut = await chat(`cut ${CANARY.prompt} [[sim fault=cut-mid-stream]]`, { stream: true });
    expect(cut.status).toBe(200);
    expect((await chat(`bad ${CANARY.prompt} [[sim status=400]]`)).status).toBe(400);
    expect((await chat(`down ${CANARY.prompt} [[sim status=503]]`)).status).toBeGreaterThanOrEqual(500);
    expect((await chat(`unknown-usage ${CANARY.prompt} [[sim fault=omit-usage]]`)).status).toBe(200);
    // The caller's key used where it does not belong, and a wrong key shaped like the real one.
    expect((await chat(CANARY.prompt, { model: CALLER_NAME })).status).toBe(404);
    expect((await chat(CANARY.prompt, {}, `${CANARY.apiKey}x`)).status).toBe(401);
    // Bad input: a field value of the wrong type and an unknown field, each named by the caller.
    expect((await chat(CANARY.prompt, { temperature: CALLER_NAME })).status).toBe(400);
    expect((await chat(CANARY.prompt, { [CALLER_NAME]: 1 })).status).toBe(400);
    // Admin: wrong token (the provider key as token), config, snapshot, routes, status, metrics.
    expect((await admin("/status", CANARY.provider)).status).toBe(401);
    expect((await admin("/status", CANARY.apiKey)).status).toBe(401);
    for (const path of ["/status", "/config", "/snapshot", "/routes", "/metrics", "/budgets/demo/balance", "/budgets/demo/reconciliations"]) {
      expect((await admin(path)).status, path).toBe(200);
    }
    // A snapshot push naming the provider key where a secret name belongs is refused without echoing it.
    const bad = backendsFor(sim.url);
    bad.backends[0].credential.secret = CANARY.provider;
    const push = await admin("/snapshot", CANARY.admin, { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify(bad) });
    expect(push.status).toBe(422);
    // Flush spans and metrics, then read every surface.
    expect((await admin("/drain", CANARY.admin, { method: "POST", body: JSON.stringify({ budgetMs: 2000 }) })).status).toBe(200);
    await admin("/resume", CANARY.admin, { method: "POST" });
    const end = Date.now() + 10_000;
    while (!receiver.posts.some((p) => p.path === "/v1/metrics") && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    expect(receiver.posts.some((p) => p.path === "/v1/traces")).toBe(true);
    expect(receiver.posts.some((p) => p.path === "/v1/metrics")).toBe(true);
    const surfaces: Record<string, string> = {
      "gateway output (access log, errors)": gateway.output(),
      "OTLP exports": receiver.rawBodies().join("\n"),
      "responses (status, headers, bodies)": seen.join("\n"),
    };
    // The scan is real: the log saw these requests, and the prompt reached the provider.
    expect(surfaces["gateway output (access log, errors)"]).toContain('"kind":"request"');
    expect(surfaces["gateway output (access log, errors)"]).not.toContain('"kind":"content"');
    const provided = await (await fetch(`${sim.url}/__sim/requests?limit=50`)).text();
    expect(provided).toContain(CANARY.prompt);
    // No backend here propagates trace context: providers see no trace header.
    expect(provided).not.toContain("traceparent");
    for (const [surface, text] of Object.entries(surfaces)) {
      for (const [name, value] of Object.entries(CANARY)) expect(text.includes(value), `${name} canary in ${surface}`).toBe(false);
    }
    for (const surface of ["gateway output (access log, errors)", "OTLP exports"]) {
      expect(surfaces[surface]!.includes(CALLER_NAME), `a caller-chosen name in ${surface}`).toBe(false);
    }
    const metrics = await (await fetch(`${gateway.adminUrl}/admin/metrics`, { headers: { authorization: `Bearer ${CANARY.admin}` } })).text();
    for (const value of [...Object.values(CANARY), CALLER_NAME]) expect(metrics.includes(value)).toBe(false);
  }, 60_000);

  it("an Entra ID client secret and the tokens minted with it reach no log line, error or response", async () => {
    const entraSecret = `canary-entra-secret-${tag()}`;
    const azureSim = await startSimulatorProcess({ apiKey: CANARY.provider, args: ["--entra-client", `gateway-app:${entraSecret}`] });
    const entra = (clientId: string) => ({ kind: "entra", tenantId: "contoso", clientId, secret: "CANARY_ENTRA_SECRET", tokenUrl: `${azureSim.url}/contoso/oauth2/v2.0/token` });
    const caps = ["chat", "streaming", "stream-usage", "tools"];
    const backends = {
      version: 1,
      backends: [
        // The small tier's application is not the one the token endpoint knows: its mint is refused.
        { name: "azure-refused", protocol: "azure-openai", baseUrl: azureSim.url, apiVersion: "2024-10-21", credential: entra("another-app"), capabilities: caps },
        { name: "azure-entra", protocol: "azure-openai", baseUrl: azureSim.url, apiVersion: "2024-10-21", credential: entra("gateway-app"), capabilities: caps },
        { name: "other", protocol: "openai-chat", baseUrl: `${azureSim.url}/v1`, credential: { secret: "SIMULATOR_API_KEY" }, capabilities: ["chat", "streaming", "stream-usage", "logprobs", "embeddings", "moderations"] },
      ],
      pools: [
        { name: "sim-small", members: [{ backend: "azure-refused", model: "small-deployment" }] },
        { name: "sim-large", members: [{ backend: "azure-entra", model: "large-deployment" }] },
        { name: "sim-embed", members: [{ backend: "other", model: "sim-embed" }] },
        { name: "sim-moderate", members: [{ backend: "other", model: "sim-moderate" }] },
        { name: "sim-small-scored", members: [{ backend: "other", model: "sim-small" }] },
        { name: "sim-large-scored", members: [{ backend: "other", model: "sim-large" }] },
      ],
    };
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.breaker = { enabled: false };
    const azureGateway = await startGateway({
      adminToken: CANARY.admin,
      secretNames: ["CANARY_ENTRA_SECRET"],
      secrets: { SIMULATOR_API_KEY: CANARY.provider, CANARY_ENTRA_SECRET: entraSecret },
      config: { gateway: stringify(g), backends: stringify(backends) },
    });
    const responses: string[] = [];
    try {
      for (const [content, extra] of [
        ["hello", {}],
        ["stream", { stream: true, stream_options: { include_usage: true } }],
        ["cut [[sim fault=cut-mid-stream]]", { stream: true }],
        ["down [[sim status=503]]", {}],
      ] as const) {
        const res = await fetch(`${azureGateway.publicUrl}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
          body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content }], ...extra }),
        });
        responses.push(`${res.status} ${JSON.stringify([...res.headers])}\n${await res.text()}`);
      }
      expect(responses[0]).toMatch(/^200 /);
      // The tokens the gateway was issued, as the deployment saw them.
      const seen = ((await (await fetch(`${azureSim.url}/__sim/requests?limit=50`)).json()) as { requests: { path: string; headers: Record<string, string> }[] }).requests;
      const tokens = [...new Set(seen.flatMap((r) => (r.headers.authorization?.startsWith("Bearer sim-entra-") ? [r.headers.authorization.slice(7)] : [])))];
      expect(tokens.length).toBeGreaterThan(0);
      // The scan is real: the refused mint and its fallback are on the access line.
      const output = azureGateway.output();
      expect(output).toContain('"reason":"credential_unavailable"');
      const metrics = await (await fetch(`${azureGateway.adminUrl}/admin/metrics`, { headers: { authorization: `Bearer ${CANARY.admin}` } })).text();
      for (const [surface, text] of Object.entries({ "gateway output": output, responses: responses.join("\n"), metrics })) {
        expect(text.includes(entraSecret), `the Entra client secret in ${surface}`).toBe(false);
        for (const token of tokens) expect(text.includes(token), `a minted token in ${surface}`).toBe(false);
      }
    } finally {
      await azureGateway.stop();
      await azureSim.stop();
    }
  }, 60_000);

  it("a Google service account's private key, the tokens minted with it and a Gemini API key reach no log line, error or response", async () => {
    const account = testServiceAccount("canary-gateway@canary.iam.gserviceaccount.com");
    const stranger = testServiceAccount("canary-stranger@canary.iam.gserviceaccount.com");
    const geminiKey = `canary-gemini-key-${tag()}`;
    // Only the first account is known to the token endpoint: the second one's mint is refused.
    const googleSim = await startSimulatorProcess({ apiKey: geminiKey, args: ["--google-service-account", account.path] });
    const vertex = (name: string, secret: string) => ({ name, protocol: "gemini", baseUrl: googleSim.url, project: "canary-project", location: "us-central1", credential: { kind: "google-service-account", secret }, capabilities: ["chat", "streaming", "stream-usage", "tools"] });
    const backends = {
      version: 1,
      backends: [
        vertex("vertex-refused", "CANARY_STRANGER_JSON"),
        vertex("vertex-sa", "CANARY_SERVICE_ACCOUNT_JSON"),
        { name: "gemini-key", protocol: "gemini", baseUrl: googleSim.url, credential: { secret: "CANARY_GEMINI_KEY", scheme: "x-goog-api-key" }, capabilities: ["chat", "streaming", "stream-usage", "tools"] },
        { name: "other", protocol: "openai-chat", baseUrl: `${googleSim.url}/v1`, credential: { secret: "SIMULATOR_API_KEY" }, capabilities: ["chat", "streaming", "stream-usage", "logprobs", "embeddings", "moderations"] },
      ],
      pools: [
        // The small tier tries the refused account, then the Gemini API with the key.
        { name: "sim-small", selector: "round-robin", members: [{ backend: "vertex-refused", model: "gemini-2.5-flash" }, { backend: "gemini-key", model: "gemini-2.5-flash" }] },
        { name: "sim-large", members: [{ backend: "vertex-sa", model: "gemini-2.5-pro" }] },
        { name: "sim-embed", members: [{ backend: "other", model: "sim-embed" }] },
        { name: "sim-moderate", members: [{ backend: "other", model: "sim-moderate" }] },
        { name: "sim-small-scored", members: [{ backend: "other", model: "sim-small" }] },
        { name: "sim-large-scored", members: [{ backend: "other", model: "sim-large" }] },
      ],
    };
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.breaker = { enabled: false };
    const googleGateway = await startGateway({
      adminToken: CANARY.admin,
      secretNames: ["CANARY_SERVICE_ACCOUNT_JSON", "CANARY_STRANGER_JSON", "CANARY_GEMINI_KEY"],
      secrets: {
        SIMULATOR_API_KEY: CANARY.provider,
        CANARY_SERVICE_ACCOUNT_JSON: account.keyFile(`${googleSim.url}/token`),
        CANARY_STRANGER_JSON: stranger.keyFile(`${googleSim.url}/token`),
        CANARY_GEMINI_KEY: geminiKey,
      },
      config: { gateway: stringify(g), backends: stringify(backends) },
    });
    const responses: string[] = [];
    try {
      for (const [model, content, extra] of [
        ["sluice-chat", "hello", {}],
        ["sluice-chat", "again", {}],
        ["sluice-large", "hello", {}],
        ["sluice-large", "stream", { stream: true, stream_options: { include_usage: true } }],
        ["sluice-large", "cut [[sim fault=cut-mid-stream]]", { stream: true }],
        ["sluice-large", "down [[sim status=503]]", {}],
        ["sluice-chat", "busy [[sim status=429]]", {}],
      ] as const) {
        const res = await fetch(`${googleGateway.publicUrl}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
          body: JSON.stringify({ model, messages: [{ role: "user", content }], ...extra }),
        });
        responses.push(`${res.status} ${JSON.stringify([...res.headers])}\n${await res.text()}`);
      }
      expect(responses[0]).toMatch(/^200 /);
      // The tokens the gateway was issued, as Vertex saw them.
      const seen = ((await (await fetch(`${googleSim.url}/__sim/requests?limit=50`)).json()) as { requests: { path: string; headers: Record<string, string> }[] }).requests;
      const tokens = [...new Set(seen.flatMap((r) => (r.headers.authorization?.startsWith("Bearer ya29.sim-") ? [r.headers.authorization.slice(7)] : [])))];
      expect(tokens.length).toBeGreaterThan(0);
      expect(seen.some((r) => r.headers["x-goog-api-key"] === geminiKey)).toBe(true);
      // The scan is real: the refused mint is on the access line.
      const output = googleGateway.output();
      expect(output).toContain('"reason":"credential_unavailable"');
      const metrics = await (await fetch(`${googleGateway.adminUrl}/admin/metrics`, { headers: { authorization: `Bearer ${CANARY.admin}` } })).text();
      for (const [surface, text] of Object.entries({ "gateway output": output, responses: responses.join("\n"), metrics })) {
        expect(text.includes(keyFingerprint(account.privateKey)), `the service account's private key in ${surface}`).toBe(false);
        expect(text.includes(keyFingerprint(stranger.privateKey)), `the refused account's private key in ${surface}`).toBe(false);
        expect(text.includes("PRIVATE KEY"), `a PEM key in ${surface}`).toBe(false);
        expect(text.includes(geminiKey), `the Gemini API key in ${surface}`).toBe(false);
        for (const token of tokens) expect(text.includes(token), `a minted token in ${surface}`).toBe(false);
      }
    } finally {
      await googleGateway.stop();
      await googleSim.stop();
      account.remove();
      stranger.remove();
    }
  }, 60_000);

  it("an AWS secret access key and session token reach no log line, error, response or metric", async () => {
    const aws = { accessKeyId: `AKIA${tag().toUpperCase().slice(0, 16)}`, secretAccessKey: `canary-aws-secret-${tag()}`, sessionToken: `canary-aws-session-${tag()}` };
    const wrongSecret = `canary-aws-wrong-secret-${tag()}`;
    const bedrockSim = await startSimulator({ host: "127.0.0.1", port: 0, aws });
    const caps = ["chat", "streaming", "stream-usage", "tools"];
    const bedrock = (name: string, secretAccessKey: string) => ({
      name,
      protocol: "bedrock-converse",
      baseUrl: bedrockSim.url,
      region: "eu-west-1",
      awsCredential: { accessKeyId: "CANARY_AWS_KEY_ID", secretAccessKey, sessionToken: "CANARY_AWS_SESSION" },
      capabilities: caps,
    });
    const backends = {
      version: 1,
      backends: [
        bedrock("bedrock", "CANARY_AWS_SECRET"),
        // Signs with a secret that is not the key's: the simulator refuses every signature.
        bedrock("bedrock-wrong", "CANARY_AWS_WRONG_SECRET"),
        { name: "other", protocol: "openai-chat", baseUrl: `${bedrockSim.url}/v1`, credential: { secret: "SIMULATOR_API_KEY" }, capabilities: ["chat", "streaming", "stream-usage", "logprobs", "embeddings", "moderations"] },
      ],
      pools: [
        { name: "sim-small", members: [{ backend: "bedrock", model: "anthropic.claude-3-5-haiku-20241022-v1:0" }] },
        { name: "sim-large", members: [{ backend: "bedrock", model: "meta.llama3-70b-instruct-v1:0" }] },
        { name: "sim-embed", members: [{ backend: "other", model: "sim-embed" }] },
        { name: "sim-moderate", members: [{ backend: "other", model: "sim-moderate" }] },
        { name: "sim-small-scored", members: [{ backend: "other", model: "sim-small" }] },
        { name: "sim-large-scored", members: [{ backend: "other", model: "sim-large" }] },
        { name: "wrong", members: [{ backend: "bedrock-wrong", model: "anthropic.claude-3-5-haiku-20241022-v1:0" }] },
      ],
    };
    const p = bundledConfig("publication");
    p.models.push({ id: "chat-wrong", activeRevision: 1, revisions: [{ revision: 1, pool: "wrong", requires: ["chat"], price: p.models[0].revisions[0].price }] });
    p.entrypoints.push({ name: "wrong-secret", default: [["chat-wrong"]] });
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.breaker = { enabled: false };
    const awsGateway = await startGateway({
      adminToken: CANARY.admin,
      secretNames: ["CANARY_AWS_KEY_ID", "CANARY_AWS_SECRET", "CANARY_AWS_SESSION", "CANARY_AWS_WRONG_SECRET"],
      secrets: { SIMULATOR_API_KEY: CANARY.provider, CANARY_AWS_KEY_ID: aws.accessKeyId, CANARY_AWS_SECRET: aws.secretAccessKey, CANARY_AWS_SESSION: aws.sessionToken, CANARY_AWS_WRONG_SECRET: wrongSecret },
      config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backends) },
    });
    const responses: string[] = [];
    try {
      const statuses: number[] = [];
      for (const [content, extra] of [
        ["hello", {}],
        ["stream", { stream: true, stream_options: { include_usage: true } }],
        ["cut [[sim fault=cut-mid-stream]]", { stream: true }],
        ["cut inside [[sim fault=cut-mid-stream cut-bytes=40]]", { stream: true }],
        ["throttled [[sim status=429 retry-after=0]]", {}],
        ["unavailable [[sim status=503 retry-after=0 times=1]]", {}],
        ["refused [[sim status=400]]", {}],
        ["wrong", { model: "wrong-secret" }],
      ] as const) {
        const res = await fetch(`${awsGateway.publicUrl}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
          body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content }], ...extra }),
        });
        statuses.push(res.status);
        responses.push(`${res.status} ${JSON.stringify([...res.headers])}\n${await res.text()}`);
      }
      expect(statuses).toEqual([200, 200, 200, 200, 429, 200, 400, 502]);
      for (const path of ["/status", "/config", "/snapshot", "/routes"]) {
        const res = await fetch(`${awsGateway.adminUrl}/admin${path}`, { headers: { authorization: `Bearer ${CANARY.admin}` } });
        expect(res.status, path).toBe(200);
        responses.push(await res.text());
      }
      // The scan is real: the provider saw requests signed with this key and carrying the session token.
      const seen = ((await (await fetch(`${bedrockSim.url}/__sim/requests?limit=50`)).json()) as { requests: { headers: Record<string, string> }[] }).requests;
      expect(seen.some((r) => r.headers["x-amz-security-token"] === aws.sessionToken && r.headers.authorization?.includes(`Credential=${aws.accessKeyId}/`))).toBe(true);
      const output = awsGateway.output();
      expect(output).toContain('"protocol":"bedrock-converse"');
      const metrics = await (await fetch(`${awsGateway.adminUrl}/admin/metrics`, { headers: { authorization: `Bearer ${CANARY.admin}` } })).text();
      for (const [surface, text] of Object.entries({ "gateway output": output, "responses and admin answers": responses.join("\n"), metrics })) {
        expect(text.includes(aws.secretAccessKey), `the AWS secret access key in ${surface}`).toBe(false);
        expect(text.includes(wrongSecret), `a wrong AWS secret in ${surface}`).toBe(false);
        expect(text.includes(aws.sessionToken), `the AWS session token in ${surface}`).toBe(false);
      }
    } finally {
      await awsGateway.stop();
      await bedrockSim.close();
    }
  }, 60_000);

  it("an entrypoint's content policy logs sampled content, redacted and cut, and nothing else changes", async () => {
    const p = bundledConfig("publication");
    p.entrypoints[0].contentLog = { sampleRatio: 1, maxChars: 60, redact: ["order-[0-9]+"] };
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    const logged = await startGateway({
      adminToken: CANARY.admin,
      secrets: { SIMULATOR_API_KEY: CANARY.provider },
      config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) },
    });
    try {
      const secretKey = `sk-${tag()}${tag()}`;
      for (const stream of [false, true]) {
        const res = await fetch(`${logged.publicUrl}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
          body: JSON.stringify({ model: "sluice-chat", stream, messages: [{ role: "user", content: `about order-123456 with ${secretKey} and a long tail ${"x".repeat(200)}` }] }),
        });
        expect(res.status).toBe(200);
        await res.text();
      }
      const lines = await (async () => {
        const end = Date.now() + 10_000;
        for (;;) {
          const found = logged.output().split("\n").filter((l) => l.startsWith('{"kind":"content"'));
          if (found.length >= 2 || Date.now() > end) return found.map((l) => JSON.parse(l));
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
      expect(lines).toHaveLength(2);
      for (const line of lines) {
        expect(line.requestId).toMatch(/^req_/);
        expect(line.prompt.text).toBe("user: about [redacted] with [redacted] and a long tail xxxxx");
        expect(line.prompt.truncated).toBe(true);
        expect(line.completion.text.length).toBeGreaterThan(0);
        expect(line.completion.text.length).toBeLessThanOrEqual(60);
      }
      expect(logged.output()).not.toContain(secretKey);
      expect(logged.output()).not.toContain("order-123456");
    } finally {
      await logged.stop();
    }
  });

  it("a config error names the problem, not the secrets in the environment", async () => {
    const p = bundledConfig("publication");
    p.entrypoints[0].default = [["no-such-model"]];
    const err = await startGateway({
      adminToken: CANARY.admin,
      secrets: { SIMULATOR_API_KEY: CANARY.provider },
      config: { publication: stringify(p) },
    }).then(
      async (g) => {
        await g.stop();
        return undefined;
      },
      (e: unknown) => String(e),
    );
    expect(err).toContain("unknown model");
    for (const [name, value] of Object.entries(CANARY)) expect(err!.includes(value), `${name} canary in the start error`).toBe(false);
  });
});
