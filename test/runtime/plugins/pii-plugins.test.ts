/**
 * The PII plugins on their own: redaction with per-request placeholders, the restore that puts
 * values back in an answer however the provider chunked it, and the mask of PII in model output.
 */
import { describe, expect, it } from "vitest";
import { pluginSchema } from "../../../src/config/plugin-schema.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { compilePlugins } from "../../../src/plugins/compile-plugins.ts";
import { byClass, type RequestSafeInput } from "../../../src/plugins/plugin.ts";
import { StreamEventChain } from "../../../src/plugins/stream-event-chain.ts";
import type { PluginReport } from "../../../src/context/request-record.ts";
import type { NeutralEvent, NeutralRequest, NeutralResponse } from "../../../src/protocol/neutral.ts";
import { SignalSet } from "../../../src/signals/signal-set.ts";
import type { Subject } from "../../../src/signals/subject.ts";

const EMAIL = "ada.lovelace@example.org";
const CARD = "4111 1111 1111 1111";

function plugins(...configs: unknown[]) {
  return compilePlugins(configs.map((c) => pluginSchema.parse(c)));
}

const request = (...texts: string[]): NeutralRequest => ({ model: "m", messages: texts.map((t, i) => ({ role: i % 2 === 0 ? "user" : "assistant", content: [{ type: "text", text: t }] })) as NeutralRequest["messages"], stream: true, streamUsage: false });

function input(subject: Subject, reports: PluginReport[]): RequestSafeInput {
  return {
    subject,
    principal: { tenantId: "t", keyId: "k" },
    signals: new SignalSet([], { input: () => ({ subject, principal: undefined, trustedHeaders: new Map(), models: undefined }), signal: new AbortController().signal, scheduler: { schedule: () => () => {} }, onFailure: () => {} }),
    report: (r) => void reports.push(r),
    signal: new AbortController().signal,
  };
}

/** One request's instance of a plugin: its request_safe hook run, and its answer filters as a chain. */
async function run(name: string, compiled: ReturnType<typeof plugins>, subject: Subject) {
  const reports: PluginReport[] = [];
  const hooks = byClass(compiled.get(name)!.instantiate((r) => void reports.push(r)));
  let sent = subject;
  let error: unknown;
  try {
    for (const p of hooks.requestSafe) sent = ((await p.apply(input(sent, reports))) as Subject | undefined) ?? sent;
  } catch (err) {
    error = err;
  }
  return { sent, error, reports, chain: () => new StreamEventChain(hooks.streamEvent) };
}

const textOf = (s: Subject) => (s.kind === "model" ? JSON.stringify(s.request.messages) : JSON.stringify(s.arguments));
const texts = (events: readonly NeutralEvent[]) => events.map((e) => (e.type === "text" ? e.text : e.type === "tool_call_args" ? e.delta : "")).join("");

function stream(chain: StreamEventChain, events: readonly NeutralEvent[]): NeutralEvent[] {
  const out: NeutralEvent[] = [];
  for (const e of events) out.push(...chain.push(e));
  out.push(...chain.end());
  return out;
}

describe("pii redact", () => {
  const compiled = plugins({ name: "redact", kind: "pii", action: "redact" });

  it("sends placeholders, one per distinct value across messages, and counts each occurrence", async () => {
    const r = await run("redact", compiled, { kind: "model", request: request(`mail ${EMAIL} or card ${CARD}`, "ok", `again ${EMAIL}`) });
    const sent = textOf(r.sent);
    expect(sent).not.toContain(EMAIL);
    expect(sent).not.toContain("4111");
    expect(sent.match(/\[EMAIL_1\]/g)).toHaveLength(2);
    expect(sent).toContain("[PAYMENT_CARD_1]");
    expect(r.reports).toEqual([{ plugin: "redact", action: "redacted", counts: { email: 2, payment_card: 1 } }]);
  });

  it("leaves near-misses alone: a Luhn-invalid number, a date, an order id", async () => {
    const r = await run("redact", compiled, { kind: "model", request: request("order 4111 1111 1111 1112 placed 2026-12-07, ref ORD-2026-000123") });
    expect(r.sent.kind === "model" && r.sent.request.messages[0]!.content).toEqual([{ type: "text", text: "order 4111 1111 1111 1112 placed 2026-12-07, ref ORD-2026-000123" }]);
    expect(r.reports).toEqual([]);
  });

  it("never picks a placeholder the request already contains", async () => {
    const r = await run("redact", compiled, { kind: "model", request: request(`literal [EMAIL_1] and ${EMAIL}`) });
    expect(textOf(r.sent)).toContain("literal [EMAIL_1] and [EMAIL_2]");
    const out = stream(r.chain(), [{ type: "text", text: "You wrote [EMAIL_1] and [EMAIL_2]." }]);
    expect(texts(out)).toBe(`You wrote [EMAIL_1] and ${EMAIL}.`);
  });

  it("restores a placeholder split across events, released whole and never half", async () => {
    const r = await run("redact", compiled, { kind: "model", request: request(`write to ${EMAIL}`) });
    const chain = r.chain();
    const parts = ["Sure, I'll write to [EM", "AIL", "_1", "] today."];
    const seen: string[] = [];
    for (const p of parts) for (const e of chain.push({ type: "text", text: p })) seen.push(texts([e]));
    seen.push(...chain.end().map((e) => texts([e])));
    expect(seen.join("")).toBe(`Sure, I'll write to ${EMAIL} today.`);
    // No released piece carries a part of the placeholder.
    for (const piece of seen) expect(piece).not.toMatch(/\[EM|AIL_|_1\]/);
  });

  it("releases a held tail as written when the answer ends or turns to another channel", async () => {
    const r = await run("redact", compiled, { kind: "model", request: request(`to ${EMAIL}`) });
    const out = stream(r.chain(), [{ type: "text", text: "a list [EM" }, { type: "tool_call_start", index: 0, id: "c", name: "send" }, { type: "tool_call_args", index: 0, delta: '{"to":"[EMAIL_1]"}' }, { type: "stop", reason: "tool_use" }]);
    const start = out.findIndex((e) => e.type === "tool_call_start");
    // The held "[EM" is released as written, before the tool call: the answer's order is kept.
    expect(out.slice(0, start).every((e) => e.type === "text")).toBe(true);
    expect(texts(out.slice(0, start))).toBe("a list [EM");
    expect(out.slice(start).map((e) => e.type)).toEqual(["tool_call_start", "tool_call_args", "stop"]);
    // In JSON arguments the value is escaped, so they stay valid JSON.
    expect(JSON.parse(texts(out.slice(start)))).toEqual({ to: EMAIL });
  });

  it("escapes a value with quotes and line breaks inside tool arguments", async () => {
    const key = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----";
    const r = await run("redact", compiled, { kind: "model", request: request(`use ${key}`) });
    expect(textOf(r.sent)).toContain("[PRIVATE_KEY_1]");
    const out = stream(r.chain(), [{ type: "tool_call_start", index: 0, id: "c", name: "sign" }, { type: "tool_call_args", index: 0, delta: '{"key":"[PRIVATE_' }, { type: "tool_call_args", index: 0, delta: 'KEY_1]"}' }]);
    expect(JSON.parse(texts(out))).toEqual({ key });
  });

  it("restores a buffered answer through the same filters", async () => {
    const r = await run("redact", compiled, { kind: "model", request: request(`card ${CARD}`) });
    const response: NeutralResponse = { text: "Charged [PAYMENT_CARD_1].", toolCalls: [{ id: "c", name: "refund", arguments: '{"card":"[PAYMENT_CARD_1]"}' }], stopReason: "end_turn", usage: undefined };
    const restored = r.chain().filterResponse(response);
    expect(restored.text).toBe(`Charged ${CARD}.`);
    expect(JSON.parse(restored.toolCalls[0]!.arguments)).toEqual({ card: CARD });
  });

  it("redacts a tool call's arguments at any depth", async () => {
    const r = await run("redact", compiled, { kind: "tool_call", server: "crm", tool: "lookup", arguments: { q: `who is ${EMAIL}`, nested: [{ card: CARD }], n: 4 } });
    expect(r.sent).toEqual({ kind: "tool_call", server: "crm", tool: "lookup", arguments: { q: "who is [EMAIL_1]", nested: [{ card: "[PAYMENT_CARD_1]" }], n: 4 } });
  });
});

describe("pii block and allow", () => {
  it("block refuses naming the detectors and counts, never the value", async () => {
    const r = await run("no-pii", plugins({ name: "no-pii", kind: "pii", action: "block", detectors: ["us_ssn", "email"] }), { kind: "model", request: request(`ssn 078-05-1121 mail ${EMAIL}`) });
    expect(r.error).toBeInstanceOf(GatewayError);
    expect(r.error).toMatchObject({ code: "content_blocked", status: 400 });
    const message = (r.error as GatewayError).message;
    expect(message).toContain("email ×1");
    expect(message).toContain("us_ssn ×1");
    expect(message).not.toContain(EMAIL);
    expect(message).not.toContain("078-05");
    expect(r.reports).toEqual([{ plugin: "no-pii", action: "blocked", counts: { email: 1, us_ssn: 1 }, detail: "email,us_ssn" }]);
  });

  it("allow lets the request through unchanged and counts what it found", async () => {
    const subject: Subject = { kind: "model", request: request(`mail ${EMAIL}`) };
    const r = await run("audit", plugins({ name: "audit", kind: "pii", action: "allow" }), subject);
    expect(r.sent).toBe(subject);
    expect(r.reports).toEqual([{ plugin: "audit", action: "allowed", counts: { email: 1 } }]);
  });
});

describe("output_pii", () => {
  const compiled = plugins({ name: "mask", kind: "output_pii", detectors: ["email", "payment_card"] });

  it("masks PII in a streamed answer even when a value spans events, and counts it", async () => {
    const r = await run("mask", compiled, { kind: "model", request: request("hi") });
    const chain = r.chain();
    const parts = ["Contact ada.love", "lace@exam", "ple.org or pay with 4111 1111 ", "1111 1111. Thanks, and have a good day!"];
    const out = stream(chain, parts.map((text) => ({ type: "text", text }) as const));
    expect(texts(out)).toBe("Contact [EMAIL] or pay with [PAYMENT_CARD]. Thanks, and have a good day!");
    expect(r.reports).toEqual([{ plugin: "mask", action: "masked", counts: { email: 1, payment_card: 1 } }]);
  });

  it("runs before the restore of a redaction, so the caller's own values come back and the model's are masked", async () => {
    const both = plugins({ name: "redact", kind: "pii", action: "redact", detectors: ["email"] }, { name: "mask", kind: "output_pii", detectors: ["email"] });
    const reports: PluginReport[] = [];
    // Configured restore-first: the chain still runs the restore last.
    const hooks = byClass([...both.get("redact")!.instantiate((r) => void reports.push(r)), ...both.get("mask")!.instantiate((r) => void reports.push(r))]);
    const sent = await hooks.requestSafe[0]!.apply(input({ kind: "model", request: request(`I am ${EMAIL}`) }, reports));
    expect(textOf(sent as Subject)).toContain("[EMAIL_1]");
    expect(hooks.streamEvent.map((p) => p.name)).toEqual(["mask", "redact"]);
    const out = stream(new StreamEventChain(hooks.streamEvent), [{ type: "text", text: "Hello [EMAIL_1], your colleague is grace@example.org." }]);
    expect(texts(out)).toBe(`Hello ${EMAIL}, your colleague is [EMAIL].`);
  });
});

describe("system_prompt and headers", () => {
  const compiled = plugins({ name: "house", kind: "system_prompt", mode: "append", text: "Answer in British English." }, { name: "first", kind: "system_prompt", mode: "prepend", text: "P" }, { name: "only", kind: "system_prompt", mode: "replace", text: "R" }, { name: "tag", kind: "headers", set: { "x-team": "research", "anthropic-beta": "tools-2026" } });
  const withSystem: NeutralRequest = { model: "m", messages: [{ role: "system", content: [{ type: "text", text: "S" }] }, { role: "user", content: [{ type: "text", text: "hi" }] }], stream: false, streamUsage: false };
  const roles = (s: Subject) => (s.kind === "model" ? s.request.messages.map((m) => `${m.role}:${m.content.map((p) => (p.type === "text" ? p.text : "")).join("")}`) : []);

  it("puts the operator's system prompt after, before or instead of the request's", async () => {
    expect(roles((await run("house", compiled, { kind: "model", request: withSystem })).sent)).toEqual(["system:S", "system:Answer in British English.", "user:hi"]);
    expect(roles((await run("first", compiled, { kind: "model", request: withSystem })).sent)).toEqual(["system:P", "system:S", "user:hi"]);
    expect(roles((await run("only", compiled, { kind: "model", request: withSystem })).sent)).toEqual(["system:R", "user:hi"]);
  });

  it("sets allowlisted headers for the backend", async () => {
    const r = await run("tag", compiled, { kind: "model", request: withSystem });
    expect(r.sent.kind === "model" && r.sent.headers).toEqual({ "x-team": "research", "anthropic-beta": "tools-2026" });
  });

  it("refuses at load a header that carries credentials, speaks for the client, or is not an extension header", () => {
    for (const name of ["authorization", "x-api-key", "x-forwarded-for", "x-sluice-tier", "x-amz-security-token", "cookie", "X-Team"]) {
      expect(pluginSchema.safeParse({ name: "h", kind: "headers", set: { [name]: "v" } }).success, name).toBe(false);
    }
  });
});
