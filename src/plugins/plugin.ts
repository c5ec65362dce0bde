import type { TerminalView } from "../context/request-context.ts";
import type { PluginReport } from "../context/request-record.ts";
import type { Principal } from "../publication/principal.ts";
import type { CacheDirectives } from "../cache/cache-policy.ts";
import type { ResponseCacheRpc } from "../cache/response-cache-service.ts";
import type { NeutralEvent, NeutralResponse } from "../protocol/neutral.ts";
import type { SignalModels } from "../signals/signal-models.ts";
import type { SignalSet } from "../signals/signal-set.ts";
import type { Subject } from "../signals/subject.ts";

/**
 * Where a plugin may run, checked when it is loaded (seed 000: response capabilities are classed
 * explicitly). The runner calls each class at one hook point, in a defined order:
 * - `request_safe`: after decide, before reserve; may change the request's subject or refuse it;
 * - `stream_event_safe`: on each neutral event of the answer before the client's encoder (a
 *   buffered answer passes through the same filters as one run of events), holding back at most
 *   a bounded number of events;
 * - `terminal_observer`: after the request's terminal, once; it cannot take back bytes sent.
 * (A fourth class, `buffer_required` — a check of the whole answer before the client sees any of
 * it — has no plugin yet; see docs/routing.md.)
 */
export type PluginClass = "request_safe" | "stream_event_safe" | "terminal_observer";

/**
 * What a model request's kind tells plugins beyond the subject, once decide has run: what a
 * plugin keys on that the subject does not carry (a response cache's key).
 */
export interface RequestFacts {
  readonly entrypoint: string;
  /** The plan's logical models with their published revisions, tier by tier (`a@3,b@1|c@2`). */
  readonly models: string;
  /** Only the headers the bootstrap config marks trusted, lower-case names. */
  readonly trustedHeaders: ReadonlyMap<string, string>;
  /** What the client's headers allow a response cache to do. */
  readonly cache: CacheDirectives;
}

/**
 * What a `request_safe` plugin may hand back instead of a subject: the request's answer (a
 * response cache's hit). The request is answered with it in the client's protocol, through the
 * `stream_event_safe` plugins, and nothing is reserved, admitted or sent.
 */
export interface ImmediateAnswer {
  readonly kind: "answer";
  readonly response: NeutralResponse;
}

/** What a `request_safe` plugin is given. */
export interface RequestSafeInput {
  readonly subject: Subject;
  readonly principal: Principal;
  /** The request's signals (computed on first ask, shared with decide). */
  readonly signals: SignalSet;
  /** The decision that chose this request's plan, when its kind decides by decisions. */
  readonly decision?: string | undefined;
  /** Records what the plugin did (redacted so many, blocked, failed open) for the access line and the audit trail. */
  readonly report: (entry: PluginReport) => void;
  /** Aborted when the request ends. */
  readonly signal: AbortSignal;
  /** The model request's facts (see {@link RequestFacts}); undefined for other kinds. */
  readonly facts?: RequestFacts | undefined;
  /** The request's model calls (the signals' own, so an embedding they made is reused); undefined without any. */
  readonly models?: SignalModels | undefined;
  /** True in an explain: the plugin reports what it would do and may not start work that outlives it. */
  readonly explain?: boolean | undefined;
}

/**
 * Runs before anything is reserved or sent. Returns a changed subject of the same kind (the kind
 * sends that instead), undefined to leave it as it is, or the request's answer (a model request
 * only); refuses the request by throwing a `GatewayError` (`content_blocked` for a policy
 * refusal). Any other throw is the gateway's fault.
 */
export interface RequestSafePlugin {
  readonly name: string;
  readonly class: "request_safe";
  apply(input: RequestSafeInput): Subject | ImmediateAnswer | undefined | Promise<Subject | ImmediateAnswer | undefined>;
}

/**
 * One answer's filter: each neutral event goes in, and what goes out now comes back (nothing, to
 * hold it back; several, to release what it held). `end` releases what is still held when the
 * answer ends (completed, or about to carry an error event).
 */
export interface StreamEventFilter {
  event(ev: NeutralEvent): readonly NeutralEvent[];
  end(): readonly NeutralEvent[];
  /**
   * How many events' worth it holds now, for a filter that merges what it holds (text joined
   * across events counts once). Absent: events in minus events out.
   */
  held?(): number;
}

/** Sees and may change every event of the answer before the client's encoder does. */
export interface StreamEventPlugin {
  readonly name: string;
  readonly class: "stream_event_safe";
  /** The most events it may hold back at once; holding more ends the stream as the gateway's fault. */
  readonly maxHoldBack: number;
  /**
   * Runs after every filter without it, whatever the configured order: a restore of what a
   * `request_safe` plugin redacted must see the answer as the client will, after any masking.
   */
  readonly runsLast?: boolean | undefined;
  open(): StreamEventFilter;
}

/** Sees the finished request once, after the terminal (the record, its attempts). */
export interface TerminalObserverPlugin {
  readonly name: string;
  readonly class: "terminal_observer";
  observe(view: TerminalView): void;
}

/** Any plugin, by its class. */
export type Plugin = RequestSafePlugin | StreamEventPlugin | TerminalObserverPlugin;

/**
 * A configured plugin (publication.yaml `plugins:`), compiled once per publication. Each request
 * that runs it gets its own instance: one or more hooks of different classes that share that
 * request's state (a redaction's placeholders, restored in the answer), and nothing else.
 */
export interface PluginFactory {
  readonly name: string;
  /** `report` records what a hook did outside `request_safe` (a stream filter's masking counts). */
  instantiate(report: (entry: PluginReport) => void): readonly Plugin[];
}

/** What compiled plugins may use of the runtime (one per isolate). */
export interface PluginDeps {
  /**
   * The tenant's response cache partition (its ResponseCache object, by tenant id). Absent: a
   * cache plugin neither serves nor stores, and says so in its report.
   */
  readonly cacheOf?: ((tenant: string) => Pick<ResponseCacheRpc, "lookup" | "put">) | undefined;
  /** For failures a plugin absorbs (a cache that could not be read or written): logs. */
  readonly log?: ((event: Readonly<Record<string, unknown>>) => void) | undefined;
}

/** The most events any `stream_event_safe` plugin may declare it holds back. */
export const MAX_HOLD_BACK = 256;

/** A request's plugins sorted by class, in the order they run. */
export interface PluginsByClass {
  readonly requestSafe: readonly RequestSafePlugin[];
  readonly streamEvent: readonly StreamEventPlugin[];
  readonly observers: readonly TerminalObserverPlugin[];
}

/**
 * The plugins of one request, sorted by class in their configured order (stream filters marked
 * `runsLast` after the others).
 * @throws Error when a plugin's declared bound is not a whole number in 0..{@link MAX_HOLD_BACK}
 *   (checked when plugins are loaded, not per event).
 */
export function byClass(plugins: readonly Plugin[]): PluginsByClass {
  const requestSafe: RequestSafePlugin[] = [];
  const streamEvent: StreamEventPlugin[] = [];
  const last: StreamEventPlugin[] = [];
  const observers: TerminalObserverPlugin[] = [];
  for (const p of plugins) {
    switch (p.class) {
      case "request_safe":
        requestSafe.push(p);
        break;
      case "stream_event_safe":
        if (!(Number.isInteger(p.maxHoldBack) && p.maxHoldBack >= 0 && p.maxHoldBack <= MAX_HOLD_BACK)) throw new Error(`plugin ${p.name}: maxHoldBack must be a whole number from 0 to ${MAX_HOLD_BACK}`);
        (p.runsLast ? last : streamEvent).push(p);
        break;
      case "terminal_observer":
        observers.push(p);
        break;
    }
  }
  return { requestSafe, streamEvent: [...streamEvent, ...last], observers };
}
