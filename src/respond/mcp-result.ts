/**
 * The respond phase of MCP requests: results in the 2026-07-28 shape (each proxied through a
 * per-caller policy, so no cache may share it), cut to the 2025 shape for a stateful-era client,
 * in a JSON-RPC envelope; and which refusals are answered in-band.
 */

import { RELATED_TASK } from "../approvals/approval-task.ts";
import type { McpEra } from "../mcp/bridging.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import { UpstreamRefusal } from "../mcp/upstream-errors.ts";
import { renameContents } from "../mcp/virtual-catalog.ts";
import type { GatewayError } from "../errors/gateway-error.ts";
import { STATELESS_VERSION } from "../protocol/mcp/stateless-request.ts";
import type { ToolCallTrack } from "../reserve/tool-charge.ts";

/** Results proxied through a per-caller policy must not be shared by caches (2026-07-28 caching). */
export const UNCACHEABLE = { ttlMs: 0, cacheScope: "private" } as const;

/** A list's result: its items under `field`, with what the virtual server could not include in `_meta`. */
export function listResult(
  field: string,
  list: { readonly items: readonly unknown[]; readonly partial: readonly unknown[]; readonly unnamed: readonly unknown[]; readonly nextCursor?: string | undefined },
  reportUnnamed: boolean,
): Record<string, unknown> {
  const meta = list.partial.length > 0 || (reportUnnamed && list.unnamed.length > 0) ? { _meta: reportUnnamed ? { "sluice/partial": list.partial, "sluice/unlisted": list.unnamed } : { "sluice/partial": list.partial } } : {};
  return { resultType: "complete", [field]: list.items, ...(list.nextCursor !== undefined ? { nextCursor: list.nextCursor } : {}), ...UNCACHEABLE, ...meta };
}

/** A `prompts/get` or `resources/read` result; a virtual-server read's contents are renamed as it lists them. */
export function readResult(method: "prompts/get" | "resources/read", result: Readonly<Record<string, unknown>>, virtualServer: string | undefined): Record<string, unknown> {
  if (method === "prompts/get") return { resultType: "complete", ...result };
  return { resultType: "complete", ...(virtualServer !== undefined ? renameContents(virtualServer, result) : result), ...UNCACHEABLE };
}

/** The JSON-RPC body of a result, in the client's era's shape: the 2025 era has no result type and no caching fields. */
export function rpcResult(id: string | number, result: Readonly<Record<string, unknown>>, era: McpEra): Record<string, unknown> {
  if (era === "stateless") return { jsonrpc: "2.0", id, result };
  const { resultType: _type, ttlMs: _ttl, cacheScope: _scope, ...legacy } = result;
  return { jsonrpc: "2.0", id, result: legacy };
}

/**
 * The HTTP status a refusal is answered with in-band (a JSON-RPC error in a 200, as a server
 * answers a request it accepted), or undefined for the code's own status:
 * - a server's own refusal is in-band, except what the 2026-07-28 revision answers with 400 even
 *   in-band (a missing capability);
 * - inside a valid 2025-era session every refusal of a request the gateway took (policy,
 *   validation, approval and its -32042, task, not found) is in-band too: a 404 there would tell
 *   the client its session ended, and any other 4xx reaches an SDK client as a transport failure
 *   rather than the JSON-RPC error it can read. Rate and budget refusals (429, with Retry-After)
 *   and the gateway's own unavailability (5xx) keep their HTTP status, as does a protocol-version
 *   header the session cannot speak.
 */
export function inBandStatus(thrown: unknown, error: GatewayError, protocolVersion: string | undefined, inSession: boolean): number | undefined {
  if (thrown instanceof UpstreamRefusal) return error.code === "mcp_missing_capability" && protocolVersion === STATELESS_VERSION ? 400 : 200;
  return inSession && error.status < 500 && error.status !== 429 && error.code !== "mcp_unsupported_version" ? 200 : undefined;
}

/** The `_meta` key a tool result carries its task's figures under. */
export const TASK_META_KEY = "sluice.dev/task";

/**
 * A tool result with its task's figures in `_meta["sluice.dev/task"]` (`{ taskId, spent,
 * remaining }`, by metric: money in micro-units, tokens), so a harness can stop adding steps.
 */
function withTaskMeta(result: Record<string, unknown>, track: ToolCallTrack | undefined): Record<string, unknown> {
  const task = track?.task;
  if (!task) return result;
  const meta = isRecord(result._meta) ? result._meta : {};
  const by = (f: "spent" | "remaining") => Object.fromEntries(task.figures.map((x) => [x.metric, x[f]]));
  return { ...result, _meta: { ...meta, [TASK_META_KEY]: { taskId: task.taskId, spent: by("spent"), remaining: by("remaining") } } };
}

/**
 * A `tools/call` result: the server's, with its task's figures when the call names a capped task,
 * and — for a task's `tasks/result` — related to the task it ran for.
 */
export function toolCallResult(result: Readonly<Record<string, unknown>>, track: ToolCallTrack | undefined, resumedTaskId: string | undefined): Record<string, unknown> {
  const out = withTaskMeta({ resultType: "complete", ...result }, track);
  if (resumedTaskId === undefined) return out;
  const meta = isRecord(out._meta) ? out._meta : {};
  return { ...out, _meta: { ...meta, [RELATED_TASK]: { taskId: resumedTaskId } } };
}
