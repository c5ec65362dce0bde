/**
 * Looper algorithms end to end: a real gateway (workerd) and the simulator on loopback, official
 * SDKs as clients. The simulator's `quality` knob makes a model sure or unsure of one prompt, so a
 * confidence cascade is driven both ways; every answer reaches OpenAI Chat, Responses and
 * Anthropic clients buffered and streamed.
 */
import { createHash } from "node:crypto";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { stringify } from "yaml";
import { startGateway, type RunningGateway } from "../../local-stack/stack.ts";
import { ADMIN_TOKEN, allowingSimulators, bundledConfig, expectNothingLeft, protocolBackend, startProtocolSimulator, type ProtocolSimulator } from "./support/stack.ts";

const KEY = "sk-e2e-looper";
const sha = (k: string) => createHash("sha256").update(k).digest("hex");
const PRICE = { version: "e2e-1", currency: "USD", inputPerMTok: 1, outputPerMTok: 2 };
const BOUNDS = { maxCalls: 4, maxParallel: 1, maxDepth: 1, maxTokens: 100_000, maxCostMicros: 1_000_000, maxTimeMs: 30_000 };
/** Two worst cases of the task test's steps: bound of the input bytes + 8, plus max_tokens. */
const TASK_PROMPT = "budgeted [[sim quality=0.1 fault=omit-usage]]";
const TASK_MAX_TOKENS = 30;
const WORST = 8 + Buffer.byteLength(TASK_PROMPT) + TASK_MAX_TOKENS;
/** Unsure small and mid models, a sure large one: a cascade asks all three. */
const UNSURE = "[[sim quality=sim-small:0.2,sim-mid:0.3,sim-large:0.95]]";

let sim: ProtocolSimulator;
let gateway: RunningGateway;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  sim = await startProtocolSimulator();
  const caps = ["chat", "streaming", "stream-usage", "tools", "logprobs"];
  const tiers = ["small", "mid", "large"];
  const backends = {
    version: 1,
    backends: [protocolBackend("openai-chat", sim.url, caps, "sim")],
    pools: tiers.map((t) => ({ name: `pool-${t}`, members: [{ backend: "sim", model: `sim-${t}` }] })),
  };
  const pub = bundledConfig("publication");
  pub.models = tiers.map((t) => ({ id: t, activeRevision: 1, revisions: [{ revision: 1, pool: `pool-${t}`, requires: ["chat", "logprobs"], price: PRICE }] }));
  pub.signals = [{ name: "prompt-tokens", kind: "context" }];
  // The bundled semantic cache names the bundled embeddings entrypoint, which this publication has not.
  pub.plugins = pub.plugins.filter((p: { model?: string }) => p.model === undefined);
  const always = { signal: "prompt-tokens", above: 0 };
  pub.entrypoints = [
    {
      name: "looper-cascade",
      default: [["large"]],
      decisions: [{ name: "cascade", when: always, models: [["small"], ["mid"], ["large"]], algorithm: { kind: "cascade", score: "avg_logprob", threshold: -0.5, bounds: BOUNDS } }],
    },
    {
      name: "looper-panel",
      default: [["large"]],
      decisions: [
        {
          name: "panel",
          when: always,
          models: [["small"], ["mid"], ["large"]],
          algorithm: { kind: "panel", quorum: 2, arbiter: { model: "large", prompt: "Question: {{question}}\n{{answers}}\nWrite the best answer. [[sim echo-chars=4]]" }, bounds: { ...BOUNDS, maxParallel: 3 } },
        },
      ],
    },
    {
      name: "looper-cached",
      default: [["large"]],
      decisions: [{ name: "cascade", when: always, models: [["small"], ["large"]], plugins: ["answers"], algorithm: { kind: "cascade", score: "avg_logprob", threshold: -0.5, bounds: BOUNDS } }],
    },
  ];
  pub.plugins = [...(pub.plugins ?? []), { name: "answers", kind: "cache", mode: "exact" }];
  pub.tenants = [
    {
      id: "acme",
      limits: { money: { limit: 100, currency: "USD", period: "30d" } },
      teams: [{ id: "agents", projects: [{ id: "loop", taskLimits: { tokens: { limit: 2 * WORST } } }] }],
      apiKeys: [{ id: "looper", sha256: sha(KEY), entrypoints: ["*"], chargeTo: "agents/loop" }],
    },
  ];
  const gw = allowingSimulators(bundledConfig("gateway"), sim.url);
  gw.breaker = { enabled: false };
  gateway = await startGateway({ adminToken: ADMIN_TOKEN, secrets: sim.secrets, config: { backends: stringify(backends), publication: stringify(pub), gateway: stringify(gw) } });
  openai = new OpenAI({ apiKey: KEY, baseURL: `${gateway.publicUrl}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: KEY, baseURL: gateway.publicUrl, maxRetries: 0 });
});

afterAll(async () => {
  try {
    if (gateway) await expectNothingLeft(gateway.adminUrl);
  } finally {
    await Promise.all([gateway?.stop(), sim?.stop()]);
  }
});

const served = async () => ((await (await fetch(`${sim.url}/__sim/stats`)).json()) as { total: number }).total;
/** A finished Response's text from its output items (a stream's `response.completed` has no `output_text` helper). */
const outputText = (r: OpenAI.Responses.Response) =>
  r.output.flatMap((item) => (item.type === "message" ? item.content.map((c) => (c.type === "output_text" ? c.text : "")) : [])).join("");
const simRequests = async (n: number) => ((await (await fetch(`${sim.url}/__sim/requests?limit=${n}`)).json()) as { requests: { body: any }[] }).requests;

describe("a cascade through the public listener", () => {
  it("escalates past unsure models to a sure one, tells the client, and each step asked for logprobs", async () => {
    const before = await served();
    const res = await openai.chat.completions.create({ model: "looper-cascade", max_tokens: 40, messages: [{ role: "user", content: `Explain tides. ${UNSURE}` }] }).withResponse();
    expect(res.response.headers.get("x-sluice-looper")).toBe("cascade; steps=3; accepted=large");
    expect(res.data.model).toBe("looper-cascade");
    expect(res.data.choices[0]!.message.content!.length).toBeGreaterThan(0);
    // logprobs were the gateway's own question: the client asked none and is shown none.
    expect(res.data.choices[0]!.logprobs).toBeNull();
    expect((await served()) - before).toBe(3);
    const seen = await simRequests(3);
    expect(seen.map((r) => [r.body.model, r.body.logprobs, r.body.stream])).toEqual([
      ["sim-small", true, undefined],
      ["sim-mid", true, undefined],
      ["sim-large", true, undefined],
    ]);
  });

  it("is cached like any answer: the run's accepted answer is stored, and a repeat is served with no step at all", async () => {
    const prompt = `What causes the seasons? ${UNSURE}`;
    const ask = (headers?: Record<string, string>) => openai.chat.completions.create({ model: "looper-cached", max_tokens: 40, messages: [{ role: "user", content: prompt }] }, { headers }).withResponse();
    const first = await ask();
    expect(first.response.headers.get("x-sluice-looper")).toBe("cascade; steps=2; accepted=large");
    expect(first.response.headers.get("x-sluice-cache")).toBeNull();
    // The store runs after the first answer is sent: ask (storing nothing) until it is there.
    await vi.waitFor(async () => expect((await ask({ "cache-control": "no-store" })).response.headers.get("x-sluice-cache")).toBe("hit"), { timeout: 10_000, interval: 50 });
    const before = await served();
    const hit = await ask();
    expect(hit.response.headers.get("x-sluice-cache")).toBe("hit");
    expect(hit.response.headers.get("x-sluice-looper")).toBeNull();
    expect(hit.data.choices[0]!.message.content).toBe(first.data.choices[0]!.message.content);
    expect(await served()).toBe(before);
  });

  it("stops at the threshold when the cheap model is sure", async () => {
    const before = await served();
    const res = await openai.chat.completions.create({ model: "looper-cascade", max_tokens: 40, messages: [{ role: "user", content: "Say hi. [[sim quality=0.9]]" }] }).withResponse();
    expect(res.response.headers.get("x-sluice-looper")).toBe("cascade; steps=1; accepted=small");
    expect((await served()) - before).toBe(1);
  });

  it("reaches OpenAI Chat, Responses and Anthropic clients, buffered and streamed, with the same answer", async () => {
    const prompt = `Name a colour. ${UNSURE}`;
    const chat = await openai.chat.completions.create({ model: "looper-cascade", max_tokens: 40, messages: [{ role: "user", content: prompt }] });
    const text = chat.choices[0]!.message.content!;
    let streamed = "";
    let finish: string | null | undefined;
    for await (const chunk of await openai.chat.completions.create({ model: "looper-cascade", max_tokens: 40, stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: prompt }] })) {
      streamed += chunk.choices[0]?.delta.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(streamed).toBe(text);
    expect(finish).toBe("stop");

    const responses = await openai.responses.create({ model: "looper-cascade", input: prompt, max_output_tokens: 40, store: false });
    expect(responses.output_text).toBe(text);
    const events: string[] = [];
    let done: OpenAI.Responses.Response | undefined;
    for await (const e of await openai.responses.create({ model: "looper-cascade", input: prompt, max_output_tokens: 40, store: false, stream: true })) {
      events.push(e.type);
      if (e.type === "response.completed") done = e.response;
    }
    expect(events[0]).toBe("response.created");
    expect(events.at(-1)).toBe("response.completed");
    expect(outputText(done!)).toBe(text);

    const message = await anthropic.messages.create({ model: "looper-cascade", max_tokens: 40, messages: [{ role: "user", content: prompt }] });
    expect(message.content).toEqual([{ type: "text", text, citations: null }].map(({ citations: _c, ...b }) => expect.objectContaining(b)));
    const final = await anthropic.messages.stream({ model: "looper-cascade", max_tokens: 40, messages: [{ role: "user", content: prompt }] }).finalMessage();
    expect(final.content.map((b) => (b.type === "text" ? b.text : "")).join("")).toBe(text);
    expect(final.stop_reason).toBe("end_turn");
  });

  it("under a task cap that fits exactly two steps, exactly two reach the simulator and the third is refused by budget", async () => {
    const before = await served();
    const res = await fetch(`${gateway.publicUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json", "x-sluice-task-id": "looper-task-1" },
      body: JSON.stringify({ model: "looper-cascade", max_tokens: TASK_MAX_TOKENS, messages: [{ role: "user", content: TASK_PROMPT }] }),
    });
    expect(res.status).toBe(429);
    expect(res.headers.get("x-sluice-error-code")).toBe("token_limit_exceeded");
    expect(res.headers.get("x-sluice-looper")).toBe("cascade; steps=3");
    const body = (await res.json()) as any;
    expect(body.error.details[0]).toMatchObject({ scope: "task:looper-task-1", metric: "tokens" });
    expect((await served()) - before).toBe(2);
  });

  it("cannot be shaped by the client: logprobs in the body are refused; headers naming the looper change nothing", async () => {
    const refused = await openai.chat.completions.create({ model: "looper-cascade", messages: [{ role: "user", content: "x" }], logprobs: true }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 400 });
    const res = await fetch(`${gateway.publicUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json", "x-sluice-looper": "off", "x-sluice-algorithm": "none" },
      body: JSON.stringify({ model: "looper-cascade", max_tokens: 40, messages: [{ role: "user", content: `x ${UNSURE}` }] }),
    });
    expect(res.headers.get("x-sluice-looper")).toBe("cascade; steps=3; accepted=large");
  });
});

describe("a panel through the public listener", () => {
  it("goes on without a failing member, and streams the arbiter's answer to the official SDK clients", async () => {
    // The mid member fails; the small and large ones make the quorum; the arbiter echoes its prompt.
    const prompt = "Which is best? [[sim status=500 only-model=sim-mid]]";
    const buffered = await openai.chat.completions.create({ model: "looper-panel", max_tokens: 400, messages: [{ role: "user", content: prompt }] }).withResponse();
    expect(buffered.response.headers.get("x-sluice-looper")).toBe("panel; steps=4; accepted=large");
    const answer = buffered.data.choices[0]!.message.content!;
    expect(answer).toContain("Answer 1:");
    expect(answer).toContain("Answer 2:");
    expect(answer).not.toContain("Answer 3:");

    let streamed = "";
    for await (const chunk of await openai.chat.completions.create({ model: "looper-panel", max_tokens: 400, stream: true, messages: [{ role: "user", content: prompt }] })) streamed += chunk.choices[0]?.delta.content ?? "";
    expect(streamed).toContain("Answer 2:");
    let events = 0;
    let output = "";
    for await (const e of await openai.responses.create({ model: "looper-panel", input: prompt, max_output_tokens: 400, store: false, stream: true })) {
      events++;
      if (e.type === "response.completed") output = outputText(e.response);
    }
    expect(events).toBeGreaterThan(3);
    expect(output).toContain("Answer 2:");
    const final = await anthropic.messages.stream({ model: "looper-panel", max_tokens: 400, messages: [{ role: "user", content: prompt }] }).finalMessage();
    expect(final.content.map((b) => (b.type === "text" ? b.text : "")).join("")).toContain("Answer 2:");
  });
});
