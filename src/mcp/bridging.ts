import { isRecord } from "../protocol/fast-guard.ts";

/**
 * The bridging matrix as code: which server-to-client requests the gateway can carry between a
 * client of one protocol era and a server of another, and so which client capabilities it
 * declares upstream. A capability is declared upstream only when the gateway can carry what it
 * lets the server ask; a server that asks anyway is answered with an error, never left waiting.
 *
 * | client \ server | stateful (2025) | stateless (2026-07-28) |
 * |---|---|---|
 * | stateful | relayed in the request's SSE stream | `input_required` turned into in-stream requests, answered, sent again |
 * | stateless | not carried (nothing declared upstream) | `input_required` passed through, `inputResponses` and `requestState` forwarded |
 */

/** The protocol era of one side of a bridge. */
export type McpEra = "stateful" | "stateless";

/** Client capabilities that let a server ask the client something, and what each lets it ask. */
export const RELAYED_CAPABILITIES: Readonly<Record<string, string>> = {
  elicitation: "elicitation/create",
  sampling: "sampling/createMessage",
  roots: "roots/list",
};

/**
 * The capabilities declared to a server of `server` era for a client of `client` era that
 * declared `declared`: the subset the gateway can carry in that direction, each as the client
 * declared it (so sub-capabilities such as form or URL elicitation stay the client's). A server
 * of neither era (a REST tool) asks nothing.
 */
export function carriedCapabilities(client: McpEra, server: McpEra | undefined, declared: Readonly<Record<string, unknown>>): Record<string, unknown> {
  if (server === undefined || (client === "stateless" && server === "stateful")) return {};
  const carried: Record<string, unknown> = {};
  for (const cap of Object.keys(RELAYED_CAPABILITIES)) if (isRecord(declared[cap])) carried[cap] = declared[cap];
  return carried;
}

/** Whether a client that declared `declared` may be asked `method` (a server-to-client request). */
export function clientTakes(method: string, declared: Readonly<Record<string, unknown>>): boolean {
  for (const [cap, m] of Object.entries(RELAYED_CAPABILITIES)) if (m === method) return isRecord(declared[cap]);
  return false;
}

/** An `input_required` result of the 2026-07-28 revision: what the server asks, and its opaque state. */
export interface InputRequired {
  readonly inputRequests: Readonly<Record<string, { readonly method: string; readonly params?: unknown }>>;
  readonly requestState: string | undefined;
}

/** Reads an `input_required` result, or undefined for any other result. */
export function inputRequiredOf(result: unknown): InputRequired | undefined {
  if (!isRecord(result) || result.resultType !== "input_required") return undefined;
  const requests: Record<string, { method: string; params?: unknown }> = {};
  if (isRecord(result.inputRequests)) {
    for (const [key, r] of Object.entries(result.inputRequests)) if (isRecord(r) && typeof r.method === "string") requests[key] = { method: r.method, params: r.params };
  }
  return { inputRequests: requests, requestState: typeof result.requestState === "string" ? result.requestState : undefined };
}
