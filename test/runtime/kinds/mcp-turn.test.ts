/**
 * The MCP kind on the one runner, through fake upstream servers: what each kind of request does
 * in each phase, what it records, and what it holds afterwards.
 */
import { describe, expect, it } from "vitest";
import { auditEventsOf } from "../../../src/task-ledger/call-record.ts";
import { fakeServer, mcpHarness, resultOf, type FakeServer } from "../support/mcp-harness.ts";

const ALLOW_ALL = { id: "all", effect: "allow", servers: ["*"], names: ["*"] };
const phasesOf = (r: { phases: readonly { phase: string }[] }) => r.phases.map((p) => p.phase);

/** Every admission lease, queue place and drain ticket is back, and each ledger reservation ended once. */
function expectNothingHeld(h: Awaited<ReturnType<typeof mcpHarness>>) {
  const a = h.admission.stats();
  expect({ leases: a.inFlight.global, queued: a.queued.total, tickets: h.drain.inFlight }).toEqual({ leases: 0, queued: 0, tickets: 0 });
  for (const [id, endings] of h.endings) expect(endings, id).toHaveLength(1);
  expect(h.undoErrors).toEqual([]);
}

describe("the MCP kind", () => {
  it("lists the virtual server's tools under their servers' names, hiding what the policy denies, through every phase", async () => {
    const h = await mcpHarness({
      servers: [fakeServer("docs", [{ name: "search" }, { name: "delete_all" }]), fakeServer("ops", [{ name: "status" }])],
      rules: [ALLOW_ALL, { id: "no-delete", effect: "deny", servers: ["*"], names: ["delete_*"] }],
    });
    const result = resultOf(await h.call("tools/list"));
    expect((result.tools as { name: string }[]).map((t) => t.name)).toEqual(["docs.search", "ops.status"]);
    expect(result).toMatchObject({ resultType: "complete", ttlMs: 0, cacheScope: "private" });
    await h.settled();
    const [r] = h.requests;
    expect(phasesOf(r!)).toEqual(["authenticate", "decode", "authorize", "decide", "reserve", "admit", "invoke", "respond"]);
    expect(r).toMatchObject({ outcome: "success", entrypoint: "mcp", route: "tools/list", mcp: { method: "tools/list" } });
    expectNothingHeld(h);
  });

  it("answers the gateway's own methods where they were decoded, without reaching a server", async () => {
    const docs = fakeServer("docs", [{ name: "search" }]);
    const h = await mcpHarness({ servers: [docs], rules: [ALLOW_ALL] });
    expect(resultOf(await h.call("ping"))).toEqual({ resultType: "complete" });
    expect(resultOf(await h.call("server/discover"))).toMatchObject({ supportedVersions: ["2026-07-28"] });
    expect(await h.call("notifications/cancelled", { requestId: 1 }, { id: null })).toEqual({ kind: "result", status: 202, body: undefined });
    await h.settled();
    expect(h.requests.map(phasesOf)).toEqual([
      ["authenticate", "decode", "respond"],
      ["authenticate", "decode", "respond"],
      ["authenticate", "decode"],
    ]);
    expect(docs.calls).toEqual([]);
  });

  it("routes a tool call by its namespaced name, records the policy's decision, and sends only what was allowed", async () => {
    const docs = fakeServer("docs", [{ name: "search" }]);
    const h = await mcpHarness({ servers: [docs], rules: [ALLOW_ALL] });
    const result = resultOf(await h.call("tools/call", { name: "docs.search", arguments: { q: "x" } }));
    expect(result).toMatchObject({ resultType: "complete", content: [{ type: "text", text: "docs.search ran" }] });
    expect(docs.calls).toEqual([{ method: "tools/call", params: { name: "search", arguments: { q: "x" } } }]);
    await h.settled();
    expect(h.requests[0]).toMatchObject({ outcome: "success", mcp: { server: "docs", target: "search", toolSent: true, decision: { allowed: true, rule: "all", policyRevision: "p-test" } } });
    expectNothingHeld(h);
  });

  it("refuses a denied call in its authorize phase, audited, and never sends it", async () => {
    const docs = fakeServer("docs", [{ name: "drop" }]);
    const h = await mcpHarness({ servers: [docs], rules: [ALLOW_ALL, { id: "no-drop", effect: "deny", servers: ["docs"], names: ["drop"] }] });
    const reply = await h.call("tools/call", { name: "docs.drop", arguments: {} });
    expect(reply).toMatchObject({ kind: "error", error: { code: "tool_not_allowed" } });
    await h.settled();
    expect(h.requests[0]).toMatchObject({ phase: "authorize", outcome: "error", errorCode: "tool_not_allowed", mcp: { decision: { allowed: false, rule: "no-drop" } } });
    expect(docs.calls).toEqual([]);
  });

  it("charges a priced tool call once when its server answered, and releases it when the call was never sent", async () => {
    const prices = [{ id: "search", servers: ["docs"], names: ["search"], price: { version: "tp-1", currency: "USD", perCall: 0.01 } }];
    const h = await mcpHarness({ servers: [fakeServer("docs", [{ name: "search" }])], rules: [ALLOW_ALL], prices });
    resultOf(await h.call("tools/call", { name: "docs.search", arguments: {} }));
    await h.settled();
    expect(h.requests[0]!.mcp?.charge).toMatchObject({ rule: "search", micros: 10_000, settlement: "charged" });
    expect([...h.endings.values()]).toEqual([["settle"]]);

    const refused = await mcpHarness({ servers: [fakeServer("docs", [{ name: "search", run: () => Promise.reject(new Error("connect refused")) }])], rules: [ALLOW_ALL], prices });
    // The fake tells the gateway it handed the call over; with no answer the evidence is unknown: held for reconciliation.
    expect(await refused.call("tools/call", { name: "docs.search", arguments: {} })).toMatchObject({ kind: "error" });
    await refused.settled();
    expect(refused.requests[0]!.mcp?.charge).toMatchObject({ settlement: "pending_reconciliation" });
    expectNothingHeld(refused);
  });

  it("holds an approval-gated call in decide, and runs the approved retry once, in every phase", async () => {
    const docs = fakeServer("docs", [{ name: "wipe" }]);
    const h = await mcpHarness({ servers: [docs], rules: [{ id: "risky", effect: "allow", servers: ["docs"], names: ["wipe"], approval: "required" }], approvals: true });
    const first = resultOf(await h.call("tools/call", { name: "docs.wipe", arguments: { all: true } }));
    expect(first).toMatchObject({ resultType: "input_required" });
    const id = ((first.inputRequests as { approval: { params: { elicitationId: string } } }).approval.params.elicitationId);
    await h.desk().decide(id, "approve", "alice", "ok");
    const retry = resultOf(await h.call("tools/call", { name: "docs.wipe", arguments: { all: true }, requestState: first.requestState }));
    expect(retry).toMatchObject({ resultType: "complete" });
    expect(docs.calls.filter((c) => c.method === "tools/call")).toHaveLength(1);
    await h.settled();
    expect(phasesOf(h.requests[0]!)).toEqual(["authenticate", "decode", "authorize", "decide", "respond"]);
    expect(phasesOf(h.requests[1]!)).toEqual(["authenticate", "decode", "authorize", "decide", "reserve", "admit", "invoke", "respond"]);
    expect(await h.desk().get(id)).toMatchObject({ state: "executed", execution: "succeeded" });
    expect(h.requests[1]!.mcp).toMatchObject({ approvalId: id, toolSent: true });
    expectNothingHeld(h);
  });

  /**
   * The probe: an approved call whose server never answers, and whose request is aborted once the
   * call was sent — the case where workerd may never run the request's code again. The claim is
   * the request's holding, so the abort's terminal tells the desk `unknown` (reconciliation,
   * never a retry), and the call ledger's tool.executed says `unknown` too. Before, the claim was
   * finished by a continuation of the call's promise, which never ran here: the approval stayed
   * `claimed` for ever and the execution was recorded as `failed`.
   */
  it("an approved execution aborted after its claim ends unknown at the desk and in the call ledger", async () => {
    let sent!: () => void;
    const reached = new Promise<void>((r) => (sent = r));
    const hang: FakeServer = fakeServer("docs", [
      {
        name: "wipe",
        // Handed over, then never answers — not even to the abort: the continuation never runs.
        run: () => (sent(), new Promise(() => {})),
      },
    ]);
    const h = await mcpHarness({ servers: [hang], rules: [{ id: "risky", effect: "allow", servers: ["docs"], names: ["wipe"], approval: "required" }], approvals: true });
    const first = resultOf(await h.call("tools/call", { name: "docs.wipe", arguments: {} }));
    const id = ((first.inputRequests as { approval: { params: { elicitationId: string } } }).approval.params.elicitationId);
    await h.desk().decide(id, "approve", "alice", "ok");
    const session = h.engine.beginMcp(h.ingress("tools/call", { name: "docs.wipe", arguments: {}, requestState: first.requestState }))!;
    void session.run();
    await reached;
    expect(await h.desk().get(id)).toMatchObject({ state: "executed", execution: "claimed" });
    session.abort("client_disconnected");
    await h.settled();
    expect(await h.desk().get(id)).toMatchObject({ state: "executed", execution: "unknown" });
    const record = h.requests[1]!;
    expect(record).toMatchObject({ outcome: "cancelled", mcp: { toolSent: true, approvalId: id } });
    const executed = auditEventsOf(record, [], () => "evt", "attributed").find((e) => e.type === "tool.executed");
    expect(executed).toMatchObject({ execution: "unknown", approvalId: id });
    expectNothingHeld(h);
  });

  it("releases a stateful-era request's cancellation registration with the request, however it ends", async () => {
    const docs = fakeServer("docs", [{ name: "search" }], "stateful");
    const h = await mcpHarness({ servers: [docs], rules: [ALLOW_ALL], sessions: true });
    const init = await h.engine
      .beginMcp(
        h.ingress("initialize", {}, {
          headers: new Headers(),
          readBody: async () => ({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } } }),
        }),
      )!
      .run();
    const sessionId = (init as { headers: Record<string, string> }).headers["mcp-session-id"]!;
    const legacy = (id: number, method: string, params: Record<string, unknown>) =>
      h.ingress(method, params, { headers: new Headers({ "mcp-session-id": sessionId, "mcp-protocol-version": "2025-11-25" }), readBody: async () => ({ jsonrpc: "2.0", id, method, params }) });
    const reply = await h.engine.beginMcp(legacy(7, "tools/call", { name: "docs.search", arguments: {} }))!.run();
    expect(reply).toMatchObject({ kind: "result", status: 200 });
    // The request ended: a late cancellation of its id finds nothing registered.
    expect(h.mcp.inFlight.cancel(sessionId, 7)).toBe(false);
    await h.settled();
    expect(phasesOf(h.requests[0]!)).toEqual(["authenticate", "decode"]);
    expectNothingHeld(h);
  });
});
