import type { McpDeps } from "../kinds/mcp/mcp-deps.ts";
import type { McpKindDeps } from "../kinds/mcp/mcp-call.ts";
import type { ModelKindDeps } from "../kinds/model/model-caller.ts";
import type { PinnedSnapshot } from "../snapshot/pinned-snapshot.ts";
import type { RunnerDeps } from "./runner.ts";

/** Everything the runner and the kinds' hooks use, built once per isolate by the composition root. */
export interface EngineDeps extends RunnerDeps, ModelKindDeps, McpKindDeps {
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
}
