/**
 * Azure OpenAI fidelity, proven with openai's own `AzureOpenAI` client pointed straight at the
 * simulator: buffered and streamed answers, tool calls, errors (quota with `retry-after-ms`, a
 * wrong key, a missing API version) and Entra ID tokens from the fake token endpoint.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AzureOpenAI, APIError, AuthenticationError, RateLimitError } from "openai";
import type { Simulator } from "../../simulator/server.ts";
import { requests, start } from "./helpers.ts";

const KEY = "azure-test-key";
const API_VERSION = "2024-10-21";
const CLIENT = { clientId: "sim-app", clientSecret: "sim-app-secret" };

let sim: Simulator;

beforeAll(async () => {
  sim = await start({ apiKey: KEY, entraClient: CLIENT });
});
afterAll(() => sim.close());

const azure = (over: { apiKey?: string; azureADTokenProvider?: () => Promise<string> } = { apiKey: KEY }) =>
  new AzureOpenAI({ endpoint: sim.url, apiVersion: API_VERSION, deployment: "gpt-4o-prod", maxRetries: 0, timeout: 10_000, ...over });

/** Mints a token from the fake Entra endpoint as an application would. */
async function entraToken(secret = CLIENT.clientSecret, headers: Record<string, string> = {}): Promise<Response> {
  const form = new URLSearchParams({ grant_type: "client_credentials", client_id: CLIENT.clientId, client_secret: secret, scope: "https://cognitiveservices.azure.com/.default" });
  return fetch(`${sim.url}/contoso/oauth2/v2.0/token`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", ...headers }, body: form });
}

describe("Azure OpenAI chat completions", () => {
  it("answers a buffered chat at the deployment's address with usage and Azure's filter results", async () => {
    const { data, response } = await azure().chat.completions.create({ model: "ignored", messages: [{ role: "user", content: "Hello" }] }).withResponse();
    expect(data.object).toBe("chat.completion");
    expect(data.model).toBe("gpt-4o-prod");
    expect(data.choices[0]!.message.content).toMatch(/\S/);
    expect(data.usage!.completion_tokens).toBeGreaterThan(0);
    expect((data as unknown as { prompt_filter_results: unknown[] }).prompt_filter_results).toHaveLength(1);
    expect(response.headers.get("apim-request-id")).toMatch(/^req_/);
    const [seen] = await requests(sim, 1);
    expect(seen).toMatchObject({ method: "POST", path: "/openai/deployments/gpt-4o-prod/chat/completions", query: `api-version=${API_VERSION}` });
  });

  it("streams chunks the client reads, the filter chunk first and usage last", async () => {
    const stream = await azure().chat.completions.create({ model: "ignored", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "Hello" }] });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks[0]!.choices).toEqual([]);
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
    expect(text).toMatch(/\S/);
    expect(chunks.at(-1)!.usage!.completion_tokens).toBeGreaterThan(0);
  });

  it("calls a tool", async () => {
    const r = await azure().chat.completions.create({
      model: "ignored",
      messages: [{ role: "user", content: "Weather in Paris? [[sim tool=get_weather]]" }],
      tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }],
    });
    expect(r.choices[0]!.finish_reason).toBe("tool_calls");
    const call = r.choices[0]!.message.tool_calls![0]!;
    expect(call.type === "function" && JSON.parse(call.function.arguments)).toHaveProperty("city");
  });

  it("refuses over quota with 429, retry-after-ms and Azure's envelope", async () => {
    const err = await azure()
      .chat.completions.create({ model: "ignored", messages: [{ role: "user", content: "Hi [[sim status=429 retry-after-ms=250]]" }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitError);
    const e = err as RateLimitError;
    expect(e.headers?.get("retry-after-ms")).toBe("250");
    expect(e.headers?.get("retry-after")).toBe("1");
    expect(e.code).toBe("429");
    expect(e.message).toContain("exceeded call rate limit");
  });

  it("refuses a wrong key with 401 and a missing API version as an unknown resource", async () => {
    await expect(azure({ apiKey: "wrong" }).chat.completions.create({ model: "x", messages: [{ role: "user", content: "Hi" }] })).rejects.toBeInstanceOf(AuthenticationError);
    const res = await fetch(`${sim.url}/openai/deployments/gpt-4o-prod/chat/completions`, { method: "POST", headers: { "api-key": KEY, "content-type": "application/json" }, body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }] }) });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: { code: "404", message: "Resource not found" } });
  });

  it("accepts an Entra ID token the token endpoint issued, and refuses one it did not", async () => {
    const minted = await entraToken();
    expect(minted.status).toBe(200);
    const body = (await minted.json()) as { access_token: string; expires_in: number; token_type: string };
    expect(body).toMatchObject({ token_type: "Bearer", expires_in: 3599 });
    const ok = await azure({ azureADTokenProvider: async () => body.access_token }).chat.completions.create({ model: "x", messages: [{ role: "user", content: "Hi" }] });
    expect(ok.choices[0]!.message.content).toMatch(/\S/);
    const err = await azure({ azureADTokenProvider: async () => "forged" }).chat.completions.create({ model: "x", messages: [{ role: "user", content: "Hi" }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    expect((err as APIError).status).toBe(401);
    // The history keeps the grant, never the client secret.
    const tokenRequest = (await requests(sim)).find((r) => r.path === "/contoso/oauth2/v2.0/token")!;
    expect(JSON.stringify(tokenRequest)).not.toContain(CLIENT.clientSecret);
  });

  it("lists the resource's models behind the key and the API version (what a health probe asks)", async () => {
    const ok = await fetch(`${sim.url}/openai/models?api-version=${API_VERSION}`, { headers: { "api-key": KEY } });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { data: unknown[] }).data.length).toBeGreaterThan(0);
    expect((await fetch(`${sim.url}/openai/models?api-version=${API_VERSION}`, { headers: { "api-key": "wrong" } })).status).toBe(401);
    expect((await fetch(`${sim.url}/openai/models`, { headers: { "api-key": KEY } })).status).toBe(404);
  });

  it("issues short-lived tokens and fails on request, through knobs scoped to its path", async () => {
    const short = (await (await entraToken(CLIENT.clientSecret, { "x-sim-token-expires-in": "1" })).json()) as { access_token: string; expires_in: number };
    expect(short.expires_in).toBe(1);
    const client = azure({ azureADTokenProvider: async () => short.access_token });
    expect((await client.chat.completions.create({ model: "x", messages: [{ role: "user", content: "Hi" }] })).choices).toHaveLength(1);
    // Expired: the deployment refuses it (polled, never a fixed sleep).
    for (let i = 0; i < 100; i++) {
      const e = await client.chat.completions.create({ model: "x", messages: [{ role: "user", content: "Hi" }] }).catch((err: unknown) => err);
      if (e instanceof APIError) {
        expect(e.status).toBe(401);
        break;
      }
      expect(i).toBeLessThan(99);
      await new Promise((r) => setTimeout(r, 25));
    }
    const down = await entraToken(CLIENT.clientSecret, { "x-sim-status": "503", "x-sim-only-path": "/contoso/oauth2/v2.0/token" });
    expect(down.status).toBe(503);
    expect(await down.json()).toMatchObject({ error: "temporarily_unavailable" });
    // Without only-path naming it, a status knob is the chat's, not the token endpoint's.
    expect((await entraToken(CLIENT.clientSecret, { "x-sim-status": "503" })).status).toBe(200);
  });

  it("refuses a wrong client secret as Entra does", async () => {
    const res = await entraToken("nope");
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ error: "invalid_client" });
  });
});
