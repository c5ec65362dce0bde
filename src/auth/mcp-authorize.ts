/**
 * The authorize phase of MCP requests: the deny-by-default tool policy (src/mcp/tool-policy.ts)
 * asked on the parsed body — never on the `Mcp-Name` header — for the item a request reaches: a
 * tool call with its arguments, a prompt or resource read, an item whose argument is completed or
 * which is watched, and the task handle a `tasks/*` request presents. A virtual-server name is
 * routed here to the one server it names, since the server is part of the policy's question.
 * Every decision is recorded on the request's MCP record (rule, revision, reason, target) before
 * a refusal is thrown, so a refusal is audited like an allowance.
 */

import type { TaskHandle, TaskHandleSealer } from "../approvals/task-handle.ts";
import type { McpRecord } from "../context/request-record.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import { splitNamespaced } from "../mcp/tool-names.ts";
import type { PolicyDecision, PolicyQuestion, ToolPolicy } from "../mcp/tool-policy.ts";
import { routeCatalogRead } from "../mcp/virtual-catalog.ts";

/** Who asks, as the policy reads it. */
export type PolicyCaller = Pick<PolicyQuestion, "tenant" | "key">;

/** The servers an endpoint knows (by configured name). */
export interface KnownServers {
  has(name: string): boolean;
}

/** Where a `tools/call` goes, and the decision that lets it. */
export interface RoutedCall {
  readonly server: string;
  /** The upstream tool name. */
  readonly name: string;
  readonly decision: PolicyDecision;
}

/** Records the policy's decision on the request and which server and item it is about. */
export function noteDecision(record: McpRecord | undefined, decision: PolicyDecision, server: string, target: string): void {
  if (record) Object.assign(record, { decision, server, target });
}

/**
 * Decides one call (a tool call, a prompt get, a resource read) with its arguments and refuses it
 * as `tool_not_allowed` when the policy does, naming the rule or the argument at fault and the
 * policy revision. `onDecision` sees every decision first, for the call's audit record.
 */
export function authorizeCall(policy: ToolPolicy, q: PolicyQuestion, args: unknown, onDecision?: (d: PolicyDecision) => void): PolicyDecision {
  const decision = policy.decide(q, args);
  onDecision?.(decision);
  if (!decision.allowed) {
    throw new GatewayError("tool_not_allowed", `The ${q.kind} call is not allowed: ${decision.reason} (policy ${decision.policyRevision}).`, { param: q.kind === "resource" ? "params.uri" : "params.name" });
  }
  return decision;
}

/**
 * Routes a call by its namespaced name to the one server the name names, and decides it with the
 * call's arguments. A name whose server part is not one of `servers` is refused as unknown — never
 * matched against another server's tools — and so is a call the policy does not allow.
 */
export function routeToolCall(
  name: string,
  args: unknown,
  servers: KnownServers,
  caller: PolicyCaller,
  policy: ToolPolicy,
  /** Told the decision before a refusal is thrown, for the audit record. */
  onDecision?: (decision: PolicyDecision, target: { readonly server: string; readonly target: string }) => void,
): RoutedCall {
  const split = splitNamespaced(name);
  if (split === undefined || !servers.has(split.server)) {
    throw new GatewayError("invalid_request", "Unknown tool: the virtual server's tools are named <server>.<tool>.", { param: "params.name" });
  }
  const decision = authorizeCall(policy, { ...caller, server: split.server, kind: "tool", name: split.name }, args, (d) => onDecision?.(d, { server: split.server, target: split.name }));
  return { server: split.server, name: split.name, decision };
}

/** What an MCP request is authorized against: the policy, the servers, who asks, and at which endpoint. */
export interface McpAuthorization {
  readonly policy: ToolPolicy;
  readonly servers: KnownServers;
  readonly caller: PolicyCaller;
  /** `/mcp/<server>`: that server, names unchanged; undefined: the virtual server. */
  readonly endpoint: string | undefined;
  readonly record: McpRecord | undefined;
}

/** A `tools/call` (or a task's call): routed by name on the virtual server, decided with its arguments. */
export function authorizeToolCall(a: McpAuthorization, name: string, args: unknown): RoutedCall {
  const server = a.endpoint;
  if (server === undefined) return routeToolCall(name, args, a.servers, a.caller, a.policy, (d, t) => noteDecision(a.record, d, t.server, t.target));
  return { server, name, decision: authorizeCall(a.policy, { ...a.caller, server, kind: "tool", name }, args, (d) => noteDecision(a.record, d, server, name)) };
}

/** `prompts/get` and `resources/read`: the item's server (by the virtual name), decided with the prompt's arguments. */
export function authorizeRead(a: McpAuthorization, method: "prompts/get" | "resources/read", named: string, args: unknown): { readonly server: string; readonly name: string } {
  const kind = method === "prompts/get" ? "prompt" : "resource";
  const target = a.endpoint === undefined ? routeCatalogRead(method, named, a.servers) : { server: a.endpoint, name: named };
  authorizeCall(a.policy, { ...a.caller, server: target.server, kind, name: target.name }, args, (d) => noteDecision(a.record, d, target.server, target.name));
  return target;
}

/**
 * The server and own name of a prompt or resource named at this endpoint, when the caller may see
 * it: reaching it — completing its argument, watching it — reveals what a list would. The decision
 * is recorded either way, and an item the caller may not see is refused.
 */
export function authorizeReach(a: McpAuthorization, kind: "prompt" | "resource", named: string): { readonly server: string; readonly name: string } {
  const target = a.endpoint === undefined ? routeCatalogRead(kind === "prompt" ? "prompts/get" : "resources/read", named, a.servers) : { server: a.endpoint, name: named };
  const decision = a.policy.visible({ ...a.caller, server: target.server, kind, name: target.name });
  noteDecision(a.record, decision, target.server, target.name);
  if (!decision.allowed) throw new GatewayError("tool_not_allowed", `${kind === "prompt" ? "Prompt" : "Resource"} ${JSON.stringify(named.slice(0, 128))} is not available to this caller (${decision.reason}).`);
  return target;
}

/**
 * The task a `tasks/*` request names: the handle it presents, opened for this caller on this
 * endpoint. Forged, tampered, expired, another caller's or another endpoint's: to this caller no
 * such task exists.
 */
export async function authorizeTask(a: McpAuthorization, sealer: TaskHandleSealer, method: string, taskId: unknown, now: number): Promise<{ readonly taskId: string; readonly handle: TaskHandle }> {
  if (typeof taskId !== "string" || taskId === "") throw new GatewayError("invalid_request", `${method} needs a taskId.`, { param: "params.taskId" });
  const opened = await sealer.open(taskId, a.caller, now);
  if (!opened.ok || opened.handle.endpoint !== (a.endpoint ?? "*") || !a.servers.has(opened.handle.server)) throw unknownTask();
  if (a.record) Object.assign(a.record, { server: opened.handle.server, target: opened.handle.tool });
  return { taskId, handle: opened.handle };
}

/** The one answer for a task this caller has no such task: unknown, whatever the reason. */
export function unknownTask(): GatewayError {
  return new GatewayError("invalid_request", "Unknown task: no task of this caller on this endpoint has that taskId (it may have expired).", { param: "params.taskId" });
}
