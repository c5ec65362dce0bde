/**
 * Gemini backends end to end: the gateway on workerd, the simulator speaking the Gemini API
 * (`x-goog-api-key`) and Vertex AI (a project and a location, bearer tokens from its fake Google
 * token endpoint), and the official OpenAI and Anthropic clients calling the gateway. The small
 * model is reached on the Gemini API with a key, the large one on Vertex AI with a service account
 * whose tokens the gateway mints from its key file and caches.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { testServiceAccount, type TestServiceAccount } from "./support/service-account.ts";
import { ADMIN_TOKEN, allowingSimulators, bundledConfig, DEMO_KEY, expectNothingLeft, type Simulator } from "./support/stack.ts";

const PROJECT = "sluice-e2e";
const LOCATION = "europe-west4";
const SMALL = "gemini-2.5-flash";
const LARGE = "gemini-2.5-pro";
const API_PATH = `/v1beta/models/${SMALL}:generateContent`;
const VERTEX_PATH = `/v1/projects/${PROJECT}/locations/${LOCATION}/publishers/google/models/${LARGE}:generateContent`;
const VERTEX_STREAM_PATH = `/v1/projects/${PROJECT}/locations/${LOCATION}/publishers/google/models/${LARGE}:streamGenerateContent`;

let sim: Simulator;
let gateway: RunningGateway;
let account: TestServiceAccount;

const simRequests = async (limit = 50): Promise<any[]> => ((await (await fetch(`${sim.url}/__sim/requests?limit=${limit}`)).json()) as { requests: any[] }).requests;
const resetSim = () => fetch(`${sim.url}/__sim/reset`, { method: "POST" });
const googleToken = (knobs: Record<string, unknown>) => fetch(`${sim.url}/__sim/google-token`, { method: "PUT", body: JSON.stringify(knobs) });
const revokeTokens = () => fetch(`${sim.url}/__sim/google-token`, { method: "DELETE" });
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
  account = testServiceAccount("sluice-gateway@sluice-e2e.iam.gserviceaccount.com");
  sim = await startSimulatorProcess({ apiKey: SIMULATOR_API_KEY, args: ["--google-service-account", account.path] });
  const capabilities = ["chat", "streaming", "stream-usage", "tools", "images", "json-schema"];
  const backends = {
    version: 1,
    backends: [
      { name: "gemini-key", protocol: "gemini", baseUrl: sim.url, credential: { secret: "GEMINI_API_KEY", scheme: "x-goog-api-key" }, capabilities },
      // The key file names its token URI (the simulator's), as Google's name theirs.
      { name: "vertex-sa", protocol: "gemini", baseUrl: sim.url, project: PROJECT, location: LOCATION, credential: { kind: "google-service-account", secret: "GOOGLE_SERVICE_ACCOUNT_JSON" }, capabilities },
      // The bundled publication's embeddings, moderation and cascade (logprobs) pools, never called here.
      { name: "other", protocol: "openai-chat", baseUrl: `${sim.url}/v1`, credential: { secret: "SIMULATOR_API_KEY" }, capabilities: ["chat", "streaming", "stream-usage", "logprobs", "embeddings", "moderations"] },
    ],
    pools: [
      { name: "sim-small", members: [{ backend: "gemini-key", model: SMALL }] },
      { name: "sim-large", members: [{ backend: "vertex-sa", model: LARGE }] },
      { name: "sim-embed", members: [{ backend: "other", model: "sim-embed" }] },
      { name: "sim-moderate", members: [{ backend: "other", model: "sim-moderate" }] },
      { name: "sim-small-scored", members: [{ backend: "other", model: "sim-small" }] },
      { name: "sim-large-scored", members: [{ backend: "other", model: "sim-large" }] },
    ],
  };
  const gw = allowingSimulators(bundledConfig("gateway"), sim.url);
  gw.breaker = { enabled: false };
  gateway = await startGateway({
    adminToken: ADMIN_TOKEN,
    secrets: { GEMINI_API_KEY: SIMULATOR_API_KEY, GOOGLE_SERVICE_ACCOUNT_JSON: account.keyFile(`${sim.url}/token`) },
    config: { backends: stringify(backends), gateway: stringify(gw) },
  });
});

afterAll(async () => {
  try {
    if (gateway) await expectNothingLeft(gateway.adminUrl);
  } finally {
    await Promise.all([gateway?.stop(), sim?.stop()]);
    account?.remove();
  }
});

const openai = () => new OpenAI({ apiKey: DEMO_KEY, baseURL: `${gateway.publicUrl}/v1`, maxRetries: 0 });
const anthropic = () => new Anthropic({ apiKey: DEMO_KEY, baseURL: gateway.publicUrl, maxRetries: 0 });
const weather = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };

describe("a gemini backend on the Gemini API", () => {
  it("answers a chat at the model's address with the key in x-goog-api-key, and settles at the reported usage, cached and thinking tokens included", async () => {
    await resetSim();
    const { data, response } = await openai()
      .chat.completions.create({ model: "sluice-chat", max_tokens: 40, messages: [{ role: "user", content: "Hello [[sim reasoning-tokens=3 cached-tokens=2]]" }] })
      .withResponse();
    expect(data.choices[0]!.message.content).toMatch(/\S/);
    const [seen] = await simRequests();
    expect(seen.path).toBe(API_PATH);
    expect(seen.headers["x-goog-api-key"]).toBe(SIMULATOR_API_KEY);
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.body.model).toBeUndefined();
    expect(seen.body.generationConfig.maxOutputTokens).toBe(40);
    expect(data.usage).toMatchObject({ prompt_tokens_details: { cached_tokens: 2 }, completion_tokens_details: { reasoning_tokens: 3 } });
    // Budgets: settled exactly at what the provider reported.
    const [id] = attemptIds(response);
    const rec = await settled(id!);
    expect(rec.state).toBe("settled");
    expect(rec.settlement.usage).toMatchObject({ inputTokens: data.usage!.prompt_tokens, outputTokens: data.usage!.completion_tokens, cachedInputTokens: 2, reasoningTokens: 3 });
    // Records: the protocol, the codec's version and where the usage came from.
    const line = await accessLine(response.headers.get("x-request-id")!);
    expect(line.attempts).toEqual([expect.objectContaining({ backend: "gemini-key", protocol: "gemini", codecVersion: "1", usageSource: "reported", outcome: "success" })]);
  });

  it("streams to an Anthropic client from streamGenerateContent with alt=sse, with usage read from the stream and settled exactly", async () => {
    await resetSim();
    const stream = anthropic().messages.stream({ model: "sluice-chat", max_tokens: 64, messages: [{ role: "user", content: "Hello there" }] });
    const message = await stream.finalMessage();
    expect(message.content).toEqual([expect.objectContaining({ type: "text" })]);
    expect(message.usage.output_tokens).toBeGreaterThan(0);
    const [seen] = await simRequests();
    expect(seen).toMatchObject({ path: `/v1beta/models/${SMALL}:streamGenerateContent`, query: "alt=sse" });
    const ids = attemptIds({ headers: (await stream.withResponse()).response.headers });
    const rec = await settled(ids[0]!);
    expect(rec.settlement.usage).toMatchObject({ inputTokens: message.usage.input_tokens, outputTokens: message.usage.output_tokens });
  });

  it("carries tools both ways, buffered and streamed", async () => {
    const buffered = await openai().chat.completions.create({ model: "sluice-chat", messages: [{ role: "user", content: "Weather in Paris?" }], tools: [{ type: "function", function: { name: "get_weather", parameters: weather } }], tool_choice: "required" });
    const call = buffered.choices[0]!.message.tool_calls![0]!;
    expect(buffered.choices[0]!.finish_reason).toBe("tool_calls");
    expect(call.type === "function" && call.function.name).toBe("get_weather");
    expect(call.type === "function" && Object.keys(JSON.parse(call.function.arguments))).toContain("city");
    const streamed = await anthropic()
      .messages.stream({ model: "sluice-chat", max_tokens: 128, messages: [{ role: "user", content: "Weather in Paris?" }], tools: [{ name: "get_weather", input_schema: weather as Anthropic.Tool.InputSchema }], tool_choice: { type: "any" } })
      .finalMessage();
    const use = streamed.content.find((b) => b.type === "tool_use");
    expect(streamed.stop_reason).toBe("tool_use");
    expect(use?.type === "tool_use" && Object.keys(use.input as object)).toContain("city");
  });

});

describe("a gemini backend on Vertex AI", () => {
  it("reaches the project's model with a minted bearer token, minted once for concurrent requests, buffered and streamed with a tool call", async () => {
    await resetSim();
    const buffered = Array.from({ length: 5 }, (_, i) => openai().chat.completions.create({ model: "sluice-large", messages: [{ role: "user", content: `Hello ${i}` }] }));
    const streamed = anthropic()
      .messages.stream({ model: "sluice-large", max_tokens: 128, messages: [{ role: "user", content: "Weather in Oslo?" }], tools: [{ name: "get_weather", input_schema: weather as Anthropic.Tool.InputSchema }], tool_choice: { type: "any" } })
      .finalMessage();
    const [answers, message] = await Promise.all([Promise.all(buffered), streamed]);
    for (const a of answers) expect(a.choices[0]!.message.content).toMatch(/\S/);
    expect(message.stop_reason).toBe("tool_use");
    const seen = await simRequests();
    const mints = seen.filter((r) => r.path === "/token");
    const calls = seen.filter((r) => r.path === VERTEX_PATH || r.path === VERTEX_STREAM_PATH);
    expect(mints).toHaveLength(1);
    expect(mints[0].body).toEqual({ grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer", assertion: "[redacted]" });
    expect(calls.map((c) => c.path).sort()).toEqual([...Array(5).fill(VERTEX_PATH), VERTEX_STREAM_PATH]);
    expect(calls.find((c) => c.path === VERTEX_STREAM_PATH).query).toBe("alt=sse");
    const bearers = new Set(calls.map((c) => c.headers.authorization));
    expect(bearers.size).toBe(1);
    expect([...bearers][0]).toMatch(/^Bearer ya29\.sim-/);
    for (const c of calls) expect(c.headers["x-goog-api-key"]).toBeUndefined();
  });

});

describe("Google's refusals", () => {
  it("retries RESOURCE_EXHAUSTED after the wait Google asked for, on the next tier, and releases the refused attempt", async () => {
    const started = Date.now();
    const { data, response } = await openai()
      .chat.completions.create({ model: "sluice-chat", messages: [{ role: "user", content: `Busy ${Date.now()} [[sim status=429 retry-after=1 times=1]]` }] })
      .withResponse();
    expect(data.choices[0]!.message.content).toMatch(/\S/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    const line = await accessLine(response.headers.get("x-request-id")!);
    expect(line.attempts.map((a: any) => [a.backend, a.status, a.evidence.class])).toEqual([
      ["gemini-key", 429, "known_zero"],
      ["vertex-sa", 200, "success"],
    ]);
    const [first, second] = attemptIds(response);
    expect((await settled(first!)).state).toBe("released");
    expect((await settled(second!)).state).toBe("settled");
  });

  it("a token Vertex no longer takes is dropped after its 401; with the token endpoint down, the next attempt is known-zero and the Gemini API answers", async () => {
    // The simulator revokes the tokens it issued and its token endpoint fails.
    await resetSim();
    expect((await revokeTokens()).status).toBe(200);
    expect((await googleToken({ status: 503 })).status).toBe(200);
    try {
      // "code" routes to the large model first, then the small one.
      const refused = await openai()
        .chat.completions.create({ model: "sluice-chat", messages: [{ role: "user", content: "Fix this code" }] })
        .withResponse()
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(refused).toBeInstanceOf(OpenAI.APIError);
      expect((refused as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
      const { data, response } = await openai()
        .chat.completions.create({ model: "sluice-chat", messages: [{ role: "user", content: "Fix this code again" }] })
        .withResponse();
      expect(data.choices[0]!.message.content).toMatch(/\S/);
      const line = await accessLine(response.headers.get("x-request-id")!);
      expect(line.attempts.map((a: any) => [a.backend, a.outcome, a.evidence.class, a.evidence.reason])).toEqual([
        ["vertex-sa", "connect_failed", "known_zero", "credential_unavailable"],
        ["gemini-key", "success", "success", "ok"],
      ]);
      const seen = await simRequests();
      expect(seen.filter((r) => r.path === VERTEX_PATH)).toHaveLength(1);
      expect(seen.filter((r) => r.path === "/token").length).toBeGreaterThanOrEqual(1);
    } finally {
      await googleToken({});
    }
  });
});
