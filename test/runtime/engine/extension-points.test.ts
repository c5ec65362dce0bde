/**
 * The runner's extension points, each with a test plugin: where it runs, in what order, what it
 * may change, and what happens when it throws. (The faults at each of them — a throw, a client
 * disconnect, the deadline, a drain — are in phase-faults.test.ts.)
 */
import { describe, expect, it } from "vitest";
import { NO_EXTENSIONS, type Extensions } from "../../../src/engine/runner.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import type { RequestSafePlugin, StreamEventPlugin, TerminalObserverPlugin } from "../../../src/plugins/plugin.ts";
import type { NeutralEvent } from "../../../src/protocol/neutral.ts";
import type { SignalDefinition } from "../../../src/signals/signal-set.ts";
import { chat, engineHarness } from "../support/engine-harness.ts";
import { snapshot } from "../support/executor-harness.ts";
import { fakeServer, mcpHarness, resultOf } from "../support/mcp-harness.ts";

const ext = (over: Partial<Extensions>): Extensions => ({ ...NO_EXTENSIONS, ...over });
const enc = new TextEncoder();
const sse = (content: string) => `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "x", choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
const usage = `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "x", choices: [], usage: { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 } })}\n\n`;

/** A provider that streams the given deltas, then usage and [DONE]. */
const streaming = (deltas: readonly string[]) => () =>
  new Response(
    new ReadableStream<Uint8Array>({
      start(c) {
        for (const d of deltas) c.enqueue(enc.encode(sse(d)));
        c.enqueue(enc.encode(usage));
        c.enqueue(enc.encode("data: [DONE]\n\n"));
        c.close();
      },
    }),
    { headers: { "content-type": "text/event-stream" } },
  );

async function readAll(body: ReadableStream<Uint8Array>): Promise<string> {
  let text = "";
  const reader = body.getReader();
  try {
    for (;;) {
      const r = await reader.read();
      if (r.done) return text;
      text += new TextDecoder().decode(r.value);
    }
  } catch {
    return `${text}<errored>`;
  }
}

/** The client-visible text of an OpenAI chat stream. */
const contentOf = (text: string) =>
  text
    .split("\n")
    .filter((l) => l.startsWith("data: {"))
    .map((l) => JSON.parse(l.slice(6)) as { choices?: { delta?: { content?: string } }[] })
    .map((c) => c.choices?.[0]?.delta?.content ?? "")
    .join("");

describe("signals", () => {
  it("are computed only when asked, once per request however often they are asked, and a throw is unknown and logged", async () => {
    let computed = 0;
    const signals: SignalDefinition[] = [
      { name: "length", cost: "local", compute: ({ subject }) => (computed++, subject?.kind === "model" ? subject.request.messages.length : undefined) },
      {
        name: "broken",
        cost: "local",
        compute: () => {
          throw new Error("detector down");
        },
      },
    ];
    const seen: unknown[] = [];
    const asker: RequestSafePlugin = {
      name: "asker",
      class: "request_safe",
      apply: async ({ signals }) => void seen.push(await signals.get("length"), await signals.get("length"), await signals.get("broken")),
    };
    const h = engineHarness({ snapshot: () => snapshot([{ name: "a", port: 9001 }]), extensions: ext({ signals }) });
    const plain = h.engine.begin(h.ingress(chat("hello")));
    expect((await plain.prepare()).kind).toBe("dispatch");
    expect((await plain.dispatch()).kind).toBe("buffered");
    expect(computed).toBe(0);

    const h2 = engineHarness({ snapshot: () => snapshot([{ name: "a", port: 9001 }]), extensions: ext({ signals, requestSafe: [asker] }) });
    const s = h2.engine.begin(h2.ingress(chat("hello")));
    await s.prepare();
    expect((await s.dispatch()).kind).toBe("buffered");
    expect(computed).toBe(1);
    expect(seen).toEqual([{ state: "known", value: 1 }, { state: "known", value: 1 }, { state: "unknown", reason: "failed" }]);
    expect(h2.logs).toContainEqual(expect.objectContaining({ kind: "signal_failed", signal: "broken", error: "Error: detector down" }));
  });
});

describe("request_safe plugins", () => {
  it("run after decide and before reserve, in order, and what they hand back is what is sent", async () => {
    const order: string[] = [];
    let reservations = () => -1;
    let reservedBefore = -1;
    let capSeen: number | undefined = -1;
    const redact: RequestSafePlugin = {
      name: "redact",
      class: "request_safe",
      apply: ({ subject }) => {
        order.push("redact");
        reservedBefore = reservations();
        if (subject.kind !== "model") return undefined;
        capSeen = subject.request.maxOutputTokens;
        return { kind: "model", request: { ...subject.request, messages: subject.request.messages.map((m) => ({ ...m, content: [{ type: "text" as const, text: "[redacted]" }] })) } };
      },
    };
    const second: RequestSafePlugin = { name: "second", class: "request_safe", apply: ({ subject }) => void order.push(`second saw ${subject.kind === "model" ? JSON.stringify(subject.request.messages[0]!.content) : "?"}`) };
    const h = engineHarness({ snapshot: () => snapshot([{ name: "a", port: 9001 }]), extensions: ext({ requestSafe: [redact, second] }) });
    reservations = () => h.ledgers.calls.filter((c) => c.endsWith(".reserve")).length;
    // No output cap: the reserve phase injects one for a budgeted key, after the plugins ran.
    const s = h.engine.begin(h.ingress(chat("my SSN is 078-05-1120")));
    await s.prepare();
    const reply = await s.dispatch();
    expect(reply.kind).toBe("buffered");
    expect(capSeen).toBeUndefined();
    expect(reply.kind === "buffered" && reply.meta.injectedMaxOutputTokens).toBeGreaterThan(0);
    expect(order).toEqual(["redact", 'second saw [{"type":"text","text":"[redacted]"}]']);
    expect(reservedBefore).toBe(0);
    expect(JSON.stringify(h.seen[0]!.body.messages)).not.toContain("078-05-1120");
    expect(h.seen[0]!.body.messages[0].content).toContain("[redacted]");
    await h.settled();
    // Entered in order: the plugins ran inside decide, before reserve was entered.
    expect(h.requests[0]!.phases.map((p) => p.phase)).toEqual(["authenticate", "decode", "authorize", "decide", "reserve", "admit", "invoke", "respond"]);
  });

  it("refuse a request with a typed error before anything is reserved or sent", async () => {
    const block: RequestSafePlugin = {
      name: "no-secrets",
      class: "request_safe",
      apply: () => {
        throw new GatewayError("content_blocked", "The prompt carries a secret.");
      },
    };
    const h = engineHarness({ snapshot: () => snapshot([{ name: "a", port: 9001 }]), extensions: ext({ requestSafe: [block] }) });
    const s = h.engine.begin(h.ingress(chat("hello", { max_tokens: 50 })));
    await s.prepare();
    const reply = await s.dispatch();
    expect(reply).toMatchObject({ kind: "error", error: { code: "content_blocked", status: 400 } });
    await h.settled();
    expect(h.seen).toEqual([]);
    expect(h.ledgers.calls.filter((c) => c.endsWith(".reserve"))).toEqual([]);
    expect(h.requests[0]).toMatchObject({ phase: "decide", outcome: "error", errorCode: "content_blocked" });
  });

  it("see a tool call's arguments like a prompt, and what they hand back is what the server gets", async () => {
    const docs = fakeServer("docs", [{ name: "lookup" }]);
    const mask: RequestSafePlugin = {
      name: "mask",
      class: "request_safe",
      apply: ({ subject }) => (subject.kind === "tool_call" ? { ...subject, arguments: { ...subject.arguments, ssn: "***" } } : undefined),
    };
    const h = await mcpHarness({ servers: [docs], rules: [{ id: "all", effect: "allow", servers: ["*"], names: ["*"] }], extensions: ext({ requestSafe: [mask] }) });
    resultOf(await h.call("tools/call", { name: "docs.lookup", arguments: { ssn: "078-05-1120", q: "x" } }));
    expect(docs.calls.find((c) => c.method === "tools/call")!.params.arguments).toEqual({ ssn: "***", q: "x" });
  });
});

describe("stream_event_safe plugins", () => {
  /** Holds text back until a sentence ends, then releases it upper-cased. */
  const sentences = (maxHoldBack: number): StreamEventPlugin => ({
    name: "sentences",
    class: "stream_event_safe",
    maxHoldBack,
    open() {
      let held: NeutralEvent[] = [];
      const release = () => {
        const out = held.map((e) => (e.type === "text" ? { ...e, text: e.text.toUpperCase() } : e));
        held = [];
        return out;
      };
      return {
        event: (ev) => {
          if (ev.type !== "text") return [...release(), ev];
          held.push(ev);
          return ev.text.endsWith(".") ? release() : [];
        },
        end: release,
      };
    },
  });

  it("change each neutral event before the client's encoder, holding back within their bound, and release what they hold at the end", async () => {
    const h = engineHarness({ snapshot: () => snapshot([{ name: "a", port: 9001 }]), respond: streaming(["Hel", "lo.", " bye"]), extensions: ext({ streamEvent: [sentences(4)] }) });
    const s = h.engine.begin(h.ingress(chat("hi", { stream: true, max_tokens: 50 })));
    await s.prepare();
    const reply = await s.dispatch();
    if (reply.kind !== "stream") throw new Error(`expected a stream, got ${reply.kind}`);
    const text = await readAll(reply.body);
    expect(contentOf(text)).toBe("HELLO. BYE");
    expect(text).toContain("[DONE]");
    await h.settled();
    expect(h.requests[0]).toMatchObject({ outcome: "success" });
    expect(h.attempts[0]).toMatchObject({ outcome: "success", usage: { inputTokens: 3, outputTokens: 3 } });
  });

  it("end the stream as the gateway's fault, never a clean ending, when a plugin holds more than its bound", async () => {
    const h = engineHarness({ snapshot: () => snapshot([{ name: "a", port: 9001 }]), respond: streaming(["a", "b", "c", "d"]), extensions: ext({ streamEvent: [sentences(2)] }) });
    const s = h.engine.begin(h.ingress(chat("hi", { stream: true, max_tokens: 50 })));
    await s.prepare();
    const reply = await s.dispatch();
    if (reply.kind !== "stream") throw new Error(`expected a stream, got ${reply.kind}`);
    const text = await readAll(reply.body);
    expect(text).not.toContain("[DONE]");
    await h.settled();
    expect(h.requests[0]).toMatchObject({ outcome: "error", errorCode: "internal_error", phase: "respond" });
    expect(h.admission.stats().inFlight.global).toBe(0);
    for (const [id, endings] of h.endings) expect(endings, id).toHaveLength(1);
  });
});

describe("terminal observers", () => {
  it("run once, after the record went to the logging phase, on success and on failure; a throwing one is reported and the others still run", async () => {
    const views: string[] = [];
    let recordsAtFirstCall = -1;
    const h0 = { requests: [] as unknown[] };
    const watcher: TerminalObserverPlugin = {
      name: "watcher",
      class: "terminal_observer",
      observe: (v) => {
        if (recordsAtFirstCall < 0) recordsAtFirstCall = h0.requests.length;
        views.push(`${v.record.outcome}:${v.attempts.length}`);
      },
    };
    const broken: TerminalObserverPlugin = {
      name: "broken",
      class: "terminal_observer",
      observe: () => {
        throw new Error("observer bug");
      },
    };
    const h = engineHarness({ snapshot: () => snapshot([{ name: "a", port: 9001 }]), extensions: ext({ terminalObservers: [broken, watcher] }) });
    h0.requests = h.requests;
    const ok = h.engine.begin(h.ingress(chat("hi", { max_tokens: 50 })));
    await ok.prepare();
    expect((await ok.dispatch()).kind).toBe("buffered");
    ok.close();
    const refused = h.engine.begin(h.ingress(chat("hi"), { apiKey: "sk-not-a-key" }));
    expect((await refused.prepare()).kind).toBe("immediate");
    expect(views).toEqual(["success:1", "error:0"]);
    expect(recordsAtFirstCall).toBe(1);
    expect(h.undoErrors.map((e) => [e.what, String(e.err)])).toEqual([
      ["terminal_observer", "Error: observer bug"],
      ["terminal_observer", "Error: observer bug"],
    ]);
  });
});
