/**
 * What one upstream MCP request proves about the server having run it, and the one rule that
 * decides whether it may be sent again. Charging (a priced `tools/call`) and retrying read only
 * this, never error text.
 *
 * - `not_sent`: the request never left the gateway — the upstream session could not be opened,
 *   or the server's connect check found no listener. Known zero.
 * - `rate_limited`: the server answered HTTP 429: it refused the request before running it. Known zero.
 * - `refused`: the server refused the request as malformed or unknown — an HTTP 4xx other than
 *   429, or a JSON-RPC error of the protocol itself (parse error, invalid request, method not
 *   found, invalid params, which is how MCP servers answer an unknown tool). The tool did not run.
 * - `answered`: the server answered with a result (a tool's `isError` result included) or an
 *   error of its own: the request ran.
 * - `unknown`: sent, and nothing proves either way — a connection failure once the request may
 *   have been written (a refused connection and a reset look the same to `fetch`), a timeout, a
 *   cut or unreadable answer, a 5xx, a redirect.
 */
export type UpstreamEvidence = "not_sent" | "rate_limited" | "refused" | "answered" | "unknown";

/** JSON-RPC codes that mean the server did not run the request: -32700, -32600, -32601, -32602. */
const PROTOCOL_REFUSALS: ReadonlySet<number> = new Set([-32700, -32600, -32601, -32602]);

/** The evidence of a JSON-RPC answer (`error` is its error code, when it is an error). */
export function answerEvidence(status: number, errorCode: number | undefined): UpstreamEvidence {
  if (status === 429) return "rate_limited";
  if (status >= 400 && status < 500) return "refused";
  if (status >= 500) return "unknown";
  return errorCode !== undefined && PROTOCOL_REFUSALS.has(errorCode) ? "refused" : "answered";
}

/** The evidence of an HTTP answer that carried no JSON-RPC message the gateway could read. */
export function statusEvidence(status: number): UpstreamEvidence {
  if (status === 429) return "rate_limited";
  if (status >= 400 && status < 500) return "refused";
  return "unknown";
}

/** Whether the evidence proves the server did not run the request (nothing to charge). */
export function provesNotRun(e: UpstreamEvidence): boolean {
  return e === "not_sent" || e === "rate_limited" || e === "refused";
}

/** Methods that only read: sending one twice changes nothing. */
const READS: ReadonlySet<string> = new Set(["tools/list", "prompts/list", "prompts/get", "resources/list", "resources/templates/list", "resources/read", "server/discover", "ping"]);

/**
 * Whether a request that failed with `evidence` is sent once more (`tries` made so far). At most
 * one retry, and only on known-zero evidence: a `tools/call` only when it never left the gateway
 * (whatever a server answered, even a 429, is passed on: the caller decides whether to call a tool
 * again); a read also after a 429. Never on `unknown` — a timeout or a cut connection may have run
 * the tool — and never on a refusal, which would come back the same.
 */
export function mayRetry(method: string, evidence: UpstreamEvidence, tries: number): boolean {
  if (tries >= 2) return false;
  if (evidence === "not_sent") return method === "tools/call" || READS.has(method);
  return evidence === "rate_limited" && READS.has(method);
}
