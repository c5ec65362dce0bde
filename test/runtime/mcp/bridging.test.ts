import { describe, expect, it } from "vitest";
import { carriedCapabilities, clientTakes, inputRequiredOf } from "../../../src/mcp/bridging.ts";
import { ClientRelays, clientResponseOf, InFlightRequests } from "../../../src/mcp/client-relays.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { upstreamRefusal, UpstreamRefusal } from "../../../src/mcp/upstream-errors.ts";
import { toJsonRpcErrorBody } from "../../../src/errors/json-rpc.ts";

describe("the bridging matrix", () => {
  const declared = { elicitation: { form: {} }, sampling: {}, experimental: { x: {} }, roots: true };

  it("declares upstream only what the direction can carry, each as the client declared it", () => {
    expect(carriedCapabilities("stateful", "stateful", declared)).toEqual({ elicitation: { form: {} }, sampling: {} });
    expect(carriedCapabilities("stateful", "stateless", declared)).toEqual({ elicitation: { form: {} }, sampling: {} });
    expect(carriedCapabilities("stateless", "stateless", declared)).toEqual({ elicitation: { form: {} }, sampling: {} });
    // Not carried: a 2026 client has no in-stream requests to take a stateful server's.
    expect(carriedCapabilities("stateless", "stateful", declared)).toEqual({});
    // A server the gateway answers itself asks nothing.
    expect(carriedCapabilities("stateful", undefined, declared)).toEqual({});
  });

  it("knows which capability a server-to-client request needs", () => {
    expect(clientTakes("elicitation/create", declared)).toBe(true);
    expect(clientTakes("roots/list", declared)).toBe(false);
    expect(clientTakes("tools/call", declared)).toBe(false);
  });

  it("reads input_required results and nothing else", () => {
    expect(inputRequiredOf({ resultType: "complete", content: [] })).toBeUndefined();
    expect(inputRequiredOf({ resultType: "input_required", inputRequests: { a: { method: "elicitation/create", params: { message: "?" } }, bad: 3 }, requestState: "s" })).toEqual({
      inputRequests: { a: { method: "elicitation/create", params: { message: "?" } } },
      requestState: "s",
    });
  });
});

describe("requests relayed to stateful-era clients", () => {
  it("sends under a minted id and resolves with the answer of the same session only", async () => {
    const relays = new ClientRelays();
    const sent: Record<string, unknown>[] = [];
    const asked = relays.ask("session-a", { method: "elicitation/create", params: { message: "?" } }, (m) => sent.push(m), new AbortController().signal);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ jsonrpc: "2.0", method: "elicitation/create", params: { message: "?" } });
    const id = sent[0]!.id as string;
    expect(relays.answer("session-b", { id, result: { action: "accept" } })).toBe(false);
    expect(relays.answer("session-a", { id: "other", result: {} })).toBe(false);
    expect(relays.answer("session-a", { id, result: { action: "accept" } })).toBe(true);
    await expect(asked).resolves.toEqual({ result: { action: "accept" } });
    // Delivered once: a second answer finds nothing waiting.
    expect(relays.answer("session-a", { id, result: {} })).toBe(false);
    expect(relays.size).toBe(0);
  });

  it("stops waiting when the request that asked ends", async () => {
    const relays = new ClientRelays();
    const ended = new AbortController();
    const asked = relays.ask("s", { method: "sampling/createMessage" }, () => undefined, ended.signal);
    ended.abort();
    await expect(asked).rejects.toMatchObject({ code: "client_closed" });
    expect(relays.size).toBe(0);
  });

  it("tells a client's response from its requests and notifications", () => {
    expect(clientResponseOf({ jsonrpc: "2.0", id: "x", result: { action: "decline" } })).toEqual({ id: "x", result: { action: "decline" } });
    expect(clientResponseOf({ jsonrpc: "2.0", id: 3, error: { code: -1, message: "no" } })).toEqual({ id: 3, error: { code: -1, message: "no" } });
    expect(clientResponseOf({ jsonrpc: "2.0", id: 3, method: "tools/list" })).toBeUndefined();
    expect(clientResponseOf({ jsonrpc: "2.0", method: "notifications/initialized" })).toBeUndefined();
    expect(clientResponseOf({ jsonrpc: "2.0", id: null, result: {} })).toBeUndefined();
  });
});

describe("stateful-era requests in flight", () => {
  it("a cancellation ends only the request it names, in the session it names, once", async () => {
    const inFlight = new InFlightRequests();
    const ended: string[] = [];
    const off = inFlight.register("s1", 7, () => ended.push("s1/7"));
    inFlight.register("s1", "7", () => ended.push("s1/'7'"));
    inFlight.register("s2", 7, () => ended.push("s2/7"));
    expect(inFlight.cancel("s1", 8)).toBe(false);
    expect(inFlight.cancel("s1", { id: 7 })).toBe(false);
    expect(inFlight.cancel("s1", 7)).toBe(true);
    expect(inFlight.cancel("s1", 7)).toBe(false);
    await Promise.resolve();
    expect(ended).toEqual(["s1/7"]);
    off();
    // A request that ended is not cancelled afterwards.
    const gone = inFlight.register("s3", 1, () => ended.push("s3/1"));
    gone();
    expect(inFlight.cancel("s3", 1)).toBe(false);
  });
});

describe("an upstream server's JSON-RPC errors", () => {
  it("keep their protocol meaning as the gateway's codes, and are in-band", () => {
    const cases: [number, string][] = [
      [-32602, "invalid_request"],
      [-32601, "mcp_method_not_found"],
      [-32021, "mcp_missing_capability"],
      [-32002, "not_found"],
      [-32042, "mcp_url_elicitation_required"],
      [-32603, "upstream_error"],
      [7, "upstream_error"],
    ];
    for (const [code, expected] of cases) {
      const err = upstreamRefusal("docs", { code, message: "because" });
      expect(err).toBeInstanceOf(GatewayError);
      expect(err).toBeInstanceOf(UpstreamRefusal);
      expect(err.code).toBe(expected);
      expect(err.message).toBe("MCP server docs: because");
    }
  });

  it("carries a server's URL elicitations from its -32042 to the client, bounded, and no other data", () => {
    const data = {
      elicitations: [
        { mode: "url", elicitationId: "e1", url: "https://auth.example.com/consent?x=1", message: "Sign in to Example" },
        { mode: "form", elicitationId: "e2", requestedSchema: {} },
        { mode: "url", elicitationId: "e3", url: "javascript:alert(1)", message: "no" },
        ...Array.from({ length: 20 }, (_, i) => ({ mode: "url", elicitationId: `m${i}`, url: `https://x.example/${i}` })),
      ],
      secret: "not carried",
    };
    const body = toJsonRpcErrorBody(upstreamRefusal("docs", { code: -32042, message: "consent first", data }), 4);
    expect(body.error.code).toBe(-32042);
    const carried = body.error.data.elicitations as { elicitationId: string; url: string; message: string }[];
    expect(carried[0]).toEqual({ mode: "url", elicitationId: "e1", url: "https://auth.example.com/consent?x=1", message: "Sign in to Example" });
    // Only URL mode with an http(s) URL, of the list's first eight entries.
    expect(carried.map((e) => e.elicitationId)).toEqual(["e1", "m0", "m1", "m2", "m3", "m4"]);
    expect(JSON.stringify(body)).not.toContain("not carried");
    // Without usable elicitations it is still -32042, with nothing to follow.
    expect(toJsonRpcErrorBody(upstreamRefusal("docs", { code: -32042, message: "x", data: { elicitations: "no" } }), 5).error.data.elicitations).toBeUndefined();
  });
});
