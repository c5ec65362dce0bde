import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEMO_KEY, LIMITED_KEY, startStack, type Stack } from "./support/stack.ts";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.stop();
});

const url = () => `${stack.gateway.publicUrl}/v1/chat/completions`;
const post = (body: string, headers: Record<string, string> = {}) =>
  fetch(url(), { method: "POST", headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json", ...headers }, body });
const valid = JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: "hi" }] });

async function expectError(res: Response, status: number, code: string, param?: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toContain("application/json");
  const body = (await res.json()) as { error: { message: string; type: string; code: string; param: string | null } };
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe("string");
  expect(body.error.message.length).toBeGreaterThan(0);
  if (param !== undefined) expect(body.error.param).toBe(param);
  return body.error;
}

describe("bad input gets a clear OpenAI-style error and the gateway keeps serving", () => {
  it("malformed JSON → 400 invalid_json", async () => {
    const e = await expectError(await post("{not json"), 400, "invalid_json");
    expect(e.type).toBe("invalid_request_error");
  });

  it("wrong content type → 415", async () => {
    await expectError(await post(valid, { "content-type": "text/plain" }), 415, "unsupported_media_type");
  });

  it("unknown parameter → 400 naming it", async () => {
    const e = await expectError(await post(JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: "x" }], temprature: 1 })), 400, "invalid_request", "temprature");
    expect(e.message).toContain("temprature");
  });

  it("missing messages → 400 naming the parameter", async () => {
    await expectError(await post(JSON.stringify({ model: "sluice-chat" })), 400, "invalid_request", "messages");
  });

  it("oversized body → 413", async () => {
    const big = JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: "x".repeat(5 * 1024 * 1024) }] });
    await expectError(await post(big), 413, "request_too_large");
  });

  it("too deeply nested JSON → 400", async () => {
    await expectError(await post(`${"[".repeat(200)}${"]".repeat(200)}`), 400, "json_too_deep");
  });

  it("too many headers → 431", async () => {
    const headers: Record<string, string> = {};
    for (let i = 0; i < 120; i++) headers[`x-pad-${i}`] = "1";
    await expectError(await post(valid, headers), 431, "headers_too_large");
  });

  it("unknown model → 404 NotFoundError in the official client", async () => {
    const err = await stack.client.chat.completions.create({ model: "gpt-nope", messages: [{ role: "user", content: "x" }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect((err as InstanceType<typeof OpenAI.NotFoundError>).code).toBe("model_not_found");
  });

  it("model not allowed for the key → 403 PermissionDeniedError", async () => {
    const limited = new OpenAI({ apiKey: LIMITED_KEY, baseURL: `${stack.gateway.publicUrl}/v1`, maxRetries: 0 });
    const err = await limited.chat.completions.create({ model: "sluice-large", messages: [{ role: "user", content: "x" }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.PermissionDeniedError);
  });

  it("missing or invalid key → 401 AuthenticationError; x-api-key works too", async () => {
    await expectError(await fetch(url(), { method: "POST", headers: { "content-type": "application/json" }, body: valid }), 401, "missing_api_key");
    const bad = new OpenAI({ apiKey: "sk-wrong", baseURL: `${stack.gateway.publicUrl}/v1`, maxRetries: 0 });
    expect(await bad.models.list().catch((e: unknown) => e)).toBeInstanceOf(OpenAI.AuthenticationError);
    const ok = await fetch(url(), { method: "POST", headers: { "x-api-key": DEMO_KEY, "content-type": "application/json" }, body: valid });
    expect(ok.status).toBe(200);
  });

  it("wrong method and unknown path get protocol errors", async () => {
    await expectError(await fetch(url(), { headers: { authorization: `Bearer ${DEMO_KEY}` } }), 405, "method_not_allowed");
    await expectError(await fetch(`${stack.gateway.publicUrl}/v1/nothing-here`), 404, "not_found");
  });

  it("still serves a normal request after all of that", async () => {
    const res = await stack.client.chat.completions.create({ model: "sluice-chat", messages: [{ role: "user", content: "still there?" }] });
    expect(res.choices[0]?.message.content?.length).toBeGreaterThan(0);
    const health = await fetch(`${stack.gateway.publicUrl}/health`);
    expect(await health.json()).toEqual({ status: "ok" });
    const ready = await fetch(`${stack.gateway.publicUrl}/ready`);
    expect(await ready.json()).toEqual({ status: "ready" });
  });
});
