/**
 * The simulator's Gemini wire (Gemini API and Vertex AI), checked by Google's own client,
 * `@google/genai`, pointed straight at it: buffered and streamed answers, usage, function calls,
 * thoughts, and a RESOURCE_EXHAUSTED refusal; plus the fake OAuth token endpoint, driven by the
 * gateway's own service-account token source.
 */

import { ApiError, FunctionCallingConfigMode, GoogleGenAI } from "@google/genai";
import { exportPKCS8, exportSPKI, generateKeyPair } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GatewayError } from "../../src/errors/gateway-error.ts";
import { googleServiceAccountTokenSource } from "../../src/invoker/auth/google-service-account.ts";
import { countPromptTokens } from "../../simulator/generate.ts";
import type { Simulator } from "../../simulator/server.ts";
import { requests, reset, start } from "./helpers.ts";

const API_KEY = "test-key";
const EMAIL = "gateway@sim-project.iam.gserviceaccount.com";
let sim: Simulator;
let pem: string;

beforeAll(async () => {
  const keys = await generateKeyPair("RS256", { extractable: true });
  pem = await exportPKCS8(keys.privateKey);
  sim = await start({ apiKey: API_KEY, googleServiceAccounts: { [EMAIL]: await exportSPKI(keys.publicKey) } });
});
afterAll(async () => {
  await sim.close();
});

/** Google's client against the simulator's Gemini API, no retries. */
function gemini(apiKey = API_KEY): GoogleGenAI {
  return new GoogleGenAI({ apiKey, httpOptions: { baseUrl: sim.url, apiVersion: "v1beta", retryOptions: { attempts: 1 } } });
}

/** Google's client against the simulator's Vertex AI, authorized with a bearer token. */
function vertex(token: string): GoogleGenAI {
  const authClient = { getRequestHeaders: async () => new Headers({ authorization: `Bearer ${token}` }) };
  return new GoogleGenAI({
    vertexai: true,
    project: "sim-project",
    location: "europe-west4",
    // The client asks its auth library for headers; this one hands over the token.
    googleAuthOptions: { authClient: authClient as never },
    httpOptions: { baseUrl: sim.url, apiVersion: "v1", retryOptions: { attempts: 1 } },
  });
}

const keyFile = (over: Record<string, unknown> = {}) => JSON.stringify({ type: "service_account", client_email: EMAIL, private_key: pem, private_key_id: "k1", token_uri: `${sim.url}/token`, ...over });
const source = (over: Record<string, unknown> = {}) => googleServiceAccountTokenSource({ credentials: keyFile(over), fetch, clock: { now: () => Date.now() } });

describe("gemini api through @google/genai", () => {
  it("answers a buffered generation with text, a finish reason and Google's usage split", async () => {
    const text = "Hello there [[sim tokens=4 reasoning-tokens=3 cached-tokens=2]]";
    const r = await gemini().models.generateContent({ model: "gemini-2.5-flash", contents: text, config: { systemInstruction: "Be brief.", thinkingConfig: { includeThoughts: true } } });
    const parts = r.candidates?.[0]?.content?.parts ?? [];
    expect(parts.filter((p) => p.thought).map((p) => p.text).join("").length).toBeGreaterThan(0);
    expect(r.text?.length).toBeGreaterThan(0);
    expect(r.candidates?.[0]?.finishReason).toBe("STOP");
    const prompt = countPromptTokens({ messages: [{ role: "system", text: "Be brief.", media: 0 }, { role: "user", text, media: 0 }], tools: [] });
    expect(r.usageMetadata).toEqual({ promptTokenCount: prompt, candidatesTokenCount: 4, thoughtsTokenCount: 3, cachedContentTokenCount: 2, totalTokenCount: prompt + 7 });
    const seen = (await requests(sim, 1))[0]!;
    expect(seen.path).toBe("/v1beta/models/gemini-2.5-flash:generateContent");
    expect(seen.headers["x-goog-api-key"]).toBe(API_KEY);
  });

  it("streams the same text in alt=sse chunks, the finish reason and usage in the last", async () => {
    const contents = "Stream please [[sim tokens=5]]";
    const whole = await gemini().models.generateContent({ model: "gemini-2.5-flash", contents });
    const chunks = [];
    for await (const c of await gemini().models.generateContentStream({ model: "gemini-2.5-flash", contents })) chunks.push(c);
    expect(chunks.length).toBeGreaterThan(2);
    expect(chunks.map((c) => c.text ?? "").join("")).toBe(whole.text);
    const last = chunks.at(-1)!;
    expect(last.candidates?.[0]?.finishReason).toBe("STOP");
    expect(last.usageMetadata).toEqual(whole.usageMetadata);
    expect((await requests(sim, 1))[0]!.query).toContain("alt=sse");
  });

  it("makes a function call with the declared name, arguments and a thought signature", async () => {
    const r = await gemini().models.generateContent({
      model: "gemini-3-flash-preview",
      contents: "Weather in Paris?",
      config: {
        tools: [{ functionDeclarations: [{ name: "weather", parametersJsonSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }] }],
        toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.ANY } },
      },
    });
    expect(r.functionCalls?.[0]?.name).toBe("weather");
    expect(typeof r.functionCalls?.[0]?.args?.city).toBe("string");
    expect(r.candidates?.[0]?.content?.parts?.[0]?.thoughtSignature).toEqual(expect.any(String));
  });

  it("refuses with RESOURCE_EXHAUSTED and a RetryInfo delay the client reads as an ApiError", async () => {
    const err = await gemini()
      .models.generateContent({ model: "gemini-2.5-flash", contents: "x [[sim status=429 retry-after=7]]" })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(429);
    const body = JSON.parse((err as ApiError).message) as { error: { status: string; details: { "@type": string; retryDelay: string }[] } };
    expect(body.error.status).toBe("RESOURCE_EXHAUSTED");
    expect(body.error.details).toContainEqual({ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "7s" });
  });

  it("ends a stream with Google's error envelope in a chunk under error-mid-stream, and refuses a wrong key", async () => {
    const res = await fetch(`${sim.url}/v1beta/models/m:streamGenerateContent?alt=sse`, {
      method: "POST",
      headers: { "x-goog-api-key": API_KEY, "content-type": "application/json" },
      body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "x [[sim fault=error-mid-stream status=503 cut-after=1]]" }] }] }),
    });
    const text = await res.text();
    expect(text).toMatch(/^data: .*\r\n\r\ndata: \{"error":\{"code":503,"message":".*","status":"UNAVAILABLE","details":\[.*RetryInfo.*\]\}\}\r\n\r\n$/s);
    const wrong = await gemini("nope").models.generateContent({ model: "m", contents: "x" }).then(
      () => undefined,
      (e: unknown) => e as ApiError,
    );
    expect(wrong?.status).toBe(400);
    expect(wrong?.message).toContain("API key not valid");
    // Google names an invalid key in ErrorInfo's reason, the field a client reads instead of the message.
    const body = JSON.parse(wrong!.message) as { error: { status: string; details: { "@type": string; reason?: string }[] } };
    expect(body.error.status).toBe("INVALID_ARGUMENT");
    expect(body.error.details).toContainEqual(expect.objectContaining({ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "API_KEY_INVALID" }));
  });

  it("lists its models at GET /v1beta/models behind the key, as Google's client reads them", async () => {
    const names = [];
    for await (const m of await gemini().models.list()) names.push(m.name);
    expect(names.length).toBeGreaterThan(0);
    expect(names.every((n) => n?.startsWith("models/"))).toBe(true);
    expect((await fetch(`${sim.url}/v1beta/models`, { headers: { "x-goog-api-key": "nope" } })).status).toBe(400);
  });
});

describe("vertex ai through @google/genai and the fake token endpoint", () => {
  it("mints a token for the service account and answers Vertex calls made with it", async () => {
    await reset(sim);
    const minted = await source().mint(new AbortController().signal);
    expect(minted.token).toMatch(/^ya29\.sim-/);
    expect(minted.expiresAt).toBeGreaterThan(Date.now() + 3500_000);
    const r = await vertex(minted.token).models.generateContent({ model: "gemini-2.5-pro", contents: "Hello Vertex [[sim tokens=3]]" });
    expect(r.text?.length).toBeGreaterThan(0);
    expect(r.usageMetadata?.candidatesTokenCount).toBe(3);
    const chunks = [];
    for await (const c of await vertex(minted.token).models.generateContentStream({ model: "gemini-2.5-pro", contents: "Hello Vertex [[sim tokens=3]]" })) chunks.push(c);
    expect(chunks.map((c) => c.text ?? "").join("")).toBe(r.text);
    const paths = (await requests(sim, 3)).map((q) => q.path);
    expect(paths).toContain("/v1/projects/sim-project/locations/europe-west4/publishers/google/models/gemini-2.5-pro:generateContent");
    expect(paths).toContain("/v1/projects/sim-project/locations/europe-west4/publishers/google/models/gemini-2.5-pro:streamGenerateContent");
  });

  it("answers the Gemini API with a service account's token too, and keeps the assertion out of its history", async () => {
    await reset(sim);
    const minted = await source().mint(new AbortController().signal);
    const res = await fetch(`${sim.url}/v1beta/models/gemini-2.5-flash:generateContent`, {
      method: "POST",
      headers: { authorization: `Bearer ${minted.token}`, "content-type": "application/json" },
      body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "x" }] }] }),
    });
    expect(res.status).toBe(200);
    const grant = (await requests(sim, 5)).find((q) => q.path === "/token")!;
    expect(grant.body).toEqual({ grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer", assertion: "[redacted]" });
  });

  it("refuses Vertex calls without a token it issued", async () => {
    for (const token of ["ya29.forged", ""]) {
      const err = await vertex(token).models.generateContent({ model: "gemini-2.5-pro", contents: "x" }).then(
        () => undefined,
        (e: unknown) => e as ApiError,
      );
      expect(err?.status, token).toBe(401);
      expect(err?.message).toContain("UNAUTHENTICATED");
    }
  });

  it("keeps issued tokens across a reset, as Entra's, and refuses them once revoked", async () => {
    const minted = await source().mint(new AbortController().signal);
    const ask = () =>
      vertex(minted.token)
        .models.generateContent({ model: "gemini-2.5-pro", contents: "x" })
        .then(
          () => 200,
          (e: unknown) => (e as ApiError).status,
        );
    await reset(sim);
    expect(await ask()).toBe(200);
    const revoked = await fetch(`${sim.url}/__sim/google-token`, { method: "DELETE" });
    expect(((await revoked.json()) as { revoked: number }).revoked).toBeGreaterThanOrEqual(1);
    expect(await ask()).toBe(401);
  });

  it("refuses an assertion signed by another key, or for an unknown account", async () => {
    const other = await generateKeyPair("RS256", { extractable: true });
    for (const over of [{ private_key: await exportPKCS8(other.privateKey) }, { client_email: "stranger@x.iam.gserviceaccount.com" }]) {
      const err = await source(over).mint(new AbortController().signal).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(GatewayError);
      expect((err as GatewayError).cause).toEqual({ tokenEndpoint: `${sim.url}/token`, status: 400, error: "invalid_grant" });
    }
  });

  it("fails every grant under the status knob and issues tokens that expire under expires-in", async () => {
    const put = (body: unknown) => fetch(`${sim.url}/__sim/google-token`, { method: "PUT", body: JSON.stringify(body) });
    expect((await put({ status: 503 })).status).toBe(200);
    const down = await source().mint(new AbortController().signal).then(
      () => undefined,
      (e: unknown) => e as GatewayError,
    );
    expect(down?.code).toBe("upstream_unreachable");
    expect(down?.cause).toEqual({ tokenEndpoint: `${sim.url}/token`, status: 503, error: "internal_failure" });
    expect((await put({ "expires-in": 1 })).status).toBe(200);
    const short = await source().mint(new AbortController().signal);
    expect(short.expiresAt - Date.now()).toBeLessThanOrEqual(1000);
    expect((await put({ "expires-in": 0 })).status).toBe(400);
    // Once it expired, Vertex refuses it: poll until it does (never a fixed sleep).
    let status = 200;
    for (let i = 0; i < 300 && status === 200; i++) {
      status = (await fetch(`${sim.url}/v1/projects/p/locations/l/publishers/google/models/m:generateContent`, { method: "POST", headers: { authorization: `Bearer ${short.token}` }, body: JSON.stringify({ contents: [{ parts: [{ text: "x" }] }] }) })).status;
      if (status === 200) await new Promise((r) => setTimeout(r, 20));
    }
    expect(status).toBe(401);
    await reset(sim);
  });
});
