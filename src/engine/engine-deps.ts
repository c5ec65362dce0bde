import type { A2aDeps } from "../kinds/a2a/a2a-deps.ts";
import type { A2aKindDeps } from "../kinds/a2a/a2a-turn.ts";
import type { McpDeps } from "../kinds/mcp/mcp-deps.ts";
import type { McpKindDeps } from "../kinds/mcp/mcp-call.ts";
import type { ModelKindDeps } from "../kinds/model/model-caller.ts";
import type { PinnedSnapshot } from "../snapshot/pinned-snapshot.ts";
import type { RunnerDeps } from "./runner.ts";

/** Everything the runner and the kinds' hooks use, built once per isolate by the composition root. */
export interface EngineDeps extends RunnerDeps, ModelKindDeps, McpKindDeps, A2aKindDeps {
  readonly newRequestId: () => string;
  /** The active BackendSnapshot; a request pins the one it gets first. */
  readonly snapshot: () => Promise<PinnedSnapshot>;
  /**
   * Trace policy: whether a client's `traceparent` is continued (else a new trace starts and links
   * it), and whether a new trace is sampled. Absent: new traces, unsampled.
   */
  readonly tracing?: { readonly trustClient: boolean; readonly sample: () => boolean } | undefined;
  /** The MCP servers and tool policy, when the gateway fronts any (docs/mcp.md). */
  readonly mcp?: McpDeps | undefined;
  /** The A2A agents and policy, when the gateway fronts any (docs/a2a.md). */
  readonly a2a?: A2aDeps | undefined;
}
