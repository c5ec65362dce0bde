/**
 * Semantic routing end to end: decisions over a similarity signal whose categories are written
 * as utterances, embedded by the simulator's deterministic embeddings through the gateway's own
 * embeddings entrypoint; held-out paraphrases land in their category, unrelated prompts fall to
 * the default; a slow or failing embedding backend is honoured per decision within
 * `signalDeadlineMs`; a decision set that needs no model-backed signal makes no embedding call.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { bundledConfig, DEMO_KEY, startStack, type Stack } from "./support/stack.ts";

let stack: Stack;
let client: OpenAI;

const SIGNAL_DEADLINE_MS = 400;

beforeAll(async () => {
  const publication = bundledConfig("publication");
  publication.signalDeadlineMs = SIGNAL_DEADLINE_MS;
  publication.signals.push(
    {
      name: "subject",
      kind: "similarity",
      model: "sluice-embed",
      threshold: 0.3,
      margin: 0.05,
      categories: [
        { name: "billing", utterances: ["Billing questions: refunds, invoices and payment methods", "I was charged twice on my credit card", "change the payment method of my subscription"] },
        { name: "devops", utterances: ["kubernetes pod crash loop and container restarts", "the deploy pipeline fails in CI", "server latency alerts and outages"] },
        { name: "writing", utterances: ["write a poem or a short story", "edit my essay for grammar and style", "draft a blog post introduction"] },
      ],
    },
    { name: "urgent", kind: "keywords", words: ["urgent", "asap"] },
  );
  const large = [["chat-large"]];
  publication.entrypoints.push(
    {
      name: "routed",
      decisions: [
        { name: "billing", when: { signal: "subject", is: "billing" }, models: large },
        { name: "devops", when: { signal: "subject", is: "devops" }, models: large },
        { name: "writing", when: { signal: "subject", is: "writing" }, models: [["chat-small"]] },
        // Above the semantic ones: local signals decide it without an embedding.
        { name: "urgent", priority: 10, when: { signal: "urgent" }, models: large },
      ],
      default: [["chat-small"]],
    },
    {
      name: "routed-local",
      decisions: [{ name: "urgent", when: { signal: "urgent" }, models: large }],
      default: [["chat-small"]],
    },
    {
      name: "routed-strict",
      decisions: [{ name: "billing", when: { signal: "subject", is: "billing" }, models: large, onUnknown: "refuse" }],
      default: [["chat-small"]],
    },
  );
  stack = await startStack({ publication });
  client = new OpenAI({ apiKey: DEMO_KEY, baseURL: `${stack.gateway.publicUrl}/v1`, maxRetries: 0 });
});

afterAll(async () => {
  await stack?.stop();
});

const sim = () => stack.sims[0]!;
const configureSim = (config: Record<string, unknown>) => fetch(`${sim().url}/__sim/config`, { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify(config) });
const embeddingCalls = async () => ((await stack.simStats(sim())) as { paths: Record<string, number> }).paths["/v1/embeddings"] ?? 0;

beforeEach(async () => {
  await configureSim({});
});

/** A chat request through the gateway: which decision it got and which upstream model served it. */
async function ask(model: string, prompt: string): Promise<{ decision: string | null; upstreamModel: string; requestId: string | null; status: number }> {
  const { data, response } = await client.chat.completions.create({ model, messages: [{ role: "user", content: prompt }], max_tokens: 16 }).withResponse();
  expect(data.choices[0]!.message.content).toBeTruthy();
  const requests = await stack.simRequests(sim(), 5);
  const chat = requests.filter((r: { path: string }) => r.path === "/v1/chat/completions").at(-1);
  return { decision: response.headers.get("x-sluice-decision"), upstreamModel: chat.body.model, requestId: response.headers.get("x-request-id"), status: response.status };
}

/** The request's access line. */
function accessLine(requestId: string): any {
  const line = stack.gateway
    .output()
    .split("\n")
    .find((l) => l.startsWith('{"kind":"request"') && l.includes(`"requestId":"${requestId}"`));
  expect(line, `access line of ${requestId}`).toBeDefined();
  return JSON.parse(line!);
}

describe("routing by utterances", () => {
  it("sends held-out paraphrases to their category and unrelated prompts to the default", async () => {
    const cases: [string, string, string][] = [
      ["How can I get a refund for this invoice?", "billing", "sim-large"],
      ["my container keeps restarting in the kubernetes cluster", "devops", "sim-large"],
      ["please write a short poem about the sea", "writing", "sim-small"],
      ["What is the capital of France?", "default", "sim-small"],
      ["Explain photosynthesis to a ten year old", "default", "sim-small"],
    ];
    for (const [prompt, decision, upstream] of cases) {
      const got = await ask("routed", prompt);
      expect({ prompt, decision: got.decision, upstream: got.upstreamModel }).toEqual({ prompt, decision, upstream });
    }
  });

  it("records the decision and every signal it read, with scores, and never the prompt", async () => {
    const got = await ask("routed", "How can I get a refund for this invoice?");
    const line = accessLine(got.requestId!);
    expect(line.route).toBe("billing");
    expect(line.decision.name).toBe("billing");
    expect(line.decision.signals.urgent).toEqual({ state: "known", value: false });
    const topic = line.decision.signals.subject;
    expect(topic.state).toBe("known");
    expect(topic.value.category).toBe("billing");
    expect(topic.value.score).toBeGreaterThan(0.3);
    expect(topic.value["scores.billing"]).toBe(topic.value.score);
    expect(topic.value["scores.writing"]).toBeLessThan(topic.value.score - 0.05);
    expect(JSON.stringify(line)).not.toContain("refund for this invoice");
  });

  it("makes one embedding call per request once the utterances are embedded, and none when a local signal decides", async () => {
    await ask("routed", "warm the utterance index: refund invoice");
    const before = await embeddingCalls();
    for (const prompt of ["refund my invoice please", "kubernetes pod restarts again", "a poem about rain"]) await ask("routed", prompt);
    expect((await embeddingCalls()) - before).toBe(3);
    const local = await embeddingCalls();
    // The urgent decision holds on a keyword, above every semantic one: nothing is embedded.
    expect((await ask("routed", "URGENT: refund my invoice")).decision).toBe("urgent");
    for (const prompt of ["urgent: the deploy is down", "hello there", "a refund for my invoice"]) await ask("routed-local", prompt);
    expect(await embeddingCalls()).toBe(local);
  });
});

describe("the embedding backend down or slow", () => {
  it("slow: each decision's unknown policy is honoured within signalDeadlineMs", async () => {
    await ask("routed", "warm: refund invoice");
    await configureSim({ "latency-ms": 20_000, "only-path": "/v1/embeddings" });
    const started = Date.now();
    const open = await ask("routed", "How can I get a refund for this invoice?");
    // Fail open: the semantic decisions are passed by, the default serves.
    expect(open.decision).toBe("default");
    expect(open.upstreamModel).toBe("sim-small");
    expect(Date.now() - started).toBeLessThan(10_000);
    const line = accessLine(open.requestId!);
    expect(line.decision.signals.subject).toEqual({ state: "unknown", reason: "timeout" });
    expect(line.decision.skipped).toEqual(["billing", "devops", "writing"]);

    // Fail closed: the strict decision refuses rather than pass the request by.
    const strict = await fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "routed-strict", messages: [{ role: "user", content: "How can I get a refund for this invoice?" }], max_tokens: 16 }),
    });
    expect(strict.status).toBe(503);
    expect(((await strict.json()) as { error: { code: string; type: string } }).error).toMatchObject({ code: "signal_unavailable", type: "server_error" });
    // Nothing was sent to the chat model for the refused request.
    const chats = (await stack.simRequests(sim(), 10)).filter((r: { path: string; body: { messages?: { content: string }[] } }) => r.path === "/v1/chat/completions" && r.body.messages?.[0]?.content === "How can I get a refund for this invoice?");
    expect(chats).toHaveLength(1);
  });

  it("down: a failing embedding is unknown (failed), and the request is still answered", async () => {
    await configureSim({ status: 503, "only-path": "/v1/embeddings" });
    const got = await ask("routed", "kubernetes pod restarts");
    expect(got.decision).toBe("default");
    const line = accessLine(got.requestId!);
    expect(line.decision.signals.subject).toEqual({ state: "unknown", reason: "failed" });
  });
});
