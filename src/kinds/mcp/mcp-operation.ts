import type { Subject } from "../../signals/subject.ts";

/**
 * One MCP method's work in each phase after decode: the MCP kind decodes a request into the
 * operation its method names, and each of its hooks calls the operation's. An operation holds
 * what its phases produced for the next ones (the routed target, the gate, the charge, the
 * upstream answer); its hooks call the phase folders and nothing else.
 */
export interface McpOperation {
  /** Phase 3: the policy on what the request reaches (nothing to decide for a list: lists are filtered). */
  authorize(): void | Promise<void>;
  /** What signals and `request_safe` plugins see (a tool call's arguments). */
  subject?(): Subject | undefined;
  /** Phase 4: a result now (a pending approval, a task's state), or undefined to go on. */
  decide?(): Promise<Record<string, unknown> | undefined>;
  /** Takes a `request_safe` plugin's change of the subject. */
  amend?(subject: Subject): void;
  /** Phase 5: what the call may spend (a priced tool's reservation). */
  reserve?(): Promise<void>;
  /** The server the admission lease is keyed by (`*`: several). */
  admissionServer(): string;
  /** Phase 7: the upstream calls. */
  invoke(): Promise<void>;
  /** Phase 8: the result in the 2026-07-28 shape (the stateful era's path strips what its revision has not); undefined: no JSON-RPC body. */
  result(): Record<string, unknown> | undefined;
}
