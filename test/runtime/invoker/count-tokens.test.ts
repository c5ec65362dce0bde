import { describe, expect, it } from "vitest";
import type { AttemptRecord } from "../../../src/context/attempt-record.ts";
import { planRequest } from "../decide/decide-support.ts";
import { GatewayExecutor } from "../../../src/invoker/executor.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import type { PinnedSnapshot } from "../../../src/snapshot/pinned-snapshot.ts";
import { LoadTracker } from "../../../src/traffic/load-tracker.ts";
import { clock, config, protocolSnapshot as snapshotOf, publication, requestContext, type Seen } from "../support/executor-harness.ts";

function setup(respond: (seen: Seen) => Response | Promise<Response>, maxAttempts = 1) {
  const seen: Seen[] = [];
  const attempts: AttemptRecord[] = [];
  const executor = new GatewayExecutor({
    codecs: builtinCodecs,
    credentials: { get: (n) => (n === "SIM_KEY" ? "provider-secret" : undefined) },
    load: new LoadTracker(clock),
    clock,
    rng: { next: () => 0.5 },
    sleep: async () => {},
    fetch: async (input, init) => {
      const s = { url: String(input), headers: new Headers(init?.headers), body: JSON.parse(String(init?.body)) };
      seen.push(s);
      return respond(s);
    },
  });
  const request = builtinCodecs.get("anthropic-messages")!.countTokens!.decodeRequest({ model: "sluice-chat", system: "Be brief.", messages: [{ role: "user", content: "hello" }] });
  const ep = publication.entrypoints.get("sluice-chat")!;
  const p = planRequest(publication, ep, request, { requestId: "req_1", receivedAt: clock.now(), now: clock.now(), clientProtocol: "anthropic-messages", trustedHeaders: new Map(), requestDeadlineMs: config.gateway.traffic.requestDeadlineMs, clock: () => clock.now() });
  const plan = { ...p, retry: { maxAttempts } };
  return {
    seen,
    attempts,
    async count(snapshot: PinnedSnapshot) {
      const context = requestContext({ attemptFinished: (a) => attempts.push({ ...a }) });
      context.setDeadline(plan.deadlineAt);
      const result = await executor.countTokens(plan, request, { request: context, snapshot });
      return { result, context };
    },
  };
}

describe("GatewayExecutor.countTokens", () => {
  it("asks a backend of the first tier's model whose protocol counts, with its credential and model id, and reserves nothing", async () => {
    const t = setup(() => Response.json({ input_tokens: 42 }));
    const { result, context } = await t.count(await snapshotOf({ "sim-small": "anthropic-messages", "sim-large": "openai-chat" }));
    expect(result).toEqual({ ok: true, inputTokens: 42, headers: {} });
    expect(t.seen).toHaveLength(1);
    const s = t.seen[0]!;
    expect(s.url).toBe("http://127.0.0.1:9101/v1/messages/count_tokens");
    expect(s.headers.get("x-api-key")).toBe("provider-secret");
    expect(s.headers.get("anthropic-version")).toBe("2023-06-01");
    expect(s.headers.get("accept")).toBe("application/json");
    expect(s.body).toEqual({ model: "claude-small-upstream", system: "Be brief.", messages: [{ role: "user", content: "hello" }] });
    context.finish({ kind: "completed" });
    expect(t.attempts).toHaveLength(1);
    expect(t.attempts[0]).toMatchObject({ outcome: "success", unbilled: true, logicalModel: "chat-small", backendName: "small", upstreamModel: "claude-small-upstream" });
    expect(t.attempts[0]!.usage).toBeUndefined();
    expect(t.attempts[0]!.charge).toBeUndefined();
  });

  it("tries nothing when no backend of the first tier counts, even if a later tier's would", async () => {
    const t = setup(() => Response.json({ input_tokens: 1 }));
    const { result } = await t.count(await snapshotOf({ "sim-small": "openai-chat", "sim-large": "anthropic-messages" }));
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.reason).toBe("no_counter");
    expect(result.error.code).toBe("no_backend_available");
    expect(t.seen).toHaveLength(0);
  });

  it("fails with the upstream's error when the count fails or is unreadable, retrying only on known-zero evidence", async () => {
    const down = setup(() => new Response(JSON.stringify({ type: "error", error: { type: "api_error", message: "boom" } }), { status: 500 }), 3);
    const failed = (await down.count(await snapshotOf({ "sim-small": "anthropic-messages", "sim-large": "openai-chat" }))).result;
    expect(failed).toMatchObject({ ok: false, reason: "failed" });
    expect(!failed.ok && failed.error.code).toBe("upstream_error");
    // A 5xx after acceptance is unknown evidence: never retried.
    expect(down.seen).toHaveLength(1);

    const overloaded = setup(() => new Response(JSON.stringify({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } }), { status: 529 }), 3);
    const refused = (await overloaded.count(await snapshotOf({ "sim-small": "anthropic-messages", "sim-large": "openai-chat" }))).result;
    expect(refused).toMatchObject({ ok: false, reason: "failed" });
    // 529 is Anthropic's refusal before processing: known-zero, so the attempts are spent.
    expect(overloaded.seen).toHaveLength(3);

    const garbled = setup(() => Response.json({ tokens: 3 }));
    const unreadable = (await garbled.count(await snapshotOf({ "sim-small": "anthropic-messages", "sim-large": "openai-chat" }))).result;
    expect(!unreadable.ok && unreadable.error.code).toBe("upstream_protocol_error");
  });
});
