/**
 * For every phase boundary of a request and every extension point of the runner, of both kinds of
 * traffic, inject each way a request can be stopped — a throw, a client disconnect, the deadline, a
 * drain's cancel — and check what the request held afterwards: no admission lease, queue place,
 * backend slot, drain ticket or probe permit left, every ledger reservation settled or released
 * exactly once, no approval left claimed, one request record, each attempt logged once.
 */
import { describe, expect, it } from "vitest";
import type { Session } from "../../../src/engine/session-api.ts";
import { CodecRegistry, type Codec } from "../../../src/protocol/codec.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import type { BreakerClient } from "../../../src/traffic/breaker-client.ts";
import { BreakerCache } from "../../../src/traffic/breaker-cache.ts";
import type { BreakerSnapshot } from "../../../src/traffic/breaker.ts";
import { chat, engineHarness } from "../support/engine-harness.ts";
import { bundled, textsWith } from "../support/fixtures.ts";
import { snapshot } from "../support/executor-harness.ts";
import type { McpSession } from "../../../src/engine/engine.ts";
import { fakeServer, mcpHarness, resultOf } from "../support/mcp-harness.ts";

type Fault = "throw" | "client" | "deadline" | "drain";
const FAULTS: readonly Fault[] = ["throw", "client", "deadline", "drain"];

type Point =
  | "body"
  | "signal"
  | "request-safe"
  | "queued"
  | "snapshot"
  | "reserve"
  | "call-budget"
  | "headers"
  | "buffered-body"
  | "stream-chunk"
  | "stream-decode"
  | "stream-event"
  | "stream-encode"
  | "terminal-observer";

const STREAMING: ReadonlySet<Point> = new Set(["stream-chunk", "stream-decode", "stream-event", "stream-encode"]);
/** Where a throw is not something the gateway's own code can meet (the queue is pure). */
const NO_THROW: ReadonlySet<Point> = new Set(["queued"]);
/** After the terminal nothing is left to stop: only a throw is a fault there. */
const ONLY_THROW: ReadonlySet<Point> = new Set(["terminal-observer"]);

const halfOpen: BreakerSnapshot = { state: "half_open", failures: 0, samples: 0, openUntil: undefined, probeSuccesses: 0, permitsOutstanding: 0, halfOpenProbes: 1000, changedAt: 1, opens: 1 };

/** A breaker that is half-open for every backend and grants a permit to every probe. */
function probingBreakers() {
  let n = 0;
  const client: BreakerClient = {
    state: async () => halfOpen,
    acquire: async () => ({ allowed: true, probe: true, permitId: `permit-${++n}`, snapshot: halfOpen }),
    report: async () => halfOpen,
    reportMany: async () => halfOpen,
  };
  return new BreakerCache(client, { now: () => 0 }, { ttlMs: 1e12, flushMs: 0 });
}

const enc = new TextEncoder();
const sseChunk = (content: string) => `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "x", choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
const usageChunk = `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "x", choices: [], usage: { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 } })}\n\n`;

async function scenario(point: Point, fault: Fault) {
  const streaming = STREAMING.has(point);
  let session: Session | undefined;
  // A blocker holds the only slot while the request under test queues.
  let unblock: (() => void) | undefined;
  let hits = 0;
  const hit = async (at: Point): Promise<void> => {
    if (at !== point) return;
    hits++;
    switch (fault) {
      case "throw":
        throw new Error(`injected at ${at}`);
      case "client":
        session!.abort("client_disconnected");
        return;
      case "deadline":
        h.timers.advance(h.config.gateway.traffic.requestDeadlineMs + 1);
        return;
      case "drain":
        await h.drain.drain(0);
        return;
    }
  };
  /** Sync boundaries (decoder, encoder) cannot wait for a drain; the test waits for it before reading on. */
  let pending: Promise<void> = Promise.resolve();
  const hitSync = (at: Point) => {
    if (at !== point) return;
    if (fault === "throw") {
      hits++;
      throw new Error(`injected at ${at}`);
    }
    pending = hit(at);
  };
  const chatCodec = builtinCodecs.get("openai-chat")!;
  const wrapped: Codec = {
    ...chatCodec,
    createStreamDecoder: () => {
      const d = chatCodec.createStreamDecoder();
      let n = 0;
      return { decode: (e) => (++n === 2 && hitSync("stream-decode"), d.decode(e)), finish: () => d.finish() };
    },
    createStreamEncoder: (stamp, req) => {
      const e = chatCodec.createStreamEncoder(stamp, req);
      let n = 0;
      return { encode: (ev) => (ev.type === "text" && ++n === 2 && hitSync("stream-encode"), e.encode(ev)), end: () => e.end() };
    },
  };
  const breakers = probingBreakers();
  const snap = await snapshot([{ name: "a", port: 9001 }]);
  const h = engineHarness({
    extensions: {
      signals: [{ name: "probe", cost: "model", compute: async () => (await hit("signal"), 1) }],
      // The plugin asks for the signal: signals are computed only when asked.
      requestSafe: [{ name: "probe", class: "request_safe", apply: async ({ signals }) => void ((await signals.get("probe")), await hit("request-safe")) }],
      streamEvent: [
        {
          name: "probe",
          class: "stream_event_safe",
          maxHoldBack: 0,
          open: () => {
            let n = 0;
            return { event: (ev) => (ev.type === "text" && ++n === 2 && hitSync("stream-event"), [ev]), end: () => [] };
          },
        },
      ],
      terminalObservers: [{ name: "probe", class: "terminal_observer", observe: () => hitSync("terminal-observer") }],
    },
    snapshot: async () => (await hit("snapshot"), snap),
    breakers,
    codecs: new CodecRegistry([wrapped, builtinCodecs.get("openai-responses")!, builtinCodecs.get("anthropic-messages")!]),
    admission: { limits: { global: 1 }, maxQueue: 4, maxQueuePerTenant: 4 },
    beforeReserve: () => hit("reserve"),
    beforeCallBudget: () => hit("call-budget"),
    drainWait: async () => {},
    respond: async (s) => {
      await hit("headers");
      if (s.body.stream) {
        let i = 0;
        const chunks = [sseChunk("Hel"), sseChunk("lo"), sseChunk(" you"), usageChunk, "data: [DONE]\n\n"];
        return new Response(
          new ReadableStream<Uint8Array>({
            async pull(c) {
              if (i === 2) await hit("stream-chunk");
              if (i < chunks.length) c.enqueue(enc.encode(chunks[i++]!));
              else c.close();
            },
          }),
          { headers: { "content-type": "text/event-stream" } },
        );
      }
      const body = JSON.stringify({ id: "x", choices: [{ index: 0, message: { role: "assistant", content: "Hi!" }, finish_reason: "stop" }], usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } });
      return new Response(
        new ReadableStream<Uint8Array>({
          async pull(c) {
            await hit("buffered-body");
            c.enqueue(enc.encode(body));
            c.close();
          },
        }),
        { headers: { "content-type": "application/json" } },
      );
    },
  });
  // Warm the breaker view, so the backend is seen half-open and every attempt takes a permit.
  const warm: Promise<unknown>[] = [];
  breakers.forRequest((p) => void warm.push(p)).admission([...snap.backends.keys()][0]!);
  await Promise.all(warm);

  if (point === "queued") {
    const lease = await h.admission.admit({ tenant: "demo", model: "sluice-chat" }, { deadlineAt: Infinity });
    if (!lease.ok) throw new Error("the blocker was not admitted");
    unblock = () => lease.lease.release();
  }
  const body = chat("hello", { max_tokens: 50, ...(streaming ? { stream: true, stream_options: { include_usage: true } } : {}) });
  session = h.engine.begin(
    h.ingress(body, {
      readBody: async () => (await hit("body"), body),
      call: { callId: "call-1", budget: 5, deadlineAt: h.clock.now() + 3_600_000 },
    }),
  );
  const action = await session.prepare();
  let outcome = action.kind === "immediate" ? action.error.code : "";
  if (action.kind === "dispatch") {
    const replying = session.dispatch();
    if (point === "queued") {
      for (let i = 0; i < 100 && h.admission.stats().queued.total === 0; i++) await Promise.resolve();
      expect(h.admission.stats().queued.total).toBe(1);
      await hit("queued");
      unblock!();
    }
    const reply = await replying;
    if (reply.kind === "error") outcome = reply.error.code;
    else if (reply.kind === "buffered") outcome = "ok";
    else {
      const reader = reply.body.getReader();
      let text = "";
      try {
        for (;;) {
          await pending;
          const r = await reader.read();
          if (r.done) break;
          text += new TextDecoder().decode(r.value);
        }
      } catch {
        text += "<errored>";
      }
      outcome = text.includes("[DONE]") ? "ok" : /"code":"([a-z_]+)"/.exec(text)?.[1] ?? (text.includes("<errored>") ? "errored" : "cut");
    }
  }
  unblock?.();
  await h.settled();
  return { h, breakers, outcome, hits };
}

function expectNothingHeld({ h, breakers }: Awaited<ReturnType<typeof scenario>>) {
  const a = h.admission.stats();
  // The blocker of a queued scenario was released too.
  expect({ leases: a.inFlight.global, queued: a.queued.total, backendSlots: Object.keys(a.inFlight.backend).length, tickets: h.drain.inFlight, permits: breakers.permitsHeld }).toEqual({
    leases: 0,
    queued: 0,
    backendSlots: 0,
    tickets: 0,
    permits: 0,
  });
  // One record for the request, each attempt logged once.
  expect(h.requests.filter((r) => r.parentRequestId === undefined)).toHaveLength(1);
  const ids = h.attempts.map((x) => x.id);
  expect(new Set(ids).size).toBe(ids.length);
  // Every reservation ended exactly once, and nothing is left held in the ledger.
  for (const [id, endings] of h.endings) expect(endings, id).toHaveLength(1);
  expect(h.ledgers.core("tenant:demo").attemptsIn("held", 100)).toEqual([]);
  expect(h.undoErrors).toEqual([]);
}

/** The phase each boundary belongs to: where a request stopped there at once is recorded as ending. */
const PHASE_OF: Readonly<Record<Point, string>> = {
  body: "decode",
  signal: "decide",
  "request-safe": "decide",
  queued: "admit",
  snapshot: "invoke",
  reserve: "invoke",
  "call-budget": "invoke",
  headers: "invoke",
  "buffered-body": "invoke",
  "stream-chunk": "respond",
  "stream-decode": "respond",
  "stream-event": "respond",
  "stream-encode": "respond",
  "terminal-observer": "respond",
};

const POINTS: readonly Point[] = ["body", "signal", "request-safe", "queued", "snapshot", "reserve", "call-budget", "headers", "buffered-body", "stream-chunk", "stream-decode", "stream-event", "stream-encode", "terminal-observer"];

describe("a request stopped at any phase boundary releases everything it took, once", () => {
  it("a request that runs to the end holds nothing afterwards (the baseline)", async () => {
    const h = engineHarness({ snapshot: () => snapshot([{ name: "a", port: 9001 }]) });
    const s = h.engine.begin(h.ingress(chat("hello", { max_tokens: 50 })));
    expect((await s.prepare()).kind).toBe("dispatch");
    expect((await s.dispatch()).kind).toBe("buffered");
    await h.settled();
    expect(h.requests).toMatchObject([{ outcome: "success" }]);
    expect(h.endings.size).toBe(1);
    expect([...h.endings.values()]).toEqual([["settle"]]);
  });

  for (const point of POINTS) {
    for (const fault of FAULTS) {
      if (fault === "throw" && NO_THROW.has(point)) continue;
      if (fault !== "throw" && ONLY_THROW.has(point)) continue;
      it(`${fault} at ${point}`, async () => {
        const r = await scenario(point, fault);
        expect(r.hits, "the fault was injected").toBeGreaterThanOrEqual(1);
        if (fault === "throw" && (point === "signal" || point === "terminal-observer")) {
          // Defined outcomes: a failed signal is `unknown` (logged) and the request goes on; an
          // observer runs after the terminal, so its throw is reported and changes nothing.
          const undoErrors = r.h.undoErrors.splice(0);
          expectNothingHeld(r);
          expect(r.outcome).toBe("ok");
          expect(r.h.requests.find((x) => x.parentRequestId === undefined)).toMatchObject({ outcome: "success" });
          if (point === "signal") expect(r.h.logs).toContainEqual(expect.objectContaining({ kind: "signal_failed", signal: "probe" }));
          else expect(undoErrors.map((e) => e.what)).toEqual(["terminal_observer"]);
          return;
        }
        expectNothingHeld(r);
        const record = r.h.requests.find((x) => x.parentRequestId === undefined)!;
        // A disconnect or a throw stops the request in the phase it was in.
        if (fault === "client" || fault === "throw") expect(record.phase).toBe(PHASE_OF[point]);
        switch (fault) {
          case "client":
            expect(record.outcome).toBe("cancelled");
            expect(record.errorCode).toBe("client_closed");
            break;
          case "deadline":
            expect(r.outcome).toMatch(/deadline_exceeded|upstream_stream_cut/);
            expect(record.errorCode).toBe("deadline_exceeded");
            break;
          case "drain":
            // Before admission a draining gateway refuses; after it, the request cancels itself.
            expect(record.errorCode).toBe("gateway_draining");
            break;
          case "throw":
            expect(record.outcome).toBe("error");
            expect(r.outcome).not.toBe("ok");
            break;
        }
      });
    }
  }
});

/**
 * The MCP kind's boundaries and hook points: an approved, priced `tools/call` of the virtual
 * server (so it passes the approval gate, reserves in the ledger and claims its approval),
 * stopped at each of them.
 */
type McpPoint = "body" | "signal" | "request-safe" | "reserve" | "queued" | "claim" | "upstream" | "terminal-observer";
const MCP_POINTS: readonly McpPoint[] = ["body", "signal", "request-safe", "reserve", "queued", "claim", "upstream", "terminal-observer"];
const MCP_PHASE_OF: Readonly<Record<McpPoint, string>> = {
  body: "decode",
  signal: "decide",
  "request-safe": "decide",
  reserve: "reserve",
  queued: "admit",
  claim: "invoke",
  upstream: "invoke",
  "terminal-observer": "respond",
};

async function mcpScenario(point: McpPoint, fault: Fault) {
  let session: McpSession | undefined;
  let armed = false;
  let hits = 0;
  let h!: Awaited<ReturnType<typeof mcpHarness>>;
  const hit = async (at: McpPoint): Promise<void> => {
    if (!armed || at !== point) return;
    hits++;
    switch (fault) {
      case "throw":
        throw new Error(`injected at ${at}`);
      case "client":
        session!.abort("client_disconnected");
        return;
      case "deadline":
        h.timers.advance(h.config.gateway.traffic.requestDeadlineMs + 1);
        return;
      case "drain":
        await h.drain.drain(0);
        return;
    }
  };
  const docs = fakeServer("docs", [{ name: "wipe", run: async () => (await hit("upstream"), { ok: true, result: { content: [{ type: "text", text: "wiped" }] } }) }]);
  h = await mcpHarness({
    servers: [docs],
    rules: [{ id: "risky", effect: "allow", servers: ["docs"], names: ["wipe"], approval: "required" }],
    prices: [{ id: "wipe", servers: ["docs"], names: ["wipe"], price: { version: "tp-1", currency: "USD", perCall: 0.01 } }],
    approvals: true,
    admission: { limits: { global: 1 }, maxQueue: 4, maxQueuePerTenant: 4 },
    drainWait: async () => {},
    beforeReserve: () => hit("reserve"),
    extensions: {
      signals: [{ name: "probe", cost: "model", compute: async () => (await hit("signal"), 1) }],
      requestSafe: [{ name: "probe", class: "request_safe", apply: async ({ signals }) => void ((await signals.get("probe")), await hit("request-safe")) }],
      streamEvent: [],
      terminalObservers: [{ name: "probe", class: "terminal_observer", observe: () => void (armed && point === "terminal-observer" && fault === "throw" && (hits++, (() => { throw new Error("injected at terminal-observer"); })())) }],
    },
  });
  // The approval: asked for, then approved, before the request under test.
  const first = resultOf(await h.call("tools/call", { name: "docs.wipe", arguments: {} }));
  const approvalId = (first.inputRequests as { approval: { params: { elicitationId: string } } }).approval.params.elicitationId;
  await h.desk().decide(approvalId, "approve", "alice", "ok");
  const desk = h.desk();
  const claim = desk.claim;
  desk.claim = async (...args) => (await hit("claim"), claim(...args));
  await h.settled();
  h.requests.length = 0;
  h.endings.clear();

  let unblock: (() => void) | undefined;
  if (point === "queued") {
    const lease = await h.admission.admit({ tenant: "demo", model: "mcp:docs" }, { deadlineAt: Infinity });
    if (!lease.ok) throw new Error("the blocker was not admitted");
    unblock = () => lease.lease.release();
  }
  armed = true;
  const ingress = h.ingress("tools/call", { name: "docs.wipe", arguments: {}, requestState: first.requestState });
  session = h.engine.beginMcp({ ...ingress, readBody: async () => (await hit("body"), ingress.readBody()) })!;
  const replying = session.run();
  if (point === "queued") {
    for (let i = 0; i < 100 && h.admission.stats().queued.total === 0; i++) await Promise.resolve();
    expect(h.admission.stats().queued.total).toBe(1);
    await hit("queued");
    unblock!();
  }
  const reply = await replying;
  unblock?.();
  await h.settled();
  return { h, reply, hits, approval: await h.desk().get(approvalId), docs };
}

describe("an MCP request stopped at any phase boundary or hook releases everything it took, once", () => {
  for (const point of MCP_POINTS) {
    for (const fault of FAULTS) {
      if (fault === "throw" && NO_THROW.has(point as Point)) continue;
      if (fault !== "throw" && point === "terminal-observer") continue;
      it(`${fault} at ${point}`, async () => {
        const r = await mcpScenario(point, fault);
        expect(r.hits, "the fault was injected").toBeGreaterThanOrEqual(1);
        const a = r.h.admission.stats();
        expect({ leases: a.inFlight.global, queued: a.queued.total, tickets: r.h.drain.inFlight }).toEqual({ leases: 0, queued: 0, tickets: 0 });
        for (const [id, endings] of r.h.endings) expect(endings, id).toHaveLength(1);
        expect(r.h.ledgers.core("tenant:demo").attemptsIn("held", 100)).toEqual([]);
        // The approval is never left claimed: used (with how it ended), or still standing.
        expect(r.approval?.execution).not.toBe("claimed");
        const record = r.h.requests.at(-1)!;
        expect(r.h.requests).toHaveLength(1);
        if (fault === "throw" && (point === "signal" || point === "terminal-observer")) {
          // Defined outcomes, as for model requests: the call runs once, and the request succeeds.
          expect(resultOf(r.reply)).toMatchObject({ content: [{ text: "wiped" }] });
          expect(record.outcome).toBe("success");
          expect(r.approval).toMatchObject({ state: "executed", execution: "succeeded" });
          if (point === "terminal-observer") expect(r.h.undoErrors.map((e) => e.what)).toEqual(["terminal_observer"]);
          return;
        }
        expect(r.h.undoErrors).toEqual([]);
        expect(r.reply.kind).toBe("error");
        if (fault === "client" || fault === "throw") expect(record.phase).toBe(MCP_PHASE_OF[point]);
        switch (fault) {
          case "client":
            expect(record).toMatchObject({ outcome: "cancelled", errorCode: "client_closed" });
            break;
          case "deadline":
            expect(record.errorCode).toBe("deadline_exceeded");
            break;
          case "drain":
            expect(record.errorCode).toBe("gateway_draining");
            break;
          case "throw":
            expect(record.outcome).toBe("error");
            break;
        }
        // Not sent: the approval still stands for the caller's retry (a claim taken is handed back).
        // Sent and stopped before its answer: unknown at the desk, never a retry. A drain is seen at
        // the next checkpoint, after the answer: the desk knows it ran.
        const sent = r.docs.calls.some((c) => c.method === "tools/call");
        if (!sent) expect(r.approval).toMatchObject({ state: "approved" });
        else expect(r.approval).toMatchObject({ state: "executed", execution: fault === "drain" ? "succeeded" : "unknown" });
      });
    }
  }
});

/**
 * A Looper run's sub-calls: the cascade's first step answers unsure, and its second step is
 * stopped at each of its own boundaries — its reservation, the provider's headers, its buffered
 * body, or while it waits in the admission queue — by each fault. The parent and every step end
 * once, and nothing either took is left.
 */
type StepPoint = "step-reserve" | "step-queued" | "step-headers" | "step-body";
const STEP_POINTS: readonly StepPoint[] = ["step-reserve", "step-queued", "step-headers", "step-body"];

function cascadeTexts() {
  const pub = bundled("publication");
  for (const m of pub.models) if (m.id === "chat-small" || m.id === "chat-large") m.revisions[0].requires = [...m.revisions[0].requires, "logprobs"];
  const ep = pub.entrypoints.find((e: { name: string }) => e.name === "sluice-chat");
  delete ep.routes;
  ep.decisions = [
    {
      name: "cascade",
      when: { signal: "prompt-tokens", above: 0 },
      models: [["chat-small"], ["chat-large"]],
      algorithm: { kind: "cascade", score: "avg_logprob", threshold: -0.5, bounds: { maxCalls: 3, maxParallel: 1, maxDepth: 1, maxTokens: 100_000, maxCostMicros: 1_000_000, maxTimeMs: 600_000 } },
    },
  ];
  return textsWith({ publication: pub });
}

async function stepScenario(point: StepPoint, fault: Fault) {
  let session: Session | undefined;
  let hits = 0;
  let steps = 0;
  let unblock: (() => void) | undefined;
  let blocked = false;
  const hit = async (at: StepPoint): Promise<void> => {
    if (at !== point) return;
    hits++;
    switch (fault) {
      case "throw":
        throw new Error(`injected at ${at}`);
      case "client":
        session!.abort("client_disconnected");
        return;
      case "deadline":
        h.timers.advance(h.config.gateway.traffic.requestDeadlineMs + 1);
        return;
      case "drain":
        await h.drain.drain(0);
        return;
    }
  };
  const breakers = probingBreakers();
  const snap = await snapshot([{ name: "a", port: 9001, caps: ["chat", "streaming", "stream-usage", "tools", "embeddings", "moderations", "logprobs"] }]);
  const unsure = { content: [{ token: "Hi", logprob: -3, top_logprobs: [] }] };
  let reserves = 0;
  const h = engineHarness({
    texts: cascadeTexts(),
    snapshot: async () => snap,
    breakers,
    admission: { limits: { global: 1 }, maxQueue: 4, maxQueuePerTenant: 4 },
    drainWait: async () => {},
    beforeReserve: () => (++reserves === 2 ? hit("step-reserve") : undefined),
    respond: async () => {
      const step = ++steps;
      if (step === 1) {
        // The blocker takes the only slot as the first step ends: the second step queues.
        // It queues behind this step's lease and takes it when this step ends.
        if (point === "step-queued") {
          void h.admission.admit({ tenant: "demo", model: "blocker" }, { deadlineAt: Infinity }).then((lease) => {
            if (!lease.ok) throw new Error("the blocker was not admitted");
            blocked = true;
            unblock = () => lease.lease.release();
          });
        }
        return Response.json({ id: "x", choices: [{ index: 0, message: { role: "assistant", content: "Hi" }, logprobs: unsure, finish_reason: "stop" }], usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 } });
      }
      await hit("step-headers");
      const body = JSON.stringify({ id: "y", choices: [{ index: 0, message: { role: "assistant", content: "Hello" }, finish_reason: "stop" }], usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 } });
      return new Response(
        new ReadableStream<Uint8Array>({
          async pull(c) {
            await hit("step-body");
            c.enqueue(enc.encode(body));
            c.close();
          },
        }),
        { headers: { "content-type": "application/json" } },
      );
    },
  });
  const warm: Promise<unknown>[] = [];
  breakers.forRequest((p) => void warm.push(p)).admission([...snap.backends.keys()][0]!);
  await Promise.all(warm);
  session = h.engine.begin(h.ingress(chat("hello", { max_tokens: 50 })));
  expect((await session.prepare()).kind).toBe("dispatch");
  const replying = session.dispatch();
  if (point === "step-queued") {
    // Polls, yielding to the event loop, until the first step ended, the blocker holds the slot and the second step waits.
    for (let i = 0; i < 200 && !(blocked && h.admission.stats().queued.total === 1); i++) await new Promise((r) => setTimeout(r, 0));
    expect([blocked, h.admission.stats().queued.total]).toEqual([true, 1]);
    await hit("step-queued");
    unblock!();
  }
  const reply = await replying;
  unblock?.();
  await h.settled();
  return { h, breakers, hits, reply, parentId: session.requestId };
}

describe("a Looper run stopped inside a sub-call releases everything the run and its steps took, once", () => {
  for (const point of STEP_POINTS) {
    for (const fault of FAULTS) {
      if (fault === "throw" && point === "step-queued") continue;
      it(`${fault} at ${point}`, async () => {
        const r = await stepScenario(point, fault);
        expect(r.hits, "the fault was injected").toBeGreaterThanOrEqual(1);
        expectNothingHeld(r as unknown as Awaited<ReturnType<typeof scenario>>);
        expect(r.reply.kind).toBe("error");
        const parent = r.h.requests.find((x) => x.requestId === r.parentId)!;
        const steps = r.h.requests.filter((x) => x.parentRequestId === r.parentId);
        // Each step has one record, and the run lists each step it started.
        expect(new Set(steps.map((s) => s.requestId)).size).toBe(steps.length);
        expect(parent.looper!.calls.map((c) => c.requestId)).toEqual(steps.map((s) => s.requestId));
        expect(steps[0]).toMatchObject({ outcome: "success" });
        switch (fault) {
          case "client":
            expect(parent).toMatchObject({ outcome: "cancelled", errorCode: "client_closed" });
            expect(steps[1]).toMatchObject({ outcome: "cancelled" });
            break;
          case "deadline":
            expect(parent.errorCode).toBe("deadline_exceeded");
            break;
          case "drain":
            expect(parent.errorCode).toBe("gateway_draining");
            break;
          case "throw":
            expect(parent.outcome).toBe("error");
            break;
        }
      });
    }
  }
});
