/**
 * Tools' task support as the gateway lists it (MCP 2025-11-25 tasks). The gateway does not relay
 * an upstream server's tasks: what a server says of its own (`execution.taskSupport`) is dropped,
 * and the gateway says `optional` of a tool some call of which may wait for a human approval —
 * the one kind of call it answers with a task of its own. The other `execution` fields are kept.
 */

import { isRecord } from "../protocol/fast-guard.ts";
import type { McpEra } from "./bridging.ts";
import type { ListedTool } from "./virtual-server.ts";

/** The revision whose tasks the gateway serves (the 2026-07-28 revision has none). */
const TASKS_VERSION = "2025-11-25";

/**
 * Whether tasks (MCP 2025-11-25) are served: to a client of that revision, when approvals are
 * configured — a task here is a tool call waiting for a human approval, and nothing else.
 */
export function tasksServed(approvalsConfigured: boolean, era: McpEra, protocolVersion: string | undefined): boolean {
  return approvalsConfigured && era === "stateful" && protocolVersion === TASKS_VERSION;
}

/** The server capability of a gateway that makes tasks of tool calls waiting for approval. */
export const TASKS_CAPABILITY = { cancel: {}, requests: { tools: { call: {} } } } as const;

/** The tool as listed to the client: `taskSupport: "optional"` when `optional`, else none. */
export function withTaskSupport(tool: ListedTool, optional: boolean): ListedTool {
  const execution = isRecord(tool.execution) ? tool.execution : undefined;
  if (!optional && (execution === undefined || !("taskSupport" in execution))) return tool;
  const { taskSupport: _theirs, ...kept } = execution ?? {};
  const next = optional ? { ...kept, taskSupport: "optional" } : kept;
  const { execution: _execution, ...bare } = tool;
  return Object.keys(next).length > 0 ? { ...bare, name: tool.name, execution: next } : { ...bare, name: tool.name };
}
