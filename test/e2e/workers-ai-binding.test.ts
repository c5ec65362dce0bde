/**
 * A Workers AI backend end to end: the gateway on workerd with a real Workers AI binding — the
 * runtime's own binding code, as wrangler binds `[ai]` — whose requests reach a stand-in Workers
 * AI service on loopback instead of Cloudflare's. The official clients call the gateway; the
 * stand-in sees what the binding sends (the model, `{inputs, options}`) and answers as the service
 * does: JSON outputs, SSE streams, and `{internalCode, …}` errors with their statuses.
 */
import Anthropic from "@anthropic-ai/sdk";
import type { IncomingMessage, ServerResponse } from "node:http";
import OpenAI from "openai";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, type RunningGateway } from "../../local-stack/stack.ts";
import { startLoopbackServer, type LoopbackServer } from "./support/loopback-server.ts";
import { ADMIN_TOKEN, allowingSimulators, bundledConfig, DEMO_KEY, expectNothingLeft } from "./support/stack.ts";

const SMALL = "@cf/meta/llama-3.1-8b-instruct";
const LARGE = "@cf/meta/llama-3.3-70b-instruct-fp8-fast";
const EMBED = "@cf/baai/bge-base-en-v1.5";

/** What the stand-in service received: the model the binding named and the body it sent. */
interface Received {
  readonly model: string | undefined;
  readonly path: string;
  readonly inputs: any;
  readonly options: any;
}

let service: LoopbackServer;
let gateway: RunningGateway;
const received: Received[] = [];

const lastUser = (inputs: any): string => String([...(inputs.messages ?? [])].reverse().find((m: any) => m.role === "user")?.content ?? "");

/** Answers as Workers AI answers its binding. */
async function workersAi(req: IncomingMessage, body: Buffer, res: ServerResponse): Promise<void> {
  const { inputs, options } = JSON.parse(body.toString("utf8"));
  const model = req.headers["cf-consn-model-id"] as string | undefined;
  received.push({ model, path: req.url ?? "", inputs, options });
  if (model === EMBED) {
    const texts: string[] = typeof inputs.text === "string" ? [inputs.text] : inputs.text;
    // Exact in float32, which the gateway keeps vectors in.
    const data = texts.map((t) => [t.length, t.charCodeAt(0) / 128, 0.5]);
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ shape: [texts.length, 3], data, pooling: "mean" }));
    return;
  }
  if (model === SMALL && lastUser(inputs).includes("[busy]")) {
    res.writeHead(429, { "content-type": "application/json" }).end(JSON.stringify({ internalCode: 3040, name: "AiError", message: "Capacity temporarily exceeded", description: "Capacity temporarily exceeded, please try again." }));
    return;
  }
  const answer = `${model === LARGE ? "large" : "small"} says hi`;
  if (inputs.stream) {
    res.writeHead(200, { "content-type": "text/event-stream" });
    for (const word of answer.split(/(?= )/)) res.write(`data: ${JSON.stringify({ response: word })}\n\n`);
    res.end(`data: ${JSON.stringify({ response: "", usage: { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 } })}\n\ndata: [DONE]\n\n`);
    return;
  }
  res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ response: answer, usage: { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 } }));
}

beforeAll(async () => {
  service = await startLoopbackServer(workersAi);
  const backends = {
    version: 1,
    backends: [
      { name: "workers-ai", protocol: "workers-ai", binding: "AI", capabilities: ["chat", "streaming", "stream-usage", "tools", "embeddings"] },
      // Workers AI has no moderations or log-probabilities: the bundled moderation model's pool and the cascade's are an HTTP backend these tests never call.
      { name: "moderation", protocol: "openai-chat", baseUrl: `${service.origin}/v1`, capabilities: ["chat", "streaming", "stream-usage", "logprobs", "moderations"] },
    ],
    pools: [
      { name: "sim-small", members: [{ backend: "workers-ai", model: SMALL }] },
      { name: "sim-large", members: [{ backend: "workers-ai", model: LARGE }] },
      { name: "sim-embed", members: [{ backend: "workers-ai", model: EMBED }] },
      { name: "sim-moderate", members: [{ backend: "moderation", model: "moderate-upstream" }] },
      { name: "sim-small-scored", members: [{ backend: "moderation", model: "sim-small" }] },
      { name: "sim-large-scored", members: [{ backend: "moderation", model: "sim-large" }] },
    ],
  };
  const gatewayConfig = allowingSimulators(bundledConfig("gateway"), service.origin);
  gatewayConfig.breaker = { enabled: false };
  gateway = await startGateway({
    adminToken: ADMIN_TOKEN,
    config: { backends: stringify(backends), gateway: stringify(gatewayConfig) },
    workersAiBindings: { AI: new URL(service.origin).host },
  });
});

afterAll(async () => {
  try {
    if (gateway) await expectNothingLeft(gateway.adminUrl);
  } finally {
    await gateway?.stop();
    await service?.close();
  }
});

const openai = () => new OpenAI({ apiKey: DEMO_KEY, baseURL: `${gateway.publicUrl}/v1`, maxRetries: 0 });

describe("a Workers AI backend through the Worker's binding", () => {
  it("answers a chat with the model's text and usage; the binding ran the member's model with scoped-prompt inputs", async () => {
    received.length = 0;
    const r = await openai().chat.completions.create({ model: "sluice-chat", messages: [{ role: "system", content: "Be kind." }, { role: "user", content: "Hello" }], max_tokens: 32 });
    expect(r.choices[0]!.message.content).toBe("small says hi");
    expect(r.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 3 });
    expect(received).toHaveLength(1);
    expect(received[0]).toMatchObject({ model: SMALL, path: "/run?version=3", inputs: { messages: [{ role: "system", content: "Be kind." }, { role: "user", content: "Hello" }], max_tokens: 32 }, options: { returnRawResponse: true } });
  });

  it("streams to an Anthropic client", async () => {
    const client = new Anthropic({ apiKey: DEMO_KEY, baseURL: gateway.publicUrl, maxRetries: 0 });
    const stream = client.messages.stream({ model: "sluice-chat", max_tokens: 64, messages: [{ role: "user", content: "Hello" }] });
    const message = await stream.finalMessage();
    expect(message.content).toEqual([expect.objectContaining({ type: "text", text: "small says hi" })]);
    expect(message.usage.output_tokens).toBe(3);
    expect(received.at(-1)!.inputs.stream).toBe(true);
  });

  it("takes a 429 (3040, out of capacity) as a refusal before any work and falls back to the next tier", async () => {
    received.length = 0;
    const { data, response } = await openai().chat.completions.create({ model: "sluice-chat", messages: [{ role: "user", content: "Hello [busy]" }] }).withResponse();
    expect(data.choices[0]!.message.content).toBe("large says hi");
    expect(received.map((r) => r.model)).toEqual([SMALL, LARGE]);
    expect(response.headers.get("x-sluice-attempts")!.split(",")).toHaveLength(2);
  });

  it("embeds a batch through the same binding, vectors in input order", async () => {
    received.length = 0;
    const r = await openai().embeddings.create({ model: "sluice-embed", input: ["alpha", "be"], encoding_format: "float" });
    expect(r.data.map((d) => d.embedding)).toEqual([
      [5, 97 / 128, 0.5],
      [2, 98 / 128, 0.5],
    ]);
    expect(received).toEqual([expect.objectContaining({ model: EMBED, inputs: { text: ["alpha", "be"] } })]);
  });
});
