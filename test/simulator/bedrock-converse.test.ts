/**
 * Bedrock Converse fidelity, proven with the official `@aws-sdk/client-bedrock-runtime` client
 * (SigV4 signing, the REST-JSON answers and errors, the binary event stream with its checksums),
 * and the simulator's SigV4 checks: a wrong secret, a skewed clock or a tampered body is refused
 * the way AWS refuses it, while the gateway's own signer is accepted.
 */

import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  BedrockRuntimeClient,
  ConverseCommand,
  ConverseStreamCommand,
  type ConverseStreamOutput,
  type Message,
} from "@aws-sdk/client-bedrock-runtime";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { signSigV4 } from "../../src/invoker/auth/aws-sigv4.ts";
import { createConverseStreamDecoder } from "../../src/protocol/bedrock-converse/stream.ts";
import type { NeutralEvent } from "../../src/protocol/neutral.ts";
import type { Simulator } from "../../simulator/server.ts";
import { requests, reset, start, stats } from "./helpers.ts";

const CREDENTIALS = { accessKeyId: "AKIASIMULATOR0000001", secretAccessKey: "sim/secret+KEY0000000000000000000000000" };
const MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0";

let sim: Simulator;
let bedrock: BedrockRuntimeClient;

/**
 * The SDK at the simulator. Its default handler for this client speaks HTTP/2 (for bidirectional
 * streams, which Converse does not use); the gateway's fetch, like the simulator, speaks HTTP/1.1.
 */
function sdk(over: Partial<ConstructorParameters<typeof BedrockRuntimeClient>[0]> = {}): BedrockRuntimeClient {
  return new BedrockRuntimeClient({ region: "us-east-1", endpoint: sim.url, credentials: CREDENTIALS, maxAttempts: 1, requestHandler: new NodeHttpHandler(), ...over });
}

beforeAll(async () => {
  sim = await start({ aws: CREDENTIALS });
  bedrock = sdk();
});
afterAll(async () => {
  bedrock.destroy();
  await sim.close();
});
beforeEach(() => reset(sim));

const say = (text: string): Message[] => [{ role: "user", content: [{ text }] }];

async function caught(promise: Promise<unknown>): Promise<Error & { $metadata?: { httpStatusCode?: number } }> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected a rejection");
}

async function collect(stream: AsyncIterable<ConverseStreamOutput> | undefined): Promise<ConverseStreamOutput[]> {
  const events: ConverseStreamOutput[] = [];
  for await (const e of stream ?? []) events.push(e);
  return events;
}

describe("Converse through the AWS SDK", () => {
  it("answers a buffered Converse with text, end_turn and usage split like Bedrock's", async () => {
    const out = await bedrock.send(
      new ConverseCommand({ modelId: MODEL, system: [{ text: "be brief" }], messages: say("Hello there [[sim tokens=5 cached-tokens=2]]"), inferenceConfig: { maxTokens: 100 } }),
    );
    const text = out.output?.message?.content?.map((b) => b.text ?? "").join("") ?? "";
    expect(text.split(" ").filter(Boolean).length).toBeGreaterThan(0);
    expect(out.stopReason).toBe("end_turn");
    expect(out.usage?.outputTokens).toBe(5);
    expect(out.usage?.cacheReadInputTokens).toBe(2);
    expect(out.usage?.totalTokens).toBe(out.usage!.inputTokens! + 2 + 5);
    const [req] = await requests(sim, 1);
    expect(req!.path).toBe("/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse");
  });

  it("streams ConverseStream events the SDK decodes: text deltas, stop, metadata usage", async () => {
    const out = await bedrock.send(new ConverseStreamCommand({ modelId: MODEL, messages: say("Stream please [[sim tokens=6]]") }));
    const events = await collect(out.stream);
    expect(events[0]?.messageStart?.role).toBe("assistant");
    const deltas = events.flatMap((e) => (e.contentBlockDelta?.delta?.text !== undefined ? [e.contentBlockDelta.delta.text] : []));
    expect(deltas).toHaveLength(6);
    expect(events.find((e) => e.messageStop)?.messageStop?.stopReason).toBe("end_turn");
    expect(events.at(-1)?.metadata?.usage?.outputTokens).toBe(6);
  });

  it("streams a tool call: contentBlockStart with the id and name, then input pieces that join into JSON", async () => {
    const out = await bedrock.send(
      new ConverseStreamCommand({
        modelId: MODEL,
        messages: say("Weather? [[sim tool=get_weather]]"),
        toolConfig: { tools: [{ toolSpec: { name: "get_weather", inputSchema: { json: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } } }] },
      }),
    );
    const events = await collect(out.stream);
    const start = events.find((e) => e.contentBlockStart)?.contentBlockStart;
    expect(start?.start?.toolUse?.name).toBe("get_weather");
    const input = events.flatMap((e) => (e.contentBlockDelta?.delta?.toolUse ? [e.contentBlockDelta.delta.toolUse.input ?? ""] : [])).join("");
    expect(JSON.parse(input)).toHaveProperty("city");
    expect(events.find((e) => e.messageStop)?.messageStop?.stopReason).toBe("tool_use");
  });

  it("answers reasoning when Claude's thinking is asked for", async () => {
    const out = await bedrock.send(
      new ConverseCommand({ modelId: MODEL, messages: say("Think [[sim reasoning-tokens=3]]"), additionalModelRequestFields: { thinking: { type: "enabled", budget_tokens: 1024 } } }),
    );
    const reasoning = out.output?.message?.content?.find((b) => b.reasoningContent)?.reasoningContent?.reasoningText;
    expect(reasoning?.text?.length).toBeGreaterThan(0);
    expect(reasoning?.signature).toBeTruthy();
  });

  it("refuses as ThrottlingException (429) and ServiceUnavailableException (503), which the SDK names", async () => {
    const throttled = await caught(bedrock.send(new ConverseCommand({ modelId: MODEL, messages: say("x [[sim status=429]]") })));
    expect(throttled.name).toBe("ThrottlingException");
    expect(throttled.$metadata?.httpStatusCode).toBe(429);
    const unavailable = await caught(bedrock.send(new ConverseCommand({ modelId: MODEL, messages: say("x [[sim status=503]]") })));
    expect(unavailable.name).toBe("ServiceUnavailableException");
  });

  it("ends a stream with an in-stream throttlingException the SDK throws", async () => {
    const out = await bedrock.send(new ConverseStreamCommand({ modelId: MODEL, messages: say("x [[sim fault=error-mid-stream status=429 cut-after=2]]") }));
    const err = await caught(collect(out.stream));
    expect(err.name).toBe("ThrottlingException");
  });

  it("refuses what Bedrock refuses, as ValidationException: a conversation that does not alternate, blank text, tool blocks without toolConfig", async () => {
    const notAlternating = await caught(bedrock.send(new ConverseCommand({ modelId: MODEL, messages: [...say("a"), ...say("b")] })));
    expect(notAlternating.name).toBe("ValidationException");
    expect(notAlternating.message).toMatch(/alternate/);
    expect((await caught(bedrock.send(new ConverseCommand({ modelId: MODEL, messages: say("  ") })))).message).toMatch(/blank/);
    const toolBlocks = await caught(
      bedrock.send(
        new ConverseCommand({
          modelId: MODEL,
          messages: [...say("a"), { role: "assistant", content: [{ toolUse: { toolUseId: "t", name: "f", input: {} } }] }],
        }),
      ),
    );
    expect(toolBlocks.message).toMatch(/toolConfig/);
  });
});

describe("SigV4 verification", () => {
  it("refuses a wrong secret as InvalidSignatureException (403), an unknown key as UnrecognizedClientException", async () => {
    const wrong = sdk({ credentials: { ...CREDENTIALS, secretAccessKey: "not-the-secret" } });
    const err = await caught(wrong.send(new ConverseCommand({ modelId: MODEL, messages: say("hi") })));
    expect(err.name).toBe("InvalidSignatureException");
    expect(err.$metadata?.httpStatusCode).toBe(403);
    wrong.destroy();
    const unknown = sdk({ credentials: { ...CREDENTIALS, accessKeyId: "AKIAUNKNOWN" } });
    expect((await caught(unknown.send(new ConverseCommand({ modelId: MODEL, messages: say("hi") })))).name).toBe("UnrecognizedClientException");
    unknown.destroy();
  });

  it("refuses a clock more than five minutes off as an expired signature", async () => {
    const skewed = sdk({ systemClockOffset: -10 * 60 * 1000 });
    const err = await caught(skewed.send(new ConverseCommand({ modelId: MODEL, messages: say("hi") })));
    expect(err.name).toBe("InvalidSignatureException");
    expect(err.message).toMatch(/Signature expired/);
    skewed.destroy();
    const ahead = sdk({ systemClockOffset: 10 * 60 * 1000 });
    expect((await caught(ahead.send(new ConverseCommand({ modelId: MODEL, messages: say("hi") })))).message).toMatch(/not yet current/);
    ahead.destroy();
  });

  it("accepts the gateway's signer over the bytes it sends, and refuses the same signature over a tampered body", async () => {
    const url = `${sim.url}/model/${encodeURIComponent(MODEL)}/converse`;
    const body = new TextEncoder().encode(JSON.stringify({ messages: say("signed by the gateway") }));
    const headers = { "content-type": "application/json" };
    const signed = await signSigV4({ method: "POST", url, headers, body, credentials: CREDENTIALS, region: "us-east-1", service: "bedrock", now: new Date() });
    const ok = await fetch(url, { method: "POST", headers: { ...headers, ...signed }, body });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { stopReason: string }).stopReason).toBe("end_turn");

    const tampered = new TextEncoder().encode(JSON.stringify({ messages: say("signed by the gateway!") }));
    const refused = await fetch(url, { method: "POST", headers: { ...headers, ...signed }, body: tampered });
    expect(refused.status).toBe(403);
    expect(refused.headers.get("x-amzn-errortype")).toBe("InvalidSignatureException");
    expect(await refused.json()).toEqual({ message: expect.stringMatching(/does not match the signature you provided/) });

    const withToken = await signSigV4({ method: "POST", url, headers, body, credentials: { ...CREDENTIALS, sessionToken: "tok" }, region: "us-east-1", service: "bedrock", now: new Date() });
    expect((await fetch(url, { method: "POST", headers: { ...headers, ...withToken }, body })).status).toBe(200);
    const s = await stats(sim);
    expect(s).toBeDefined();
  });

  it("refuses a request without a signature as MissingAuthenticationTokenException", async () => {
    const res = await fetch(`${sim.url}/model/m/converse`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(res.status).toBe(403);
    expect(res.headers.get("x-amzn-errortype")).toBe("MissingAuthenticationTokenException");
  });
});

describe("the gateway's decoder on the simulator's stream", () => {
  async function streamBytes(text: string): Promise<Uint8Array> {
    const url = `${sim.url}/model/${encodeURIComponent(MODEL)}/converse-stream`;
    const body = new TextEncoder().encode(JSON.stringify({ messages: say(text), additionalModelRequestFields: { thinking: { type: "enabled", budget_tokens: 1024 } } }));
    const headers = { "content-type": "application/json" };
    const signed = await signSigV4({ method: "POST", url, headers, body, credentials: CREDENTIALS, region: "us-east-1", service: "bedrock", now: new Date() });
    const res = await fetch(url, { method: "POST", headers: { ...headers, ...signed }, body });
    expect(res.headers.get("content-type")).toBe("application/vnd.amazon.eventstream");
    // What arrived before the end (a cut connection ends the read with an error).
    const chunks: Uint8Array[] = [];
    const reader = res.body!.getReader();
    try {
      for (let r = await reader.read(); !r.done; r = await reader.read()) chunks.push(r.value);
    } catch {
      // The cut itself.
    }
    return new Uint8Array(Buffer.concat(chunks));
  }
  function decode(chunks: readonly Uint8Array[]): NeutralEvent[] {
    const d = createConverseStreamDecoder();
    return [...chunks.flatMap((c) => [...d.bytes!(c)]), ...d.finish()];
  }

  it("decodes the same events at every byte cut, ending with the stop and the usage", async () => {
    const bytes = await streamBytes("Go [[sim tokens=4 reasoning-tokens=2 cached-tokens=3]]");
    const whole = decode([bytes]);
    expect(whole.filter((e) => e.type === "text")).toHaveLength(4);
    expect(whole.some((e) => e.type === "reasoning")).toBe(true);
    expect(whole.slice(-2)).toEqual([
      { type: "stop", reason: "end_turn" },
      { type: "usage", usage: expect.objectContaining({ outputTokens: 6, cachedInputTokens: 3, source: "provider" }) },
    ]);
    for (let cut = 0; cut <= bytes.length; cut++) expect(decode([bytes.subarray(0, cut), bytes.subarray(cut)])).toEqual(whole);
  });

  it("reads a cut stream as a cut", async () => {
    const bytes = await streamBytes("Go [[sim fault=cut-mid-stream cut-after=2]]");
    expect(decode([bytes]).at(-1)).toMatchObject({ type: "error", code: "upstream_stream_cut" });
  });
});
