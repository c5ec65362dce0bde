import { checkEgress, type EgressPolicy } from "../egress/egress-guard.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import { checkArguments } from "./input-schema.ts";
import { buildRestRequest, trimResponse, type RestServerConfig, type RestTarget, type RestToolConfig } from "./rest-tool.ts";
import type { UpstreamAnswer, UpstreamRequestOptions } from "./upstream-client.ts";
import { statusEvidence, type UpstreamEvidence } from "./upstream-evidence.ts";

/**
 * An MCP server the gateway serves itself from an HTTP API: `tools/list` answers the configured
 * tools, and `tools/call` checks the arguments against the tool's schema, builds one request from
 * its template and turns the API's answer into a tool result. Nothing of the caller's request but
 * the arguments reaches the API; its credential comes from a secret.
 */

/** What a REST server needs besides its configuration. */
export interface RestServerOptions extends RestTarget {
  readonly rest: RestServerConfig;
  readonly secret: (name: string) => string | undefined;
  readonly egress: EgressPolicy;
  readonly fetch: typeof fetch;
}

/** JSON-RPC's "method not found": what an MCP server without prompts or resources answers. */
const METHOD_NOT_FOUND: UpstreamAnswer = { ok: false, error: { code: -32601, message: "Method not found" } };

/** How much of an API's error answer a tool error repeats. */
const ERROR_MESSAGE_CHARS = 200;

/** One REST server, in the shape the engine uses for every upstream (`McpServerHandle.request`). */
export class RestServer {
  readonly #o: RestServerOptions;
  readonly #tools: ReadonlyMap<string, RestToolConfig>;

  constructor(o: RestServerOptions) {
    this.#o = o;
    this.#tools = new Map(o.rest.tools.map((t) => [t.name, t]));
  }

  /**
   * Answers like an upstream server, and tells a `tools/call`'s charge and approval what the MCP
   * client tells them: `onSent` right before the API request leaves, `onEvidence` once, with what
   * its answer proves (a 2xx ran it; a 4xx or 429 refused it; a 5xx, a redirect or a failed
   * connection prove nothing; a call refused before it left was not sent).
   */
  async request(method: string, params: Readonly<Record<string, unknown>>, opts: Pick<UpstreamRequestOptions, "signal" | "onSent" | "onEvidence"> = {}): Promise<UpstreamAnswer> {
    switch (method) {
      case "tools/list":
        return {
          ok: true,
          result: { tools: this.#o.rest.tools.map((t) => ({ name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), inputSchema: t.inputSchema })) },
        };
      case "tools/call": {
        const proof: { evidence: UpstreamEvidence } = { evidence: "not_sent" };
        try {
          return { ok: true, result: await this.#call(params, opts, proof) };
        } finally {
          opts.onEvidence?.(proof.evidence);
        }
      }
      default:
        return METHOD_NOT_FOUND;
    }
  }

  async #call(params: Readonly<Record<string, unknown>>, opts: Pick<UpstreamRequestOptions, "signal" | "onSent">, proof: { evidence: UpstreamEvidence }): Promise<Record<string, unknown>> {
    const signal = opts.signal;
    const tool = typeof params.name === "string" ? this.#tools.get(params.name) : undefined;
    if (tool === undefined) throw new GatewayError("invalid_request", "Unknown tool.", { param: "params.name" });
    const args = params.arguments ?? {};
    checkArguments(tool.inputSchema, args);
    const req = buildRestRequest(this.#o, tool, args, this.#o.secret);
    // The base was checked at load; the built URL is checked again before it leaves, like every target.
    const verdict = checkEgress(req.url, this.#o.egress);
    if (!verdict.ok) throw new GatewayError("internal_error", "The tool's API is not an allowed egress target.", { cause: verdict.refusal.message });
    let res: Response;
    proof.evidence = "unknown";
    opts.onSent?.();
    try {
      res = await this.#o.fetch(req.url, { method: req.method, headers: req.headers, ...(req.body !== undefined ? { body: req.body } : {}), redirect: "manual", ...(signal ? { signal } : {}) });
    } catch (err) {
      if (signal?.aborted) throw err;
      throw new GatewayError("upstream_unreachable", "The tool's API could not be reached.", { cause: err });
    }
    proof.evidence = res.status < 300 ? "answered" : statusEvidence(res.status);
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel();
      throw new GatewayError("upstream_error", `The tool's API answered ${res.status} (a redirect, which the gateway does not follow).`);
    }
    if (res.status >= 500) {
      await res.body?.cancel();
      throw new GatewayError("upstream_error", `The tool's API answered ${res.status}.`);
    }
    if (res.status === 401) {
      // The gateway's credential for the API was refused: no change of arguments can fix that, so the model is not asked to.
      await res.body?.cancel();
      throw new GatewayError("upstream_auth_failed", "The tool's API refused the gateway's credential (401).");
    }
    const text = await readBounded(res, tool.response.maxBytes);
    const json = /^application\/(?:[\w.+-]+\+)?json\b/i.test(res.headers.get("content-type") ?? "") ? parseJson(text) : undefined;
    if (res.status >= 400) {
      // The API refused this call: the model can read why and change its arguments.
      const said = json === undefined ? undefined : messageOf(json.value);
      return { isError: true, content: [{ type: "text", text: `HTTP ${res.status}${said ? `: ${said.slice(0, ERROR_MESSAGE_CHARS)}` : ""}` }] };
    }
    if (text.trim() === "") return { content: [{ type: "text", text: `HTTP ${res.status}, no content` }] };
    if (json === undefined) {
      // Trimming is a promise about what reaches the caller: an answer that cannot be trimmed is not passed on.
      if (tool.response.fields.length > 0) throw new GatewayError("upstream_protocol_error", "The tool's API answered without JSON, so it cannot be trimmed to the configured fields.");
      return { content: [{ type: "text", text }] };
    }
    const trimmed = trimResponse(json.value, tool.response.fields);
    return { content: [{ type: "text", text: JSON.stringify(trimmed) }], ...(isRecord(trimmed) ? { structuredContent: trimmed } : {}) };
  }
}

/** The body as text, refused past `max` bytes without reading further. */
async function readBounded(res: Response, max: number): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      throw new GatewayError("upstream_error", `The tool's API answered more than ${max} bytes (response.maxBytes).`);
    }
    chunks.push(value);
  }
  const all = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.byteLength;
  }
  return new TextDecoder().decode(all);
}

function parseJson(text: string): { readonly value: unknown } | undefined {
  if (text.trim() === "") return undefined;
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    throw new GatewayError("upstream_protocol_error", "The tool's API declared JSON but sent a body that is not JSON.");
  }
}

/** The message an API's error body carries in the usual places, if any. */
function messageOf(body: unknown): string | undefined {
  if (!isRecord(body)) return undefined;
  for (const v of [body.message, body.error, isRecord(body.error) ? body.error.message : undefined, body.detail]) if (typeof v === "string" && v !== "") return v;
  return undefined;
}
