import { GatewayError } from "../../errors/gateway-error.ts";
import { isRecord } from "../fast-guard.ts";

/**
 * Per-request validation of MCP's stateless revision (2026-07-28, `basic/transports/
 * streamable-http.mdx` and `basic/versioning.mdx` of the specification). Every request stands
 * alone: its version and the client's capabilities are in `params._meta`, and three headers
 * repeat what the body says so that intermediaries can route without parsing it. The gateway
 * decides on the parsed body; the headers are only a cross-check, and a mismatch is refused
 * (-32020) rather than trusted — `Mcp-Name` in particular is never what authorization reads.
 */

/** The revision this module validates. */
export const STATELESS_VERSION = "2026-07-28";

const META_VERSION = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities";

/** Client-to-server methods of the stateless revision, and where `Mcp-Name` must point. */
const METHODS: Readonly<Record<string, "name" | "uri" | undefined>> = {
  "server/discover": undefined,
  ping: undefined,
  "tools/list": undefined,
  "tools/call": "name",
  "prompts/list": undefined,
  "prompts/get": "name",
  "resources/list": undefined,
  "resources/templates/list": undefined,
  "resources/read": "uri",
  "subscriptions/listen": undefined,
  "completion/complete": undefined,
};

/**
 * The params a request names its item by (`params.name` or `params.uri`, a non-empty string),
 * and a tool call's `arguments`, when sent, as an object (the policy's argument rules and the
 * approval's argument digest read them as one): anything else is the caller's error, not the
 * server's. Both eras check their requests with it; returns the named value.
 */
export function requireNamed(method: string, params: Readonly<Record<string, unknown>>, field: "name" | "uri"): string {
  const named = params[field];
  if (typeof named !== "string" || named === "") throw new GatewayError("invalid_request", `'params.${field}' is required for ${method}.`, { param: `params.${field}` });
  if (method === "tools/call" && params.arguments !== undefined && !isRecord(params.arguments)) {
    throw new GatewayError("invalid_request", "'params.arguments' must be an object.", { param: "params.arguments" });
  }
  return named;
}

/** The header reads the validation needs (a `Headers` satisfies it). */
export interface HeaderReader {
  get(name: string): string | null;
}

/** A request of the stateless revision, validated. */
export interface StatelessRequest {
  /** Absent for a notification. */
  readonly id: string | number | undefined;
  readonly method: string;
  readonly params: Readonly<Record<string, unknown>>;
  readonly protocolVersion: string;
  readonly clientCapabilities: Readonly<Record<string, unknown>>;
}


/** `Mcp-Name` as sent: plain, or `=?base64?…?=` for values that are not header-safe. */
export function decodeHeaderValue(v: string): string | undefined {
  const m = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/.exec(v);
  if (!m) return v;
  try {
    const bytes = Uint8Array.from(atob(m[1]!), (c) => c.charCodeAt(0));
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    return undefined;
  }
}

/**
 * Validates one JSON-RPC message of the stateless revision against its headers. Refusals, each a
 * {@link GatewayError} whose code maps to the JSON-RPC code the specification names:
 * - not a single JSON-RPC 2.0 request or notification → `mcp_invalid_message` (-32600);
 * - `_meta` without the version or the client capabilities → `invalid_request` (-32602);
 * - a version not supported → `mcp_unsupported_version` (-32022), the supported list in details;
 * - `MCP-Protocol-Version`, `Mcp-Method` or `Mcp-Name` missing or not what the body says →
 *   `mcp_header_mismatch` (-32020);
 * - a method the revision does not have → `mcp_method_not_found` (-32601, HTTP 404).
 */
export function validateStatelessRequest(headers: HeaderReader, body: unknown, supportedVersions: readonly string[]): StatelessRequest {
  if (!isRecord(body) || body.jsonrpc !== "2.0" || typeof body.method !== "string" || body.method === "") {
    throw new GatewayError("mcp_invalid_message", "The body must be one JSON-RPC 2.0 request or notification (batches are not part of this revision).");
  }
  const hasId = "id" in body;
  const id = body.id;
  if (hasId && !(typeof id === "string" || (typeof id === "number" && Number.isFinite(id)))) {
    throw new GatewayError("mcp_invalid_message", "A JSON-RPC request id must be a string or a number.");
  }
  const method = body.method;
  if (body.params !== undefined && !isRecord(body.params)) throw new GatewayError("invalid_request", "'params' must be an object.", { param: "params" });
  const params = (body.params ?? {}) as Record<string, unknown>;
  const meta = params._meta;
  const version = isRecord(meta) ? meta[META_VERSION] : undefined;
  const capabilities = isRecord(meta) ? meta[META_CAPABILITIES] : undefined;
  if (method === "initialize" && typeof version !== "string") {
    // A stateful-era client's first message. The specification asks a server of this revision to
    // refuse it naming the versions it supports, so that a client speaking both eras switches.
    const requested = typeof params.protocolVersion === "string" ? params.protocolVersion.slice(0, 32) : undefined;
    throw new GatewayError("mcp_unsupported_version", "This endpoint speaks protocol revision 2026-07-28 only: no initialize, every request carries its _meta.", { details: [{ supported: [...supportedVersions], ...(requested ? { requested } : {}) }] });
  }
  if (typeof version !== "string" || !isRecord(capabilities)) {
    throw new GatewayError("invalid_request", `Every request of this revision carries params._meta["${META_VERSION}"] and params._meta["${META_CAPABILITIES}"].`, { param: "params._meta" });
  }
  if (!supportedVersions.includes(version)) {
    throw new GatewayError("mcp_unsupported_version", `Protocol version ${JSON.stringify(version.slice(0, 32))} is not supported.`, { details: [{ supported: [...supportedVersions], requested: version.slice(0, 32) }] });
  }
  if (headers.get("mcp-protocol-version") !== version) {
    throw new GatewayError("mcp_header_mismatch", "The MCP-Protocol-Version header must equal the request's params._meta protocol version.");
  }
  if (headers.get("mcp-method") !== method) throw new GatewayError("mcp_header_mismatch", "The Mcp-Method header must equal the JSON-RPC method.");
  if (!hasId) {
    if (!method.startsWith("notifications/")) throw new GatewayError("mcp_invalid_message", "A message without an id must be a notification (notifications/…).");
    return { id: undefined, method, params, protocolVersion: version, clientCapabilities: capabilities };
  }
  if (!(method in METHODS)) throw new GatewayError("mcp_method_not_found", `Method ${JSON.stringify(method.slice(0, 64))} is not part of this protocol revision.`);
  const nameField = METHODS[method];
  if (nameField !== undefined) {
    const expected = requireNamed(method, params, nameField);
    const sent = headers.get("mcp-name");
    if (sent === null || decodeHeaderValue(sent) !== expected) {
      throw new GatewayError("mcp_header_mismatch", `The Mcp-Name header must equal params.${nameField} for ${method}.`);
    }
  }
  return { id: id as string | number, method, params, protocolVersion: version, clientCapabilities: capabilities };
}

/**
 * The HTTP framing of a stateless MCP request, before its body is read: POST only (405 for GET
 * and DELETE, which this revision does not have), JSON in, JSON or an event stream out, and an
 * `Origin` (sent by browsers) only from the configured list, against DNS rebinding.
 */
export function checkStatelessFraming(httpMethod: string, headers: HeaderReader, allowedOrigins: readonly string[]): void {
  if (httpMethod !== "POST" && httpMethod !== "GET") throw new GatewayError("method_not_allowed", "This MCP endpoint accepts POST, and GET in a stateful-era session (revision 2026-07-28 has no GET stream; a sealed session ends by expiring, not DELETE).");
  const origin = headers.get("origin");
  if (origin !== null && !allowedOrigins.includes(origin)) throw new GatewayError("origin_not_allowed", "This Origin may not call the MCP endpoint.");
  // A GET carries no body; whether it is served (a stateful-era session's stream) the engine decides.
  if (httpMethod === "GET") {
    if (!(headers.get("accept") ?? "").toLowerCase().includes("text/event-stream")) throw new GatewayError("not_acceptable", "A GET on the MCP endpoint must accept text/event-stream.");
    return;
  }
  const type = headers.get("content-type") ?? "";
  if (!/^application\/json\s*(;|$)/i.test(type)) throw new GatewayError("unsupported_media_type", "Send the JSON-RPC message as application/json.");
  const accept = (headers.get("accept") ?? "").toLowerCase();
  if (!accept.includes("application/json") || !accept.includes("text/event-stream")) {
    throw new GatewayError("not_acceptable", "The Accept header must list both application/json and text/event-stream.");
  }
}
