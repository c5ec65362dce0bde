import { describe, expect, it } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { sendToAgent, type A2aOutbound } from "../../../src/invoker/a2a-exchange.ts";
import type { UpstreamEvidence } from "../../../src/mcp/upstream-evidence.ts";

const AGENT_URL = "http://127.0.0.1:9999/rpc";
const GATEWAY_URL = "https://gw.example/a2a/helpdesk";

interface Seen {
  url: string;
  init: RequestInit;
}

function harness(answer: (seen: Seen) => Response, allow: readonly string[] = ["127.0.0.1:9999"]) {
  const seen: Seen[] = [];
  const evidence: UpstreamEvidence[] = [];
  let sent = 0;
  const net = {
    egress: { allow },
    fetch: (async (input: RequestInfo | URL, init?: RequestInit) => {
      const s = { url: String(input), init: init ?? {} };
      seen.push(s);
      return answer(s);
    }) as typeof fetch,
  };
  const out = (over: Partial<A2aOutbound> = {}): A2aOutbound => ({
    agent: "helpdesk",
    url: AGENT_URL,
    generation: "1.0",
    credential: { authorization: "Bearer agent-own" },
    message: { jsonrpc: "2.0", id: 1, method: "SendMessage", params: {} },
    streaming: false,
    gatewayUrl: GATEWAY_URL,
    signal: new AbortController().signal,
    onSent: () => void sent++,
    onEvidence: (e) => void evidence.push(e),
    ...over,
  });
  return { net, out, seen, evidence, sent: () => sent };
}

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

describe("sending an A2A call to its agent", () => {
  it("sends only the gateway's headers (the agent's credential, its A2A-Version), and rewrites the agent's URL in the answer", async () => {
    const h = harness(() => json({ jsonrpc: "2.0", id: 1, result: { task: { id: "t", contextId: "c", status: { message: { parts: [{ url: AGENT_URL }] } } } } }));
    const answer = await sendToAgent(h.net, h.out());
    expect(answer.kind).toBe("json");
    expect(JSON.stringify(answer.kind === "json" ? answer.body : {})).toContain(GATEWAY_URL);
    expect(JSON.stringify(answer.kind === "json" ? answer.body : {})).not.toContain(AGENT_URL);
    const headers = h.seen[0]!.init.headers as Record<string, string>;
    expect(headers).toEqual({ authorization: "Bearer agent-own", "content-type": "application/json", accept: "application/json", "a2a-version": "1.0" });
    expect(h.seen[0]!.init.redirect).toBe("manual");
    expect(h.evidence).toEqual(["answered"]);
    expect(h.sent()).toBe(1);
  });

  it("never sends to an address the egress guard refuses: not sent, and said so", async () => {
    const h = harness(() => json({}), []);
    const err = (await sendToAgent(h.net, h.out()).catch((e: unknown) => e)) as GatewayError;
    expect(err).toBeInstanceOf(GatewayError);
    expect(h.seen).toHaveLength(0);
    expect(h.sent()).toBe(0);
    expect(h.evidence).toEqual(["not_sent"]);
  });

  it("reads the agent's own JSON-RPC error as its answer; a protocol error proves it did not run", async () => {
    const h = harness(() => json({ jsonrpc: "2.0", id: 1, error: { code: -32001, message: "Task not found" } }));
    const answer = await sendToAgent(h.net, h.out());
    expect(answer).toMatchObject({ kind: "json", errorCode: -32001 });
    expect(h.evidence).toEqual(["answered"]);
    const refused = harness(() => json({ jsonrpc: "2.0", id: 1, error: { code: -32602, message: "bad params" } }));
    await sendToAgent(refused.net, refused.out());
    expect(refused.evidence).toEqual(["refused"]);
  });

  it("refuses a redirect, the agent refusing the gateway's credential, and a body that is not JSON-RPC", async () => {
    const codes = [];
    for (const res of [new Response(null, { status: 302, headers: { location: "http://10.0.0.1/" } }), new Response("no", { status: 401 }), new Response("<html>", { status: 200 }), json({ hello: 1 })]) {
      const h = harness(() => res);
      codes.push(((await sendToAgent(h.net, h.out()).catch((e: unknown) => e)) as GatewayError).code);
    }
    expect(codes).toEqual(["upstream_error", "upstream_auth_failed", "upstream_protocol_error", "upstream_protocol_error"]);
  });

  it("relays an SSE answer event by event, each rewritten", async () => {
    const events = [{ jsonrpc: "2.0", id: 1, result: { task: { id: "t" } } }, { jsonrpc: "2.0", id: 1, result: { statusUpdate: { taskId: "t", note: AGENT_URL } } }];
    const body = events.map((e) => `event: message\ndata: ${JSON.stringify(e)}\n\n`).join("");
    const h = harness(() => new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } }));
    const answer = await sendToAgent(h.net, h.out({ streaming: true }));
    expect((h.seen[0]!.init.headers as Record<string, string>).accept).toBe("text/event-stream");
    expect(answer.kind).toBe("stream");
    const got = [];
    if (answer.kind === "stream") for await (const e of answer.events) got.push(e);
    expect(got).toEqual([events[0], { jsonrpc: "2.0", id: 1, result: { statusUpdate: { taskId: "t", note: GATEWAY_URL } } }]);
  });
});
