import type { AdmissionController } from "../admit/admission.ts";
import type { DrainController } from "../admit/drain.ts";
import type { RecordSink, UndoErrorHandler } from "../context/request-context.ts";
import type { McpDeps } from "./mcp-deps.ts";
import type { Clock } from "../deps/clock.ts";
import type { Scheduler } from "../deps/scheduler.ts";
import type { GatewayExecutor } from "../invoker/executor.ts";
import type { CodecRegistry } from "../protocol/codec.ts";
import type { CompiledPublication } from "../publication/compile-publication.ts";
import type { ReserveDeps } from "../reserve/reserve-phase.ts";
import type { PinnedSnapshot } from "../snapshot/pinned-snapshot.ts";
import type { BreakerCache } from "../traffic/breaker-cache.ts";
import type { HealthCache } from "../traffic/health-cache.ts";

/** Everything the engine's phases use, built once per isolate by the composition root. */
export interface EngineDeps {
  readonly publication: CompiledPublication;
  readonly codecs: CodecRegistry;
  readonly clock: Clock;
  readonly scheduler: Scheduler;
  readonly newRequestId: () => string;
  readonly requestDeadlineMs: number;
  readonly streamTimeouts: { readonly firstTokenMs: number; readonly idleMs: number };
  readonly drain: DrainController;
  readonly admission: AdmissionController;
  /** The active BackendSnapshot; a request pins the one it gets first. */
  readonly snapshot: () => Promise<PinnedSnapshot>;
  readonly invoker: GatewayExecutor;
  readonly reserve: ReserveDeps;
  readonly breakers: BreakerCache | undefined;
  readonly health: HealthCache | undefined;
  readonly sink: RecordSink;
  /**
   * Trace policy: whether a client's `traceparent` is continued (else a new trace starts and links
   * it), and whether a new trace is sampled. Absent: new traces, unsampled.
   */
  readonly tracing?: { readonly trustClient: boolean; readonly sample: () => boolean } | undefined;
  /** The MCP servers and tool policy, when the gateway fronts any (docs/mcp.md). */
  readonly mcp?: McpDeps | undefined;
  /** A uniform draw in [0, 1) for content-log sampling; `Math.random` when absent. */
  readonly random?: (() => number) | undefined;
  readonly onUndoError: UndoErrorHandler;
  /** Internal failures (a phase that threw something not a GatewayError), for logs. */
  readonly log: (event: Readonly<Record<string, unknown>>) => void;
}
