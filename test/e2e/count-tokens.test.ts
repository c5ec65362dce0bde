/**
 * `POST /v1/messages/count_tokens` through the gateway with the official `@anthropic-ai/sdk`
 * client: forwarded to the chosen model's Anthropic-protocol backend (the simulator counts
 * deterministically), estimated by the gateway when the model's backend speaks another protocol
 * or the count fails, authenticated and authorized like `/v1/messages`, never charged; and the
 * Anthropic surface's unknown paths answered with Anthropic's 404.
 */
import Anthropic from "@anthropic-ai/sdk";
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { freePort } from "../../local-stack/ports.ts";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { estimatePromptTokens } from "../../src/protocol/prompt-estimate.ts";
import { anthropicMessagesCodec } from "../../src/protocol/anthropic-messages/index.ts";
import { ADMIN_TOKEN, allowingSimulators, bundledConfig, expectNothingLeft, type Simulator } from "./support/stack.ts";

const sha = (k: string) => createHash("sha256").update(k).digest("hex");
const KEYS = { budgeted: "sk-e2e-count", limited: "sk-e2e-count-limited" } as const;
const PRICE = { version: "e2e-1", currency: "USD", inputPerMTok: 3, outputPerMTok: 15 };
const CAPS = ["chat", "streaming", "stream-usage", "tools"];
/** The provider's own model id behind the Anthropic backend: the client never names it. */
const UPSTREAM_MODEL = "claude-upstream-e2e";

let sim: Simulator;
let gateway: RunningGateway;
let client: Anthropic;

beforeAll(async () => {
  sim = await startSimulatorProcess({ apiKey: SIMULATOR_API_KEY });
  // An Anthropic backend nobody listens on: the port is free, and stays closed.
  const deadUrl = `http://127.0.0.1:${await freePort()}`;
  const backend = (name: string, protocol: string, url: string) => ({
    name,
    protocol,
    baseUrl: `${url}/v1`,
    credential: { secret: "SIMULATOR_API_KEY", scheme: protocol === "anthropic-messages" ? "x-api-key" : "bearer" },
    capabilities: CAPS,
  });
  const backends = {
    version: 1,
    backends: [backend("sim-anthropic", "anthropic-messages", sim.url), backend("sim-openai", "openai-chat", sim.url), backend("dead-anthropic", "anthropic-messages", deadUrl)],
    pools: [
      { name: "pool-anthropic", members: [{ backend: "sim-anthropic", model: UPSTREAM_MODEL }] },
      { name: "pool-openai", members: [{ backend: "sim-openai", model: "sim-small" }] },
      { name: "pool-dead", members: [{ backend: "dead-anthropic", model: UPSTREAM_MODEL }] },
    ],
  };
  const publication = bundledConfig("publication");
  publication.models = ["anthropic", "openai", "dead"].map((p) => ({ id: `m-${p}`, activeRevision: 1, revisions: [{ revision: 1, pool: `pool-${p}`, requires: ["chat"], price: PRICE }] }));
  // Its own models and entrypoints only: the bundled signals and semantic cache name an embeddings entrypoint it has not.
  publication.signals = [];
  publication.plugins = publication.plugins.filter((p: { model?: string }) => p.model === undefined);
  publication.entrypoints = [
    { name: "via-anthropic", default: [["m-anthropic"]] },
    { name: "via-openai", default: [["m-openai"]] },
    { name: "via-dead", default: [["m-dead"]] },
  ];
  publication.tenants = [
    {
      id: "acme",
      limits: { money: { limit: 100, currency: "USD", period: "30d" } },
      teams: [{ id: "research", projects: [{ id: "counted", limits: { tokens: { limit: 100_000, window: "1h" } } }] }],
      apiKeys: [
        { id: "budgeted", sha256: sha(KEYS.budgeted), entrypoints: ["*"], chargeTo: "research/counted", exposeBudget: true },
        { id: "limited", sha256: sha(KEYS.limited), entrypoints: ["via-anthropic"], chargeTo: "research/counted" },
      ],
    },
  ];
  const gw = allowingSimulators(bundledConfig("gateway"), sim.url, deadUrl);
  // Exact upstream counts: no breaker opens on the dead backend between tests.
  gw.breaker = { enabled: false };
  gateway = await startGateway({ adminToken: ADMIN_TOKEN, config: { backends: stringify(backends), publication: stringify(publication), gateway: stringify(gw) } });
  client = new Anthropic({ apiKey: KEYS.budgeted, baseURL: gateway.publicUrl, maxRetries: 0 });
});

afterAll(async () => {
  try {
    if (gateway) await expectNothingLeft(gateway.adminUrl);
  } finally {
    await Promise.all([gateway?.stop(), sim?.stop()]);
  }
});

const weather: Anthropic.Messages.Tool = {
  name: "get_weather",
  description: "Weather for a city",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

/** A count request for `model`: a system prompt, a conversation and a tool, as Claude Code sends them. */
function countBody(model: string, text = "What is the weather in Paris today?"): Anthropic.Messages.MessageCountTokensParams {
  return { model, system: "You are a terse assistant.", messages: [{ role: "user", content: text }], tools: [weather] };
}

/** The gateway's own estimate of a count body, decoded as the gateway decodes it. */
const estimateOf = (body: unknown) => estimatePromptTokens(anthropicMessagesCodec.countTokens!.decodeRequest(body));

/** The simulator's count of the same body for the provider's model, asked directly. */
async function simulatorCount(body: Anthropic.Messages.MessageCountTokensParams): Promise<number> {
  const res = await fetch(`${sim.url}/v1/messages/count_tokens`, {
    method: "POST",
    headers: { "x-api-key": SIMULATOR_API_KEY, "anthropic-version": "2023-06-01", "content-type": "application/json" },
    body: JSON.stringify({ ...body, model: UPSTREAM_MODEL }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { input_tokens: number }).input_tokens;
}

const countRequests = async () =>
  ((await (await fetch(`${sim.url}/__sim/requests`)).json()) as { requests: { path: string; headers: Record<string, string>; body: any }[] }).requests.filter((r) => r.path === "/v1/messages/count_tokens");

/** The access-log line of a request, once written (the record is logged as the request ends). */
async function accessLine(requestId: string): Promise<any> {
  let line: string | undefined;
  await expect
    .poll(() => (line = gateway.output().split("\n").find((l) => l.startsWith('{"kind":"request"') && l.includes(`"requestId":"${requestId}"`))), { timeout: 5000 })
    .toBeDefined();
  return JSON.parse(line!);
}

async function caught(p: Promise<unknown>): Promise<InstanceType<typeof Anthropic.APIError>> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(Anthropic.APIError);
    return err as InstanceType<typeof Anthropic.APIError>;
  }
  throw new Error("expected the call to fail");
}

describe("POST /v1/messages/count_tokens", () => {
  it("forwards to the model's Anthropic backend with its credential and model id, and answers its count as reported", async () => {
    await fetch(`${sim.url}/__sim/reset`, { method: "POST" });
    const body = countBody("via-anthropic");
    const { data, response } = await client.messages.countTokens(body).withResponse();
    const expected = await simulatorCount(body);
    expect(data).toEqual({ input_tokens: expected });
    // The simulator's count, not the gateway's estimate, which differs for this body.
    expect(expected).not.toBe(estimateOf(body));
    expect(response.headers.get("x-sluice-token-count")).toBe("reported");
    expect(response.headers.get("x-sluice-attempts")).toMatch(/^att_[0-9a-f]{32}$/);

    const [seen] = await countRequests();
    expect(seen!.body.model).toBe(UPSTREAM_MODEL);
    expect(seen!.headers["x-api-key"]).toBe(SIMULATOR_API_KEY);
    expect(seen!.headers["anthropic-version"]).toBeDefined();
    // The caller's key never goes upstream, and the count is asked for what a count reads.
    expect(JSON.stringify(seen!.headers)).not.toContain(KEYS.budgeted);
    expect(seen!.headers.authorization).toBeUndefined();
    expect(Object.keys(seen!.body).sort()).toEqual(["messages", "model", "system", "tools"]);

    const line = await accessLine(response.headers.get("x-request-id")!);
    expect(line).toMatchObject({ outcome: "success", entrypoint: "via-anthropic", protocol: "anthropic-messages", stream: false, tokenCount: { source: "reported", inputTokens: expected } });
    expect(line.attempts).toHaveLength(1);
    expect(line.attempts[0]).toMatchObject({ backend: "sim-anthropic", outcome: "success", usage: "none" });
  });

  it("estimates when the model's backend speaks openai-chat: the gateway's estimate of the same request, marked estimated", async () => {
    await fetch(`${sim.url}/__sim/reset`, { method: "POST" });
    const body = countBody("via-openai");
    const { data, response } = await client.messages.countTokens(body).withResponse();
    expect(data).toEqual({ input_tokens: estimateOf(body) });
    expect(response.headers.get("x-sluice-token-count")).toBe("estimated");
    // Nothing was asked upstream: the OpenAI protocol has no count.
    expect(((await (await fetch(`${sim.url}/__sim/stats`)).json()) as { total: number }).total).toBe(0);
    const line = await accessLine(response.headers.get("x-request-id")!);
    expect(line).toMatchObject({ outcome: "success", entrypoint: "via-openai", tokenCount: { source: "estimated", inputTokens: estimateOf(body), fallback: { reason: "no_counter" } } });
    expect(line.attempts).toEqual([]);
  });

  it("falls back to the estimate when the Anthropic backend is down or fails, and says why in the record", async () => {
    const down = countBody("via-dead");
    const unreachable = await client.messages.countTokens(down).withResponse();
    expect(unreachable.data).toEqual({ input_tokens: estimateOf(down) });
    expect(unreachable.response.headers.get("x-sluice-token-count")).toBe("estimated");
    const downLine = await accessLine(unreachable.response.headers.get("x-request-id")!);
    expect(downLine).toMatchObject({ outcome: "success", tokenCount: { source: "estimated", fallback: { reason: "failed", errorCode: "upstream_unreachable" } } });
    expect(downLine.attempts[0]).toMatchObject({ backend: "dead-anthropic", outcome: "network_error" });

    // The simulator's count endpoint answers 503 while its messages still work.
    const failing = countBody("via-anthropic", "Count me [[sim status=503 only-path=/v1/messages/count_tokens]]");
    const failed = await client.messages.countTokens(failing).withResponse();
    expect(failed.data).toEqual({ input_tokens: estimateOf(failing) });
    expect(failed.response.headers.get("x-sluice-token-count")).toBe("estimated");
    const failedLine = await accessLine(failed.response.headers.get("x-request-id")!);
    expect(failedLine).toMatchObject({ outcome: "success", tokenCount: { source: "estimated", fallback: { reason: "failed", errorCode: "upstream_overloaded" } } });
    expect(failedLine.attempts[0]).toMatchObject({ backend: "sim-anthropic", status: 503, outcome: "upstream_status" });
  });

  it("authenticates and authorizes like /v1/messages, refusing in Anthropic's envelope", async () => {
    const body = countBody("via-anthropic");
    const missing = await fetch(`${gateway.publicUrl}/v1/messages/count_tokens`, { method: "POST", headers: { "content-type": "application/json", "anthropic-version": "2023-06-01" }, body: JSON.stringify(body) });
    expect(missing.status).toBe(401);
    expect(missing.headers.get("x-sluice-error-code")).toBe("missing_api_key");
    expect(await missing.json()).toMatchObject({ type: "error", error: { type: "authentication_error" } });

    const wrongKey = await caught(new Anthropic({ apiKey: "sk-wrong", baseURL: gateway.publicUrl, maxRetries: 0 }).messages.countTokens(body));
    expect(wrongKey).toBeInstanceOf(Anthropic.AuthenticationError);
    expect(wrongKey.error).toMatchObject({ type: "error", error: { type: "authentication_error" } });

    const unknown = await caught(client.messages.countTokens(countBody("no-such-model")));
    expect(unknown).toBeInstanceOf(Anthropic.NotFoundError);
    expect(unknown.error).toMatchObject({ type: "error", error: { type: "not_found_error" } });
    expect(unknown.headers?.get("x-sluice-error-code")).toBe("model_not_found");

    const limited = new Anthropic({ apiKey: KEYS.limited, baseURL: gateway.publicUrl, maxRetries: 0 });
    const notGranted = await caught(limited.messages.countTokens(countBody("via-openai")));
    expect(notGranted).toBeInstanceOf(Anthropic.PermissionDeniedError);
    expect(notGranted.error).toMatchObject({ type: "error", error: { type: "permission_error" } });
    // The same key counts on what it is granted.
    expect((await limited.messages.countTokens(countBody("via-anthropic"))).input_tokens).toBeGreaterThan(0);

    const bad = await caught(client.messages.countTokens({ model: "via-anthropic", messages: [] }));
    expect(bad).toBeInstanceOf(Anthropic.BadRequestError);
    expect(bad.error).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
  });

  it("is never charged: the budgeted key's balance stays where it was, while a message moves it", async () => {
    const balance = async () => {
      const res = await fetch(`${gateway.adminUrl}/admin/budgets/acme/balance?scope=project:research/counted&scope=tenant:acme`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      type Figures = { spent: number; held: number; pending: number };
      const { balances } = (await res.json()) as { balances: { tokens?: Figures; money?: Figures }[] };
      const figures = (f: Figures | undefined) => ({ spent: f!.spent, held: f!.held, pending: f!.pending });
      return { tokens: figures(balances[0]!.tokens), money: figures(balances[1]!.money) };
    };
    const message = () => client.messages.create({ model: "via-anthropic", max_tokens: 16, messages: [{ role: "user", content: "hi" }] }).withResponse();
    // The ledger learns a scope's limits with its first reservation: a message first, settled.
    await message();
    await expect.poll(async () => (await balance()).tokens.held, { timeout: 5000 }).toBe(0);
    const before = await balance();
    expect(before.tokens.spent).toBeGreaterThan(0);
    for (const model of ["via-anthropic", "via-openai", "via-dead"]) {
      const { response } = await client.messages.countTokens(countBody(model)).withResponse();
      expect(response.headers.get("x-sluice-budget-remaining")).toBeNull();
    }
    await Promise.all(Array.from({ length: 10 }, () => client.messages.countTokens(countBody("via-anthropic"))));
    expect(await balance()).toEqual(before);

    // The control: a message on the same key is charged, so the balance above could have moved.
    const { response } = await message();
    expect(response.headers.get("x-sluice-budget-remaining")).toMatch(/project:research\/counted;tokens=\d+/);
    await expect.poll(async () => (await balance()).tokens.spent, { timeout: 5000 }).toBeGreaterThan(before.tokens.spent);
  });
});

describe("unknown paths on the Anthropic surface", () => {
  it("answer 404 in Anthropic's envelope, which the SDK raises as NotFoundError", async () => {
    const batches = await caught(
      client.messages.batches.create({ requests: [{ custom_id: "a", params: { model: "via-anthropic", max_tokens: 8, messages: [{ role: "user", content: "hi" }] } }] }),
    );
    expect(batches).toBeInstanceOf(Anthropic.NotFoundError);
    expect(batches.error).toMatchObject({ type: "error", error: { type: "not_found_error" } });
    expect((batches.error as any).error.message).toContain("/v1/messages/batches");

    // Without anthropic-version too: the path alone is Anthropic's.
    for (const [method, path] of [["GET", "/v1/messages/xyz"], ["POST", "/v1/messages/batches"], ["POST", "/v1/complete"]] as const) {
      const res = await fetch(`${gateway.publicUrl}${path}`, { method, headers: { authorization: `Bearer ${KEYS.budgeted}`, "content-type": "application/json" }, body: method === "POST" ? "{}" : undefined });
      expect(res.status, path).toBe(404);
      expect(res.headers.get("x-sluice-error-code")).toBe("not_found");
      expect(await res.json(), path).toMatchObject({ type: "error", error: { type: "not_found_error" } });
    }
    // The count's path takes only POST, and says so in Anthropic's envelope.
    const get = await fetch(`${gateway.publicUrl}/v1/messages/count_tokens`, { headers: { authorization: `Bearer ${KEYS.budgeted}` } });
    expect(get.status).toBe(405);
    expect(await get.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
    // Elsewhere an OpenAI client still reads OpenAI's envelope.
    const openai = await fetch(`${gateway.publicUrl}/v1/nope`, { headers: { authorization: `Bearer ${KEYS.budgeted}` } });
    expect(openai.status).toBe(404);
    expect(await openai.json()).toMatchObject({ error: { type: "invalid_request_error", code: "not_found" } });
  });
});
