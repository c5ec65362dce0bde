import { createParser } from "eventsource-parser";
import type { Clock } from "../deps/clock.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import type { ProbeFetch, ProbeResult, ProbeTarget } from "../traffic/health.ts";
import { STATELESS_VERSION } from "../protocol/mcp/stateless-request.ts";
import { STATEFUL_VERSION } from "./upstream-client.ts";

/**
 * Active health of an MCP server, on the backends' machinery (one HealthMonitor Durable Object per
 * server, its alarm, the same thresholds and fail-open reading). The probe asks what a client
 * asks before using a server — `server/discover` of a 2026-07-28 server, `initialize` of a
 * stateful one, whose session is ended at once — and never calls a tool: a probe must not run
 * anything a server could bill, log as work, or change state for.
 */

/** The HealthMonitor object of an MCP server: its own namespace beside backend ids (digests). */
export function mcpHealthId(server: string): string {
  return `mcp:${server}`;
}

/** What a server entry says about probing it. */
export interface McpProbeConfig {
  readonly url: string;
  readonly era: "stateful" | "stateless";
  readonly credential?: { readonly secret: string; readonly scheme: "bearer" | "x-api-key" } | undefined;
  readonly healthCheck?: { readonly intervalMs: number; readonly timeoutMs: number } | undefined;
}

/** The probe target of a server with `healthCheck`; undefined for one without (it is not probed). */
export function mcpProbeTarget(server: McpProbeConfig): ProbeTarget | undefined {
  const hc = server.healthCheck;
  if (hc === undefined) return undefined;
  return {
    url: server.url,
    method: "POST",
    mcp: { era: server.era },
    headers: {},
    ...(server.credential ? { credential: { authorizationSecret: server.credential.secret, scheme: server.credential.scheme } } : {}),
    timeoutMs: hc.timeoutMs,
    intervalMs: hc.intervalMs,
    jitterRatio: 0.2,
  };
}

/** An answer larger than this is not a discovery or initialize result: the probe stops reading. */
const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * One probe of an MCP server: success when it answers the discovery (or `initialize`) with a
 * JSON-RPC result, within `timeoutMs`. A stateful server's new session is ended with a DELETE,
 * whose outcome does not count. Redirects are not followed. Never throws or rejects.
 *
 * Reasons: `ok`, `http_<status>`, `jsonrpc_error: <code>`, `not_mcp` (no JSON-RPC result),
 * `timeout`, `network_error: <message>`.
 */
export async function probeMcpServer(
  fetchFn: ProbeFetch,
  target: Pick<ProbeTarget, "url" | "headers" | "timeoutMs" | "mcp">,
  clock: Clock,
  credentialHeaders: Readonly<Record<string, string>> = {},
): Promise<ProbeResult> {
  const started = clock.now();
  const latency = () => Math.max(0, clock.now() - started);
  const stateless = target.mcp?.era !== "stateful";
  const signal = AbortSignal.timeout(target.timeoutMs);
  // A fetch that ignores its signal still cannot hold the probe past the timeout.
  const expired = new Promise<"timeout">((resolve) => signal.addEventListener("abort", () => resolve("timeout"), { once: true }));
  const base = { ...target.headers, ...credentialHeaders, "content-type": "application/json", accept: "application/json, text/event-stream" };
  const message = stateless
    ? { jsonrpc: "2.0", id: 1, method: "server/discover", params: { _meta: { "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION, "io.modelcontextprotocol/clientCapabilities": {} } } }
    : { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: STATEFUL_VERSION, capabilities: {}, clientInfo: { name: "sluice-health", version: "0" } } };
  const headers = stateless ? { ...base, "mcp-protocol-version": STATELESS_VERSION, "mcp-method": "server/discover" } : base;
  const work = (async (): Promise<ProbeResult> => {
    const res = await fetchFn(target.url, { method: "POST", headers, body: JSON.stringify(message), signal, redirect: "manual" });
    const session = stateless ? null : res.headers.get("mcp-session-id");
    try {
      if (res.status < 200 || res.status >= 300) {
        void res.body?.cancel().catch(() => {});
        return { ok: false, status: res.status, latencyMs: latency(), reason: `http_${res.status}` };
      }
      const answer = await firstAnswer(res);
      if (answer === undefined) return { ok: false, status: res.status, latencyMs: latency(), reason: "not_mcp" };
      if ("error" in answer) return { ok: false, status: res.status, latencyMs: latency(), reason: `jsonrpc_error: ${answer.error}` };
      return { ok: true, status: res.status, latencyMs: latency(), reason: "ok" };
    } finally {
      // The probe's session serves nothing: end it rather than leave it to the server's expiry.
      if (session) await endSession(fetchFn, target.url, { ...target.headers, ...credentialHeaders }, session, signal);
    }
  })().catch((err: unknown): ProbeResult => (signal.aborted ? { ok: false, latencyMs: latency(), reason: "timeout" } : { ok: false, latencyMs: latency(), reason: `network_error: ${errorMessage(err)}` }));
  const outcome = await Promise.race([work, expired]);
  return outcome === "timeout" ? { ok: false, latencyMs: latency(), reason: "timeout" } : outcome;
}

async function endSession(fetchFn: ProbeFetch, url: string, headers: Readonly<Record<string, string>>, session: string, signal: AbortSignal): Promise<void> {
  try {
    const res = await fetchFn(url, { method: "DELETE", headers: { ...headers, "mcp-session-id": session, "mcp-protocol-version": STATEFUL_VERSION }, signal, redirect: "manual" });
    await res.body?.cancel();
  } catch {
    // Best effort: the server expires the session on its own.
  }
}

type Answer = { readonly result: unknown } | { readonly error: number };

/** The probe's answer (id 1) in a JSON-RPC message, if it is one. */
function answerOf(m: unknown): Answer | undefined {
  if (!isRecord(m) || m.id !== 1) return undefined;
  if (isRecord(m.result)) return { result: m.result };
  if (isRecord(m.error)) return { error: typeof m.error.code === "number" ? m.error.code : 0 };
  return undefined;
}

/**
 * The probe's answer in a JSON body or an SSE stream, read at most `MAX_ANSWER_BYTES`; a stream
 * is left as soon as the answer arrived (a server may keep it open). Undefined when there is none.
 */
async function firstAnswer(res: Response): Promise<Answer | undefined> {
  if (!res.body) return undefined;
  const sse = /^text\/event-stream/i.test(res.headers.get("content-type") ?? "");
  let found: Answer | undefined;
  const parser = createParser({
    onEvent: (ev) => {
      try {
        found ??= answerOf(JSON.parse(ev.data));
      } catch {
        // Not a JSON-RPC message: ignored, like any event a probe does not need.
      }
    },
  });
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > MAX_ANSWER_BYTES) return undefined;
      const chunk = decoder.decode(value, { stream: true });
      if (sse) {
        parser.feed(chunk);
        if (found) return found;
      } else text += chunk;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  if (sse) return found;
  try {
    return answerOf(JSON.parse(text + decoder.decode()));
  } catch {
    return undefined;
  }
}

function errorMessage(err: unknown): string {
  const m = err instanceof Error ? err.message : String(err);
  return m.length > 200 ? `${m.slice(0, 200)}…` : m;
}
