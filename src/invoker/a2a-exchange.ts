/**
 * The invoke phase of an A2A call: one JSON-RPC request to the agent's own JSON-RPC URL for the
 * generation spoken, built here from scratch — the agent's credential from gateway.yaml, its
 * `A2A-Version`, nothing of the caller's headers — through the egress guard, on the request's
 * signal (its deadline and the client's disconnect), redirects never followed. The answer is one
 * JSON-RPC response, or an SSE stream of them relayed event by event; in both, a string that is
 * the agent's JSON-RPC URL becomes the gateway's URL for the agent.
 */

import { createParser } from "eventsource-parser";
import { checkEgress, type EgressPolicy } from "../egress/egress-guard.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import { answerEvidence, statusEvidence, type UpstreamEvidence } from "../mcp/upstream-evidence.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import type { A2aGeneration } from "../protocol/a2a/agent-card.ts";

/** How to reach agents: the network, and the rules it is reached under. */
export interface A2aNetwork {
  readonly fetch: typeof fetch;
  readonly egress: EgressPolicy;
}

/** One call to send. */
export interface A2aOutbound {
  /** The agent's name (for messages). */
  readonly agent: string;
  /** The agent's JSON-RPC URL for `generation` (from its card). */
  readonly url: string;
  readonly generation: A2aGeneration;
  /** The agent's credential header from gateway.yaml, or none. */
  readonly credential: Readonly<Record<string, string>>;
  /** The JSON-RPC request as sent (the caller's id, method and params). */
  readonly message: object;
  readonly streaming: boolean;
  /** The gateway's URL for the agent, which replaces the agent's own in answers. */
  readonly gatewayUrl: string;
  readonly signal: AbortSignal;
  /** Called, synchronously, when the request is handed to `fetch` (from then on it may run). */
  readonly onSent: () => void;
  /** Called once with what the call proves (see upstream-evidence.ts). */
  readonly onEvidence: (e: UpstreamEvidence) => void;
}

/** What the agent answered: one JSON-RPC response, or a stream of SSE-framed ones. */
export type A2aAnswer =
  | { readonly kind: "json"; readonly body: Readonly<Record<string, unknown>>; readonly errorCode: number | undefined }
  | { readonly kind: "stream"; readonly events: AsyncIterable<Readonly<Record<string, unknown>>> };

/** The largest JSON answer the gateway reads from an agent. */
const MAX_ANSWER_CHARS = 8 * 1024 * 1024;
/** The largest single SSE event. */
const MAX_EVENT_CHARS = 1024 * 1024;

/** The headers sent to an agent: only the gateway's own. */
function outboundHeaders(o: A2aOutbound): Record<string, string> {
  return {
    ...o.credential,
    "content-type": "application/json",
    accept: o.streaming ? "text/event-stream" : "application/json",
    "a2a-version": o.generation,
  };
}

/** Replaces every JSON string that is exactly the agent's JSON-RPC URL with the gateway's. */
export function rewriteAgentUrl(text: string, agentUrl: string, gatewayUrl: string): string {
  const from = JSON.stringify(agentUrl);
  return text.includes(from) ? text.split(from).join(JSON.stringify(gatewayUrl)) : text;
}

/**
 * Sends one call to its agent. Refused before sending (the egress guard): `not_sent`. Sent: the
 * evidence of the HTTP answer (a JSON-RPC protocol error from the agent proves it did not run).
 * A stream's evidence is its opening: a 200 stream was accepted and runs.
 */
export async function sendToAgent(net: A2aNetwork, o: A2aOutbound): Promise<A2aAnswer> {
  const verdict = checkEgress(o.url, net.egress);
  if (!verdict.ok) {
    o.onEvidence("not_sent");
    throw new GatewayError("internal_error", `The gateway refused to call the address agent ${o.agent}'s card names.`, { cause: `egress refused (${verdict.refusal.code}): ${verdict.refusal.message}` });
  }
  let res: Response;
  try {
    o.onSent();
    res = await net.fetch(verdict.url, { method: "POST", headers: outboundHeaders(o), body: JSON.stringify(o.message), redirect: "manual", signal: o.signal });
  } catch (err) {
    o.onEvidence("unknown");
    if (o.signal.aborted) throw err;
    throw new GatewayError("upstream_unreachable", `Agent ${o.agent} could not be reached.`, { cause: err });
  }
  try {
    return await answerOf(o, res);
  } catch (err) {
    await res.body?.cancel().catch(() => undefined);
    throw err;
  }
}

async function answerOf(o: A2aOutbound, res: Response): Promise<A2aAnswer> {
  if (res.status >= 300 && res.status < 400) {
    o.onEvidence("unknown");
    throw new GatewayError("upstream_error", `Agent ${o.agent} answered with a redirect, which the gateway does not follow.`);
  }
  if (res.status === 401 || res.status === 403) {
    o.onEvidence("refused");
    throw new GatewayError("upstream_auth_failed", `Agent ${o.agent} refused the gateway's credential (${res.status}).`);
  }
  const type = res.headers.get("content-type") ?? "";
  if (res.ok && /^text\/event-stream/i.test(type) && res.body) {
    o.onEvidence("answered");
    return { kind: "stream", events: relayEvents(o, res.body) };
  }
  const text = await res.text();
  if (text.length > MAX_ANSWER_CHARS) {
    o.onEvidence(statusEvidence(res.status) === "refused" ? "refused" : "unknown");
    throw new GatewayError("upstream_protocol_error", `Agent ${o.agent}'s answer is larger than the gateway reads.`);
  }
  let body: unknown;
  try {
    body = JSON.parse(rewriteAgentUrl(text, o.url, o.gatewayUrl));
  } catch {
    o.onEvidence(statusEvidence(res.status));
    throw new GatewayError(res.ok ? "upstream_protocol_error" : "upstream_error", `Agent ${o.agent} answered ${res.status} with a body that is not JSON.`);
  }
  if (!isRecord(body) || (!("result" in body) && !isRecord(body.error))) {
    o.onEvidence(statusEvidence(res.status));
    throw new GatewayError(res.ok ? "upstream_protocol_error" : "upstream_error", `Agent ${o.agent}'s answer (${res.status}) carried no JSON-RPC result or error.`);
  }
  const errorCode = isRecord(body.error) && typeof body.error.code === "number" ? body.error.code : undefined;
  o.onEvidence(answerEvidence(res.status, errorCode));
  return { kind: "json", body, errorCode };
}

/** The agent's SSE events, each one JSON-RPC response, with its URL rewritten. */
async function* relayEvents(o: A2aOutbound, body: ReadableStream<Uint8Array>): AsyncGenerator<Readonly<Record<string, unknown>>> {
  const queue: string[] = [];
  let tooLarge = false;
  const parser = createParser({
    onEvent: (ev) => {
      if (ev.data === "") return;
      if (ev.data.length > MAX_EVENT_CHARS) tooLarge = true;
      else queue.push(ev.data);
    },
  });
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parser.feed(value);
      if (tooLarge) throw new GatewayError("upstream_protocol_error", `Agent ${o.agent} sent a stream event larger than the gateway relays.`);
      while (queue.length > 0) {
        let event: unknown;
        try {
          event = JSON.parse(rewriteAgentUrl(queue.shift()!, o.url, o.gatewayUrl));
        } catch {
          throw new GatewayError("upstream_protocol_error", `Agent ${o.agent} sent a stream event that is not JSON.`);
        }
        if (!isRecord(event)) throw new GatewayError("upstream_protocol_error", `Agent ${o.agent} sent a stream event that is not a JSON-RPC response.`);
        yield event;
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
