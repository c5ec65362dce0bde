import type { AdmissionLease } from "../admit/admission.ts";
import type { Workload } from "../attribution/workload.ts";
import type { TraceParent } from "../context/trace-context.ts";
import type { HeaderReader } from "../protocol/mcp/stateless-request.ts";
import type { Phase, PluginReport } from "../context/request-record.ts";
import type { GatewayError } from "../errors/gateway-error.ts";
import type { RequestFacts } from "../plugins/plugin.ts";
import type { StreamEventChain } from "../plugins/stream-event-chain.ts";
import type { NeutralResponse } from "../protocol/neutral.ts";
import type { Principal } from "../publication/principal.ts";
import type { SignalSet, SignalValue } from "../signals/signal-set.ts";
import type { Subject } from "../signals/subject.ts";

/**
 * What every JSON-RPC kind's HTTP adapter hands the engine about the request and its caller
 * (MCP's and A2A's ingress add their own): nothing transport-specific.
 */
export interface CallerIngress {
  readonly requestId: string;
  readonly receivedAt: number;
  readonly apiKey: string | undefined;
  /** The `Authorization: Bearer` credential alone: an OAuth access token is only read from there. */
  readonly bearer?: string | undefined;
  readonly headers: HeaderReader;
  readonly readBody: () => Promise<unknown>;
  readonly traceParent?: TraceParent | undefined;
  readonly waitUntil: (p: Promise<unknown>) => void;
  /** The workload behind the call, from the trusted headers configured for it. */
  readonly workload?: Workload | undefined;
}

/** The kinds of traffic the runner runs. */
export type TrafficKindName = "model" | "mcp" | "a2a";

/**
 * A hook's early answer: the request needs no further phase.
 * - `respond`: the answer is ready; the runner enters the respond phase and completes the request.
 * - `complete`: nothing is left to do or send in a phase of its own (a notification, a handshake
 *   answered where it was read); the request completes where it is.
 */
export type Early<R> = { readonly kind: "respond"; readonly reply: R } | { readonly kind: "complete"; readonly reply: R };

/** What the respond hook hands back: the reply, and whether a stream now owns the request's end. */
export interface Responded<R> {
  readonly reply: R;
  /** True: the reply's stream ends the request (the runner does not). */
  readonly streaming: boolean;
}

/** The admit phase's key: whose share of the isolate the request takes, and of which model (or `mcp:<server>`, `a2a:<agent>`). */
export interface AdmissionKey {
  readonly tenant: string;
  readonly model: string;
}

/**
 * One request of one kind of traffic, as the runner (src/engine/runner.ts) drives it: the phase
 * hooks, called only by the runner, in order, each once, on the one request context the kind was
 * given. A hook does its phase's work by calling that phase's folder (src/auth, src/protocol,
 * src/decide, src/reserve, src/invoker, src/respond); it never enters a phase, runs a checkpoint
 * or ends the request itself — the runner does. A hook that throws ends the request with the
 * error through the runner's one failure path ({@link KindTurn.failed} shapes the reply).
 */
export interface KindTurn<R> {
  readonly kind: TrafficKindName;
  /** Phase 1: who is calling. */
  authenticate(): Promise<Principal>;
  /** Phase 2: the request's body read and decoded once (the request may end here: a notification). */
  decode(): Promise<Early<R> | undefined>;
  /** Phase 3: may the caller make this request? */
  authorize(): Promise<Early<R> | undefined>;
  /**
   * What signals and `request_safe` plugins see; undefined (or no hook: a kind with nothing to
   * inspect, such as an agent call): this request has nothing to inspect.
   */
  subject?(): Subject | undefined;
  /** The trusted headers the request carried (lower-case names), for header signals; no hook: none. */
  trusted?(): ReadonlyMap<string, string>;
  /**
   * After decide: the plugins the request runs, by name (its entrypoint's, then its decision's),
   * and the decision that chose them; no hook: none.
   */
  plugins?(): { readonly names: readonly string[]; readonly decision: string | undefined };
  /** Phase 4: what to do (a plan), with the request's signals at hand; or an answer now. */
  decide(signals: SignalSet): Promise<Early<R> | undefined>;
  /** Takes a `request_safe` plugin's change of the subject (same kind): that is what is sent. Needed only with {@link subject}. */
  amend?(subject: Subject): void;
  /** Phase 5: what the request may spend, reserved or prepared before anything is sent. */
  reserve(): Promise<void>;
  /**
   * Phase 6 is the runner's own (drain ticket, admission lease): the lease's key. Undefined: the
   * request's own work is its sub-calls (a Looper run), each admitted on its own; it takes the
   * drain ticket only.
   */
  admission(): AdmissionKey | undefined;
  /** Phase 7: the upstream calls, on the admission lease the request holds (none: see {@link admission}). */
  invoke(lease: AdmissionLease | undefined): Promise<void>;
  /** Phase 8: the answer, for the client (`events`: the request's `stream_event_safe` plugins). */
  respond(events: StreamEventChain | undefined): Responded<R>;
  /** After decide: what plugins may key on beyond the subject (a model request's); absent or undefined for others. */
  facts?(): RequestFacts | undefined;
  /**
   * Phase 8 for a request a `request_safe` plugin answered (a cache hit): the answer for the
   * client, through `events`, with nothing reserved, admitted or sent. Absent: the kind's
   * requests are never answered that way (a plugin that tries is a bug).
   */
  answer?(response: NeutralResponse, events: StreamEventChain | undefined): Responded<R>;
  /** The reply to a failure; the runner has ended the request already. `thrown` is what was caught. */
  failed(error: GatewayError, thrown: unknown): R;
}

/**
 * What an explain found: how far the request got, why it would be refused before anything is
 * sent (if it would), the signals read, and what its `request_safe` plugins would do. Counts,
 * names and scores only, never the content.
 */
export interface Explained {
  /** Whether decide made a plan. */
  readonly decided: boolean;
  /** The phase the request reached. */
  readonly phase: Phase | undefined;
  /** The error the request would end with before reserve (a refusal, a fail-closed decision, a plugin's block); undefined: it would be dispatched. */
  readonly refusal: GatewayError | undefined;
  /** Every signal read, in the order it settled. */
  readonly signals: ReadonlyMap<string, SignalValue>;
  /** What the `request_safe` plugins did to the explain's own copy of the request (nothing is sent). */
  readonly plugins: readonly PluginReport[];
}
