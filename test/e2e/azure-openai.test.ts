/**
 * Azure OpenAI backends end to end: the gateway on workerd, the simulator speaking Azure's wire
 * (deployment addresses, `api-version`, `api-key`, bearer tokens from its fake Entra ID token
 * endpoint), and the official OpenAI and Anthropic clients calling the gateway. The small model's
 * deployment is reached with an API key, the large one's with an Entra ID application whose
 * tokens the gateway mints and caches.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { ADMIN_TOKEN, allowingSimulators, bundledConfig, DEMO_KEY, expectNothingLeft, type Simulator } from "./support/stack.ts";

const API_VERSION = "2024-10-21";
const CLIENT_ID = "sluice-gateway-app";
const CLIENT_SECRET = "entra-e2e-client-secret";

let sim: Simulator;
let gateway: RunningGateway;

const simRequests = async (limit = 50): Promise<any[]> => ((await (await fetch(`${sim.url}/__sim/requests?limit=${limit}`)).json()) as { requests: any[] }).requests;
const resetSim = () => fetch(`${sim.url}/__sim/reset`, { method: "POST" });
const configureSim = (config: Record<string, unknown>) => fetch(`${sim.url}/__sim/config`, { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify(config) });
/** An Entra ID credential of the simulator's application at a tenant of its own: each tenant's token endpoint address is its own token cache entry. */
const entraAt = (tenant: string) => ({ kind: "entra", tenantId: tenant, clientId: CLIENT_ID, secret: "AZURE_CLIENT_SECRET", tokenUrl: `${sim.url}/${tenant}/oauth2/v2.0/token` });
const admin = async (path: string): Promise<any> => (await fetch(`${gateway.adminUrl}${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json();
const attemptIds = (res: { headers: Headers }) => (res.headers.get("x-sluice-attempts") ?? "").split(", ").filter((s) => s !== "");

/** The access line of a request, once written. */
async function accessLine(requestId: string): Promise<any> {
  const end = Date.now() + 5000;
  for (;;) {
    const line = gateway
      .output()
      .split("\n")
      .find((l) => l.startsWith('{"kind":"request"') && l.includes(`"requestId":"${requestId}"`));
    if (line !== undefined) return JSON.parse(line);
    if (Date.now() > end) throw new Error(`no access line for ${requestId}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The ledger record of an attempt once its settlement has landed. */
async function settled(id: string): Promise<any> {
  const end = Date.now() + 5000;
  for (;;) {
    const r = await admin(`/admin/budgets/demo/attempts/${id}`);
    if (r.attempt !== undefined && r.attempt.state !== "held") return r.attempt;
    if (Date.now() > end) throw new Error(`attempt ${id} not settled`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

beforeAll(async () => {
  sim = await startSimulatorProcess({ apiKey: SIMULATOR_API_KEY, args: ["--entra-client", `${CLIENT_ID}:${CLIENT_SECRET}`] });
  const capabilities = ["chat", "streaming", "stream-usage", "tools", "images", "json-schema"];
  const backends = {
    version: 1,
    backends: [
      { name: "azure-key", protocol: "azure-openai", baseUrl: sim.url, apiVersion: API_VERSION, credential: { secret: "SIMULATOR_API_KEY", scheme: "api-key" }, capabilities },
      {
        name: "azure-entra",
        protocol: "azure-openai",
        baseUrl: sim.url,
        apiVersion: API_VERSION,
        credential: { kind: "entra", tenantId: "contoso", clientId: CLIENT_ID, secret: "AZURE_CLIENT_SECRET", tokenUrl: `${sim.url}/contoso/oauth2/v2.0/token` },
        capabilities,
      },
      // Fresh token cache entries for the refresh and the endpoint-down tests.
      { name: "azure-short", protocol: "azure-openai", baseUrl: sim.url, apiVersion: API_VERSION, credential: entraAt("fabrikam"), capabilities },
      { name: "azure-mint-down", protocol: "azure-openai", baseUrl: sim.url, apiVersion: API_VERSION, credential: entraAt("northwind"), capabilities },
      // The bundled publication's embeddings, moderation and cascade (logprobs) pools, never called here.
      { name: "other", protocol: "openai-chat", baseUrl: `${sim.url}/v1`, credential: { secret: "SIMULATOR_API_KEY" }, capabilities: ["chat", "streaming", "stream-usage", "logprobs", "embeddings", "moderations"] },
    ],
    pools: [
      { name: "sim-small", members: [{ backend: "azure-key", model: "gpt-4o-mini-prod" }] },
      { name: "sim-large", members: [{ backend: "azure-entra", model: "gpt-4o-prod" }] },
      { name: "sim-embed", members: [{ backend: "other", model: "sim-embed" }] },
      { name: "sim-moderate", members: [{ backend: "other", model: "sim-moderate" }] },
      { name: "sim-small-scored", members: [{ backend: "other", model: "sim-small" }] },
      { name: "sim-large-scored", members: [{ backend: "other", model: "sim-large" }] },
      { name: "short", members: [{ backend: "azure-short", model: "gpt-4o-short" }] },
      { name: "mint-down", members: [{ backend: "azure-mint-down", model: "gpt-4o-down" }] },
    ],
  };
  const publication = bundledConfig("publication");
  const price = publication.models[0].revisions[0].price;
  publication.models.push(
    { id: "chat-short", activeRevision: 1, revisions: [{ revision: 1, pool: "short", requires: ["chat"], price }] },
    { id: "chat-mint-down", activeRevision: 1, revisions: [{ revision: 1, pool: "mint-down", requires: ["chat"], price }] },
  );
  publication.entrypoints.push(
    { name: "short-lived", default: [["chat-short"]] },
    // The key deployment (chat-small) is the next tier when no token can be had.
    { name: "mint-down-first", default: [["chat-mint-down"], ["chat-small"]], retry: { maxAttempts: 3 } },
  );
  const gw = allowingSimulators(bundledConfig("gateway"), sim.url);
  gw.breaker = { enabled: false };
  gateway = await startGateway({ adminToken: ADMIN_TOKEN, secrets: { AZURE_CLIENT_SECRET: CLIENT_SECRET }, config: { backends: stringify(backends), gateway: stringify(gw), publication: stringify(publication) } });
});

afterAll(async () => {
  try {
    if (gateway) await expectNothingLeft(gateway.adminUrl);
  } finally {
    await Promise.all([gateway?.stop(), sim?.stop()]);
  }
});

const openai = () => new OpenAI({ apiKey: DEMO_KEY, baseURL: `${gateway.publicUrl}/v1`, maxRetries: 0 });
const anthropic = () => new Anthropic({ apiKey: DEMO_KEY, baseURL: gateway.publicUrl, maxRetries: 0 });
const weather = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };

describe("an Azure OpenAI backend", () => {
  it("answers a chat at the deployment's address with the api-key, no model in the body, and settles at the reported usage", async () => {
    await resetSim();
    const { data, response } = await openai().chat.completions.create({ model: "sluice-chat", max_tokens: 40, messages: [{ role: "user", content: "Hello" }] }).withResponse();
    expect(data.choices[0]!.message.content).toMatch(/\S/);
    const [seen] = await simRequests();
    expect(seen).toMatchObject({ path: "/openai/deployments/gpt-4o-mini-prod/chat/completions", query: `api-version=${API_VERSION}` });
    expect(seen.headers["api-key"]).toBe(SIMULATOR_API_KEY);
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.body.model).toBeUndefined();
    expect(seen.body.max_completion_tokens).toBe(40);
    // Budgets: settled exactly at what the provider reported, priced by the bundled price.
    const [id] = attemptIds(response);
    const rec = await settled(id!);
    expect(rec.state).toBe("settled");
    expect(rec.settlement.usage).toMatchObject({ inputTokens: data.usage!.prompt_tokens, outputTokens: data.usage!.completion_tokens });
    // Records: the protocol, the codec's version and where the usage came from.
    const line = await accessLine(response.headers.get("x-request-id")!);
    expect(line.attempts).toEqual([expect.objectContaining({ backend: "azure-key", protocol: "azure-openai", codecVersion: "1", usageSource: "reported", outcome: "success" })]);
  });

  it("streams to an Anthropic client, with usage read from the stream and settled exactly", async () => {
    await resetSim();
    const stream = anthropic().messages.stream({ model: "sluice-chat", max_tokens: 64, messages: [{ role: "user", content: "Hello there" }] });
    const message = await stream.finalMessage();
    expect(message.content).toEqual([expect.objectContaining({ type: "text" })]);
    expect(message.usage.output_tokens).toBeGreaterThan(0);
    const [seen] = await simRequests();
    expect(seen.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    const ids = attemptIds({ headers: (await stream.withResponse()).response.headers });
    const rec = await settled(ids[0]!);
    expect(rec.settlement.usage).toMatchObject({ inputTokens: message.usage.input_tokens, outputTokens: message.usage.output_tokens });
  });

  it("carries tools both ways, buffered and streamed", async () => {
    const buffered = await openai().chat.completions.create({ model: "sluice-chat", messages: [{ role: "user", content: "Weather in Paris?" }], tools: [{ type: "function", function: { name: "get_weather", parameters: weather } }], tool_choice: "required" });
    const call = buffered.choices[0]!.message.tool_calls![0]!;
    expect(buffered.choices[0]!.finish_reason).toBe("tool_calls");
    expect(call.type === "function" && Object.keys(JSON.parse(call.function.arguments))).toContain("city");
    const streamed = await anthropic()
      .messages.stream({ model: "sluice-chat", max_tokens: 128, messages: [{ role: "user", content: "Weather in Paris?" }], tools: [{ name: "get_weather", input_schema: weather as Anthropic.Tool.InputSchema }], tool_choice: { type: "any" } })
      .finalMessage();
    const use = streamed.content.find((b) => b.type === "tool_use");
    expect(streamed.stop_reason).toBe("tool_use");
    expect(use?.type === "tool_use" && Object.keys(use.input as object)).toContain("city");
  });

  it("reaches the Entra ID deployment with a minted bearer token, minted once for concurrent requests", async () => {
    await resetSim();
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => openai().chat.completions.create({ model: "sluice-large", messages: [{ role: "user", content: `Hello ${i}` }] })));
    for (const a of answers) expect(a.choices[0]!.message.content).toMatch(/\S/);
    const seen = await simRequests();
    const mints = seen.filter((r) => r.path === "/contoso/oauth2/v2.0/token");
    const chats = seen.filter((r) => r.path === "/openai/deployments/gpt-4o-prod/chat/completions");
    expect(mints).toHaveLength(1);
    expect(mints[0].body).toMatchObject({ grant_type: "client_credentials", client_id: CLIENT_ID, client_secret: "[redacted]", scope: "https://cognitiveservices.azure.com/.default" });
    expect(chats).toHaveLength(6);
    const bearers = new Set(chats.map((c) => c.headers.authorization));
    expect(bearers.size).toBe(1);
    expect([...bearers][0]).toMatch(/^Bearer sim-entra-/);
    for (const c of chats) expect(c.headers["api-key"]).toBeUndefined();
  });

  it("retries a 429 with retry-after-ms after the wait the provider asked for, and answers", async () => {
    await resetSim();
    const started = Date.now();
    const { data, response } = await openai()
      .chat.completions.create({ model: "sluice-chat", messages: [{ role: "user", content: `Busy ${Date.now()} [[sim status=429 retry-after-ms=400 times=1]]` }] })
      .withResponse();
    expect(data.choices[0]!.message.content).toMatch(/\S/);
    expect(attemptIds(response)).toHaveLength(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
    const chats = (await simRequests()).filter((r) => r.path.endsWith("/chat/completions"));
    expect(chats.map((c) => c.path)).toEqual(["/openai/deployments/gpt-4o-mini-prod/chat/completions", "/openai/deployments/gpt-4o-prod/chat/completions"]);
    const line = await accessLine(response.headers.get("x-request-id")!);
    expect(line.attempts.map((a: any) => [a.backend, a.status, a.evidence.class])).toEqual([
      ["azure-key", 429, "known_zero"],
      ["azure-entra", 200, "success"],
    ]);
    // The refused attempt was released, the answered one settled.
    const [first, second] = attemptIds(response);
    expect((await settled(first!)).state).toBe("released");
    expect((await settled(second!)).state).toBe("settled");
  });

  it("replaces a short-lived Entra ID token before it expires: no request carries an expired one", async () => {
    await resetSim();
    // Tokens live 2 s; the cache replaces one at most half its lifetime before it expires.
    await configureSim({ "token-expires-in": 2 });
    try {
      const started = Date.now();
      const mintsSeen = async () => (await simRequests(200)).filter((r) => r.path === "/fabrikam/oauth2/v2.0/token");
      // Ask until the gateway has minted the replacement (polled: the event is the second mint).
      while ((await mintsSeen()).length < 2) {
        if (Date.now() - started > 10_000) throw new Error("no replacement token was minted");
        const a = await openai().chat.completions.create({ model: "short-lived", messages: [{ role: "user", content: `Hello ${Date.now()}` }] });
        expect(a.choices[0]!.message.content).toMatch(/\S/);
        await new Promise((r) => setTimeout(r, 100));
      }
      const seen = await simRequests(200);
      const mints = seen.filter((r) => r.path === "/fabrikam/oauth2/v2.0/token");
      const chats = seen.filter((r) => r.path === "/openai/deployments/gpt-4o-short/chat/completions");
      expect(mints).toHaveLength(2);
      // The replacement came after half the first token's life and before its end.
      expect(mints[1].at - mints[0].at).toBeGreaterThanOrEqual(900);
      expect(mints[1].at - mints[0].at).toBeLessThan(2000);
      const tokens = [...new Set(chats.map((c) => c.headers.authorization as string))];
      expect(tokens).toHaveLength(2);
      const [first, second] = tokens;
      // Every use of the first token came before it expired, every use after the second mint was the new token.
      for (const c of chats) {
        if (c.headers.authorization === first) expect(c.at).toBeLessThan(mints[0].at + 2000);
        if (c.seq > mints[1].seq) expect(c.headers.authorization).toBe(second);
      }
    } finally {
      await configureSim({});
    }
  });

  it("a token endpoint that is down is known-zero: nothing reaches its deployment, and the next tier answers", async () => {
    await resetSim();
    await configureSim({ status: 503, "only-path": "/northwind/oauth2/v2.0/token" });
    try {
      const { data, response } = await openai().chat.completions.create({ model: "mint-down-first", messages: [{ role: "user", content: "Hello" }] }).withResponse();
      expect(data.choices[0]!.message.content).toMatch(/\S/);
      const seen = await simRequests();
      expect(seen.map((r) => r.path)).toEqual(["/northwind/oauth2/v2.0/token", "/openai/deployments/gpt-4o-mini-prod/chat/completions"]);
      const line = await accessLine(response.headers.get("x-request-id")!);
      expect(line.attempts.map((a: any) => [a.backend, a.outcome, a.evidence.class, a.evidence.reason ?? null])).toEqual([
        ["azure-mint-down", "connect_failed", "known_zero", "credential_unavailable"],
        ["azure-key", "success", "success", expect.anything()],
      ]);
      // The attempt that sent nothing holds nothing: released, the served one settled.
      const [first, second] = attemptIds(response);
      expect((await settled(first!)).state).toBe("released");
      expect((await settled(second!)).state).toBe("settled");
    } finally {
      await configureSim({});
    }
  });
});
