import { GatewayError } from "../../errors/gateway-error.ts";
import type { HeaderReader } from "./stateless-request.ts";
import { isRecord } from "../fast-guard.ts";
import { requireNamed } from "./stateless-request.ts";

/**
 * Requests of MCP's stateful era (2025-03-26, 2025-06-18, 2025-11-25), as the gateway serves
 * them downstream: `initialize` opens a session (the gateway's sealed id), every later request
 * carries `Mcp-Session-Id` and, from 2025-06-18, `MCP-Protocol-Version` (absent means
 * 2025-03-26; an unsupported one is a 400). Batches are refused: only 2025-03-26 had them, and a
 * batch would mix requests the policy decides one by one.
 */

/** The field naming what a stateful-era request is about, for the methods that have one. */
const NAMED: Readonly<Record<string, "name" | "uri">> = {
  "tools/call": "name",
  "prompts/get": "name",
  "resources/read": "uri",
  "resources/subscribe": "uri",
  "resources/unsubscribe": "uri",
};

/** The stateful-era revisions the gateway serves, newest first. */
export const LEGACY_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26"] as const;

/** A stateful-era message, validated. */
export interface LegacyRequest {
  /** Absent for a notification. */
  readonly id: string | number | undefined;
  readonly method: string;
  readonly params: Readonly<Record<string, unknown>>;
}


/** Whether a message belongs to the stateless revision (it carries the per-request `_meta` version). */
export function isStatelessMessage(body: unknown): boolean {
  return isRecord(body) && isRecord(body.params) && isRecord(body.params._meta) && typeof body.params._meta["io.modelcontextprotocol/protocolVersion"] === "string";
}

/** Validates the JSON-RPC shape of a stateful-era message. */
export function validateLegacyMessage(body: unknown): LegacyRequest {
  if (Array.isArray(body)) throw new GatewayError("mcp_invalid_message", "JSON-RPC batches are not accepted: send one message per request.");
  if (!isRecord(body) || body.jsonrpc !== "2.0" || typeof body.method !== "string" || body.method === "") {
    throw new GatewayError("mcp_invalid_message", "The body must be one JSON-RPC 2.0 request or notification.");
  }
  const hasId = "id" in body;
  const id = body.id;
  if (hasId && !(typeof id === "string" || (typeof id === "number" && Number.isFinite(id)))) throw new GatewayError("mcp_invalid_message", "A JSON-RPC request id must be a string or a number.");
  if (body.params !== undefined && !isRecord(body.params)) throw new GatewayError("invalid_request", "'params' must be an object.", { param: "params" });
  if (!hasId && !body.method.startsWith("notifications/")) throw new GatewayError("mcp_invalid_message", "A message without an id must be a notification (notifications/…).");
  return { id: hasId ? (id as string | number) : undefined, method: body.method, params: (body.params ?? {}) as Record<string, unknown> };
}

/**
 * Checks a stateful-era request's params for what it names (`params.name`, `params.uri`) and, for
 * a tool call, that its arguments are an object. Apart from the envelope's check because it runs
 * inside the session, where its refusal is answered in-band.
 */
export function checkLegacyParams(req: LegacyRequest): void {
  const named = NAMED[req.method];
  if (named !== undefined) requireNamed(req.method, req.params, named);
}

/** The version a client asks for in `initialize`, answered as the specification says: the same when supported, else the newest. */
export function negotiateVersion(requested: unknown): string {
  return typeof requested === "string" && (LEGACY_VERSIONS as readonly string[]).includes(requested) ? requested : LEGACY_VERSIONS[0];
}

/** The version of a request after `initialize`: its header, or 2025-03-26 when it sends none. */
export function legacyVersionOf(headers: HeaderReader): string {
  const v = headers.get("mcp-protocol-version");
  if (v === null) return "2025-03-26";
  if (!(LEGACY_VERSIONS as readonly string[]).includes(v)) {
    throw new GatewayError("mcp_unsupported_version", `Protocol version ${JSON.stringify(v.slice(0, 32))} is not supported.`, { details: [{ supported: [...LEGACY_VERSIONS], requested: v.slice(0, 32) }] });
  }
  return v;
}
