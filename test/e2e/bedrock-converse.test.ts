/**
 * A Bedrock backend end to end: the gateway on workerd speaks Converse and ConverseStream to the
 * simulator, which verifies every SigV4 signature as AWS does (over the bytes received), answers in
 * Bedrock's JSON and binary event stream, and throttles as Bedrock does. The official OpenAI and
 * Anthropic clients call the gateway.
 */
import Anthropic from "@anthropic-ai/sdk";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { secretsNamed } from "../../cli/config-dir.ts";
import { startGateway, type RunningGateway } from "../../local-stack/stack.ts";
import { loadConfig } from "../../src/config/load-config.ts";
import { startSimulator, type Simulator } from "../../simulator/server.ts";
import type { RecordedRequest } from "../../simulator/stats.ts";
import { ADMIN_TOKEN, allowingSimulators, bundledConfig, DEMO_KEY, expectNothingLeft } from "./support/stack.ts";

const SMALL = "anthropic.claude-3-5-haiku-20241022-v1:0";
const LARGE = "meta.llama3-70b-instruct-v1:0";
const AWS = { accessKeyId: "AKIAE2EBEDROCK000001", secretAccessKey: "e2e/bedrock+secret000000000000000000000" };
/** The same access key id with a secret that is not its own: every signature made with it is wrong. */
const WRONG_SECRET = "e2e/bedrock+not-the-secret0000000000000";
const EMAIL = "ada.lovelace@example.org";

let sim: Simulator;
let gateway: RunningGateway;
let texts: { backends: string; gateway: string; publication: string };

async function recorded(): Promise<RecordedRequest[]> {
  return ((await (await fetch(`${sim.url}/__sim/requests`)).json()) as { requests: RecordedRequest[] }).requests;
}

beforeAll(async () => {
  sim = await startSimulator({ host: "127.0.0.1", port: 0, aws: AWS });
  const backends = {
    version: 1,
    backends: [
      {
        name: "bedrock",
        protocol: "bedrock-converse",
        baseUrl: sim.url,
        region: "us-east-1",
        awsCredential: { accessKeyId: "BEDROCK_KEY_ID", secretAccessKey: "BEDROCK_SECRET" },
        capabilities: ["chat", "streaming", "stream-usage", "tools"],
      },
      {
        name: "bedrock-wrong-secret",
        protocol: "bedrock-converse",
        baseUrl: sim.url,
        region: "us-east-1",
        awsCredential: { accessKeyId: "BEDROCK_KEY_ID", secretAccessKey: "BEDROCK_WRONG_SECRET" },
        capabilities: ["chat", "streaming", "stream-usage", "tools"],
      },
      // Converse has no embeddings, moderations or log-probabilities: the bundled publication's pools for them (the cascade's too) are an OpenAI-style backend these tests never call.
      { name: "openai-style", protocol: "openai-chat", baseUrl: `${sim.url}/v1`, capabilities: ["chat", "streaming", "stream-usage", "logprobs", "embeddings", "moderations"] },
    ],
    pools: [
      { name: "sim-small", members: [{ backend: "bedrock", model: SMALL }] },
      { name: "sim-large", members: [{ backend: "bedrock", model: LARGE }] },
      { name: "sim-embed", members: [{ backend: "openai-style", model: "embed" }] },
      { name: "sim-moderate", members: [{ backend: "openai-style", model: "moderate" }] },
      { name: "sim-small-scored", members: [{ backend: "openai-style", model: "sim-small" }] },
      { name: "sim-large-scored", members: [{ backend: "openai-style", model: "sim-large" }] },
      { name: "wrong-secret", members: [{ backend: "bedrock-wrong-secret", model: SMALL }] },
    ],
  };
  const publication = bundledConfig("publication");
  publication.models.push({ id: "chat-wrong-secret", activeRevision: 1, revisions: [{ revision: 1, pool: "wrong-secret", requires: ["chat"], price: publication.models[0].revisions[0].price }] });
  publication.entrypoints.push(
    // A healthy second tier and attempts to spare: a refused credential must still not be retried.
    { name: "wrong-secret-first", default: [["chat-wrong-secret"], ["chat-large"]], retry: { maxAttempts: 3 } },
    { name: "redacted", plugins: ["redact-pii"], default: [["chat-small"]] },
  );
  const gatewayConfig = allowingSimulators(bundledConfig("gateway"), sim.url);
  gatewayConfig.breaker = { enabled: false };
  texts = { backends: stringify(backends), gateway: stringify(gatewayConfig), publication: stringify(publication) };
  gateway = await startGateway({
    adminToken: ADMIN_TOKEN,
    config: { backends: texts.backends, gateway: texts.gateway, publication: texts.publication },
    secrets: { BEDROCK_KEY_ID: AWS.accessKeyId, BEDROCK_SECRET: AWS.secretAccessKey, BEDROCK_WRONG_SECRET: WRONG_SECRET },
  });
});

afterAll(async () => {
  try {
    if (gateway) await expectNothingLeft(gateway.adminUrl);
  } finally {
    await gateway?.stop();
    await sim?.close();
  }
});

const openai = () => new OpenAI({ apiKey: DEMO_KEY, baseURL: `${gateway.publicUrl}/v1`, maxRetries: 0 });

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

describe("a Bedrock backend over Converse", () => {
  it("is among what `sluice serve` binds and requires: the access key's secrets, by the names the backend gives", () => {
    const named = secretsNamed(loadConfig(texts));
    expect(named.filter((n) => n.name.startsWith("BEDROCK_"))).toEqual([
      { name: "BEDROCK_KEY_ID", namedBy: "backends.yaml: backends[0].awsCredential.accessKeyId (bedrock)" },
      { name: "BEDROCK_SECRET", namedBy: "backends.yaml: backends[0].awsCredential.secretAccessKey (bedrock)" },
      { name: "BEDROCK_WRONG_SECRET", namedBy: "backends.yaml: backends[1].awsCredential.secretAccessKey (bedrock-wrong-secret)" },
    ]);
  });

  it("`sluice backends list` names the access key's secrets and the region, never their values", { timeout: 120_000 }, () => {
    const cli = fileURLToPath(new URL("../../bin/sluice.js", import.meta.url));
    const r = spawnSync(process.execPath, [cli, "backends", "list", "--admin", gateway.adminUrl], { encoding: "utf8", env: { ...process.env, SLUICE_ADMIN_TOKEN: ADMIN_TOKEN }, timeout: 100_000 });
    expect(r.status).toBe(0);
    const row = r.stdout.split("\n").find((l) => l.startsWith("bedrock "));
    expect(row).toContain("BEDROCK_KEY_ID, BEDROCK_SECRET (sigv4 us-east-1)");
    expect(r.stdout).not.toContain(AWS.secretAccessKey);
    expect(r.stdout).not.toContain(AWS.accessKeyId);
  });

  it("answers a chat: signed Converse to the member's model (its id one encoded segment), text and usage back", async () => {
    await fetch(`${sim.url}/__sim/reset`, { method: "POST" });
    const r = await openai().chat.completions.create({ model: "sluice-chat", messages: [{ role: "system", content: "Be kind." }, { role: "user", content: "Hello [[sim tokens=4]]" }], max_tokens: 32 });
    expect(r.choices[0]!.message.content!.split(" ").filter(Boolean)).toHaveLength(4);
    expect(r.choices[0]!.finish_reason).toBe("stop");
    expect(r.usage?.completion_tokens).toBe(4);
    const [req] = await recorded();
    expect(req!.path).toBe(`/model/${encodeURIComponent(SMALL)}/converse`);
    expect(req!.headers["authorization"]).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIAE2EBEDROCK000001\/\d{8}\/us-east-1\/bedrock\/aws4_request, /);
    expect(req!.body).toMatchObject({ system: [{ text: "Be kind." }], messages: [{ role: "user", content: [{ text: "Hello [[sim tokens=4]]" }] }], inferenceConfig: { maxTokens: 32 } });
  });

  it("streams ConverseStream's event stream to an OpenAI client, usage included", async () => {
    const stream = await openai().chat.completions.create({ model: "sluice-chat", messages: [{ role: "user", content: "Stream [[sim tokens=5 cached-tokens=2]]" }], stream: true, stream_options: { include_usage: true } });
    let text = "";
    let usage: OpenAI.CompletionUsage | undefined;
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      finish ??= chunk.choices[0]?.finish_reason;
      usage ??= chunk.usage ?? undefined;
    }
    expect(text.split(" ").filter(Boolean)).toHaveLength(5);
    expect(finish).toBe("stop");
    expect(usage).toMatchObject({ completion_tokens: 5, prompt_tokens_details: { cached_tokens: 2 } });
  });

  it("streams a tool call to an Anthropic client", async () => {
    const client = new Anthropic({ apiKey: DEMO_KEY, baseURL: gateway.publicUrl, maxRetries: 0 });
    const message = await client.messages
      .stream({
        model: "sluice-chat",
        max_tokens: 256,
        messages: [{ role: "user", content: "Weather in Oslo? [[sim tool=get_weather]]" }],
        tools: [{ name: "get_weather", input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }],
      })
      .finalMessage();
    expect(message.stop_reason).toBe("tool_use");
    const call = message.content.find((b) => b.type === "tool_use");
    expect(call).toMatchObject({ type: "tool_use", name: "get_weather", input: { city: expect.any(String) } });
  });

  it("takes a ThrottlingException as a refusal before any work and falls back to the next tier", async () => {
    await fetch(`${sim.url}/__sim/reset`, { method: "POST" });
    const { data, response } = await openai()
      .chat.completions.create({ model: "sluice-chat", messages: [{ role: "user", content: "Hello [[sim status=429 times=1 key=throttle-once]]" }] })
      .withResponse();
    expect(data.choices[0]!.message.content).toBeTruthy();
    expect((await recorded()).map((r) => r.path)).toEqual([`/model/${encodeURIComponent(SMALL)}/converse`, `/model/${encodeURIComponent(LARGE)}/converse`]);
    expect(response.headers.get("x-sluice-attempts")!.split(",")).toHaveLength(2);
  });

  it("a wrong secret: the simulator's InvalidSignatureException is the gateway's credential error (502), never the caller's, and never retried", async () => {
    await fetch(`${sim.url}/__sim/reset`, { method: "POST" });
    const res = await fetch(`${gateway.publicUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "wrong-secret-first", messages: [{ role: "user", content: "Hello" }] }),
    });
    expect(res.status).toBe(502);
    const body = (await res.json()) as { error: { code: string; type: string; message: string } };
    expect(body.error.code).toBe("upstream_auth_failed");
    expect(body.error.type).not.toBe("invalid_request_error");
    expect(body.error.message).toContain("the gateway's credentials");
    // One attempt, signed with the right key id (so the signature, not the key, was refused), and no other tier tried.
    const seen = await recorded();
    expect(seen.map((r) => r.path)).toEqual([`/model/${encodeURIComponent(SMALL)}/converse`]);
    expect(seen[0]!.headers["authorization"]).toContain(`Credential=${AWS.accessKeyId}/`);
    expect(((await (await fetch(`${sim.url}/__sim/stats`)).json()) as any).outcomes).toMatchObject({ rejected: 1 });
    expect(res.headers.get("x-sluice-attempts")!.split(",")).toHaveLength(1);
    const line = await accessLine(res.headers.get("x-request-id")!);
    expect(line.attempts).toEqual([expect.objectContaining({ backend: "bedrock-wrong-secret", status: 403, evidence: expect.objectContaining({ class: "client_error" }) })]);
  });

  it("signs the body it actually sends: a redacting plugin's prompt reaches Bedrock with a signature the simulator verified, buffered and streamed", async () => {
    for (const stream of [false, true]) {
      await fetch(`${sim.url}/__sim/reset`, { method: "POST" });
      const prompt = `Forward this to ${EMAIL} please [[sim echo-chars=4]]`;
      let text = "";
      if (stream) {
        for await (const chunk of await openai().chat.completions.create({ model: "redacted", stream: true, messages: [{ role: "user", content: prompt }] })) text += chunk.choices[0]?.delta.content ?? "";
      } else {
        text = (await openai().chat.completions.create({ model: "redacted", messages: [{ role: "user", content: prompt }] })).choices[0]!.message.content!;
      }
      // The simulator verified the signature over the bytes it received (it refuses any other), and echoed them.
      const [req] = await recorded();
      expect(req!.path).toBe(`/model/${encodeURIComponent(SMALL)}/${stream ? "converse-stream" : "converse"}`);
      const sent = JSON.stringify(req!.body);
      expect(sent).toContain("[EMAIL_1]");
      expect(sent).not.toContain(EMAIL);
      expect(((await (await fetch(`${sim.url}/__sim/stats`)).json()) as any).outcomes).toEqual(expect.objectContaining({ completed: 1 }));
      // The caller reads its own value back.
      expect(text).toBe(`Forward this to ${EMAIL} please`);
    }
  });
});
