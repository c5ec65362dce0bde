import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/load-config.ts";
import type { AttemptRecord } from "../../../src/context/attempt-record.ts";
import { CONTENT_MARGIN, type RequestContent, type RequestRecord } from "../../../src/context/request-record.ts";
import { compilePublication } from "../../../src/publication/compile-publication.ts";
import { accessLog } from "../../../src/settle/access-log.ts";
import { bundled, textsWith } from "../support/fixtures.ts";

const T0 = 1_800_000_000_000;
const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";

function record(over: Partial<RequestRecord> = {}): RequestRecord {
  return {
    requestId: "req_1",
    parentRequestId: "req_0",
    receivedAt: T0,
    endedAt: T0 + 1_250,
    tenant: "demo",
    key: "demo",
    chargeTo: "platform/playground",
    entrypoint: "sluice-chat",
    route: "code",
    decision: undefined,
    plugins: [],
    stream: true,
    phase: "respond",
    phases: [{ phase: "authenticate", at: T0 }],
    outcome: "success",
    errorCode: undefined,
    attempts: ["att_a", "att_b"],
    protocol: "openai-chat",
    publicationRevision: "demo-1",
    callId: "call-7",
    trace: { traceId: TRACE_ID, spanId: "00f067aa0ba902b7", parentSpanId: undefined, sampled: true, state: undefined, linked: undefined },
    mcp: undefined,
    attribution: { taskId: "task-1", sessionId: "sess-1" },
    workload: { agent: "agent-x" },
    events: [],
    content: undefined,
    ...over,
  };
}

function attempt(id: string, over: Partial<AttemptRecord> = {}): AttemptRecord {
  return {
    id,
    requestId: "req_1",
    snapshotRevision: 9,
    logicalModel: "chat-large",
    modelRevision: 2,
    pool: "sim-large",
    backendId: "bk_secretless_id",
    backendName: "sim-local",
    upstreamModel: "sim-large",
    spanId: `span-${id}`,
    startedAt: T0 + 100,
    outcome: "success",
    ...over,
  };
}

/** An access log writing into an array, each line parsed. */
function capture(enabled = true) {
  const raw: string[] = [];
  const log = accessLog(enabled, (line) => raw.push(line));
  return { log, raw, lines: () => raw.map((l) => JSON.parse(l) as Record<string, any>) };
}

/** A rate-limited first try and a successful fallback, as the executor records them. */
const refused = attempt("att_a", {
  logicalModel: "chat-small",
  modelRevision: 1,
  pool: "sim-small",
  startedAt: T0 + 100,
  headersAt: T0 + 130,
  endedAt: T0 + 140,
  status: 429,
  outcome: "upstream_status",
  errorCode: "upstream_rate_limited",
  evidence: { class: "known_zero", reason: "rejected_before_processing", status: 429, retryAfterSeconds: 2 },
});
const answered = attempt("att_b", {
  backendProtocol: "azure-openai",
  codecVersion: "1",
  startedAt: T0 + 200,
  headersAt: T0 + 260,
  firstContentAt: T0 + 310,
  endedAt: T0 + 1_200,
  status: 200,
  stopReason: "tool_use",
  toolCallsProposed: ["lookup"],
  usage: { inputTokens: 12, outputTokens: 30, source: "provider" },
  downgraded: ["top_k"],
  evidence: { class: "success", reason: "ok", status: 200 },
});

describe("accessLog: the request line", () => {
  it("writes one JSON line per finished request, carrying the chain once", () => {
    const c = capture();
    c.log.finished(record(), [refused, answered]);
    expect(c.raw).toHaveLength(1);
    expect(c.lines()[0]).toMatchObject({
      kind: "request",
      requestId: "req_1",
      traceId: TRACE_ID,
      spanId: "00f067aa0ba902b7",
      parentRequestId: "req_0",
      publicationRevision: "demo-1",
      tenant: "demo",
      key: "demo",
      chargeTo: "platform/playground",
      entrypoint: "sluice-chat",
      route: "code",
      callId: "call-7",
      protocol: "openai-chat",
      stream: true,
      // The final model is the attempt that answered, not the first one tried.
      model: "chat-large",
      modelRevision: 2,
      snapshotRevision: 9,
      phase: "respond",
      outcome: "success",
      durationMs: 1_250,
      attribution: { taskId: "task-1", sessionId: "sess-1" },
      workload: { agent: "agent-x" },
    });
  });

  it("says how much of the request's duration was the wait for upstreams, and nothing when there was none", () => {
    const c = capture();
    c.log.finished({ ...record(), upstreamMs: 1_180 }, [refused, answered]);
    expect(c.lines()[0]).toMatchObject({ durationMs: 1_250, upstreamMs: 1_180 });
    c.log.finished(record(), []);
    expect(c.lines()[1]).not.toHaveProperty("upstreamMs");
  });

  it("nests each sent attempt with its timings measured from its own start", () => {
    const c = capture();
    c.log.finished(record(), [refused, answered]);
    const { attempts } = c.lines()[0]!;
    expect(attempts).toEqual([
      {
        attemptId: "att_a",
        spanId: "span-att_a",
        snapshotRevision: 9,
        model: "chat-small",
        modelRevision: 1,
        pool: "sim-small",
        backend: "sim-local",
        status: 429,
        outcome: "upstream_status",
        // Only the class and the reason: the rest of the evidence is the retry policy's.
        evidence: { class: "known_zero", reason: "rejected_before_processing" },
        errorCode: "upstream_rate_limited",
        headersMs: 30,
        durationMs: 40,
        usage: "unknown",
        usageSource: "unknown",
      },
      {
        attemptId: "att_b",
        spanId: "span-att_b",
        snapshotRevision: 9,
        model: "chat-large",
        modelRevision: 2,
        pool: "sim-large",
        backend: "sim-local",
        protocol: "azure-openai",
        codecVersion: "1",
        status: 200,
        outcome: "success",
        evidence: { class: "success", reason: "ok" },
        stopReason: "tool_use",
        toolCallsProposed: ["lookup"],
        headersMs: 60,
        ttftMs: 110,
        durationMs: 1_000,
        usage: { inputTokens: 12, outputTokens: 30, source: "provider" },
        usageSource: "reported",
        downgraded: ["top_k"],
      },
    ]);
  });

  it("gives each attempt what its settlement booked, in micro-units and its currency", () => {
    const c = capture();
    const settled = { ...answered, charge: { usage: "known" as const, costMicros: 4_500, currency: "EUR" } };
    c.log.finished(record(), [refused, settled]);
    const [first, second] = c.lines()[0]!.attempts;
    expect(second).toMatchObject({ attemptId: "att_b", costMicros: 4_500, currency: "EUR" });
    expect(first).not.toHaveProperty("costMicros");
  });

  it("leaves out attempts that were never sent, also when naming the final model", () => {
    const c = capture();
    const notSent = attempt("att_c", { logicalModel: "chat-xl", modelRevision: 5, snapshotRevision: 10, outcome: "not_sent" });
    c.log.finished(record(), [refused, answered, notSent]);
    const line = c.lines()[0]!;
    expect(line.attempts.map((a: { attemptId: string }) => a.attemptId)).toEqual(["att_a", "att_b"]);
    expect(line).toMatchObject({ model: "chat-large", modelRevision: 2, snapshotRevision: 9 });
  });

  it("names no model for a request that sent nothing, and no duration for one that did not end", () => {
    const c = capture();
    c.log.finished(record({ endedAt: undefined, outcome: "error", errorCode: "budget_exceeded", phase: "reserve", attempts: [] }), [attempt("att_x", { outcome: "not_sent" })]);
    const line = c.lines()[0]!;
    expect(line).toMatchObject({ kind: "request", outcome: "error", errorCode: "budget_exceeded", phase: "reserve", attempts: [] });
    expect(line).not.toHaveProperty("model");
    expect(line).not.toHaveProperty("durationMs");
  });

  it("carries an MCP call's audit", () => {
    const c = capture();
    const mcp = { method: "tools/call", jsonrpcId: 3, protocolVersion: "2025-06-18", server: "search", target: "lookup", decision: { allowed: true, rule: "r1", policyRevision: "p1", reason: "rule" }, toolError: false };
    c.log.finished(record({ mcp, protocol: undefined }), []);
    expect(c.lines()[0]!.mcp).toEqual(mcp);
  });

  it("carries a token count's figure and source, and its unbilled attempt's usage as none, not unknown", () => {
    const c = capture();
    const counted = attempt("att_n", { status: 200, evidence: { class: "success", reason: "ok", status: 200 }, unbilled: true });
    const tokenCount = { source: "estimated" as const, inputTokens: 17, fallback: { reason: "failed" as const, errorCode: "upstream_error" as const } };
    c.log.finished(record({ tokenCount, protocol: "anthropic-messages", stream: false }), [counted]);
    const line = c.lines()[0]!;
    expect(line.tokenCount).toEqual(tokenCount);
    expect(line.attempts[0].usage).toBe("none");
    c.log.finished(record(), [attempt("att_u", { evidence: { class: "unknown", reason: "timeout" }, outcome: "timeout" })]);
    expect(c.lines()[1]!.attempts[0].usage).toBe("unknown");
    expect(c.lines()[1]).not.toHaveProperty("tokenCount");
  });

  it("writes no content line for a request that was not sampled", () => {
    const c = capture();
    c.log.finished(record(), [answered]);
    expect(c.lines().map((l) => l.kind)).toEqual(["request"]);
  });

  it("writes nothing at all when disabled", () => {
    const c = capture(false);
    c.log.finished(record({ content: { prompt: "user: hi", completion: "hello", maxChars: 100, redact: [] } }), [refused, answered]);
    expect(c.raw).toEqual([]);
  });
});

describe("accessLog: the content line of a sampled request", () => {
  // The redactions an entrypoint really gets: its own pattern (a US social security number) and the built-in secret shapes.
  const publication = bundled("publication");
  publication.entrypoints[0].contentLog = { sampleRatio: 1, maxChars: 40, redact: ["\\b\\d{3}-\\d{2}-\\d{4}\\b"] };
  const ep = compilePublication(loadConfig(textsWith({ publication })).publication).entrypoints.get("sluice-chat")!;
  const policy = ep.contentLog!;
  const content = (prompt: string, completion = "", maxChars = policy.maxChars): RequestContent => ({ prompt, completion, maxChars, redact: policy.redact });
  const contentLine = (c: RequestContent) => {
    const cap = capture();
    cap.log.finished(record({ content: c }), [answered]);
    expect(cap.lines().map((l) => l.kind)).toEqual(["request", "content"]);
    // The request line never carries the content.
    for (const t of [c.prompt, c.completion]) if (t !== "") expect(cap.raw[0]).not.toContain(t);
    return cap.lines()[1]!;
  };

  it("follows the request line with the chain ids, the prompt and the completion", () => {
    expect(contentLine(content("user: what is 2+2?", "It is four."))).toEqual({
      kind: "content",
      requestId: "req_1",
      traceId: TRACE_ID,
      publicationRevision: "demo-1",
      entrypoint: "sluice-chat",
      route: "code",
      callId: "call-7",
      prompt: { text: "user: what is 2+2?", truncated: false },
      completion: { text: "It is four.", truncated: false },
    });
  });

  it("replaces every match of the configured and the built-in patterns, in prompt and completion", () => {
    const line = contentLine(content("ssn 123-45-6789 or 987-65-4321", "key sk-abcdefghijklmnop1234", 200));
    expect(line.prompt).toEqual({ text: "ssn [redacted] or [redacted]", truncated: false });
    expect(line.completion).toEqual({ text: "key [redacted]", truncated: false });
    // The patterns are global: a second request is redacted just the same.
    expect(contentLine(content("again 123-45-6789", "", 200)).prompt.text).toBe("again [redacted]");
  });

  it("cuts to maxChars and marks the cut; text up to maxChars is whole and unmarked", () => {
    expect(contentLine(content("x".repeat(40))).prompt).toEqual({ text: "x".repeat(40), truncated: false });
    expect(contentLine(content("x".repeat(41))).prompt).toEqual({ text: "x".repeat(40), truncated: true });
    expect(contentLine(content("", "y".repeat(90))).completion).toEqual({ text: "y".repeat(40), truncated: true });
  });

  it("redacts before cutting, so a secret straddling the cut leaves none of itself behind", () => {
    // The key starts at 30 and runs past the cut at 40: cut first, its first 10 characters would be too short to match.
    const secret = "sk-live0123456789abcdefghij";
    const line = contentLine(content(`${"a".repeat(29)} ${secret} tail`));
    expect(line.prompt.truncated).toBe(true);
    expect(line.prompt.text).toBe(`${"a".repeat(29)} [redacted]`);
    expect(line.prompt.text).not.toContain("sk-");
  });

  it("redacts a private key whose end line the kept content no longer has, from its BEGIN line on", () => {
    // The engine keeps maxChars plus a margin of a sampled prompt: a long key loses its END line.
    const kept = `user: here is my key -----BEGIN PRIVATE KEY-----\n${"MIIJQgIBADANBgkqhkiG9w0BAQEFAASC".repeat(40)}`.slice(0, policy.maxChars + CONTENT_MARGIN);
    const line = contentLine(content(kept, "", 200));
    expect(line.prompt.text).toBe("user: here is my key [redacted]");
  });
});
