import type { AlarmStorage } from "../deps/alarm-storage.ts";
import type { Clock } from "../deps/clock.ts";
import type { Rng } from "../deps/rng.ts";
import type { EgressPolicy } from "../egress/egress-guard.ts";
import {
  credentialHeaders,
  firstProbeAt,
  nextProbeAt,
  probeEgressRefusal,
  probeOnce,
  probeTargetKey,
  recordProbe,
  resolveProbeTarget,
  type HealthSnapshot,
  type ProbeFetch,
  type ProbeResult,
  type ProbeTarget,
  type ResolvedProbeTarget,
} from "./health.ts";
import type { HealthView } from "./health-client.ts";

/** Where a monitor's target and health live (the object's SQLite storage, or memory in tests). */
export interface HealthStore {
  /** Runs `fn` atomically, with no other call interleaved (a Durable Object's `transactionSync`). */
  transaction<T>(fn: () => T): T;
  /** The watched target; undefined when none (or an unreadable one) is stored. */
  loadTarget(): ResolvedProbeTarget | undefined;
  /** The stored health; a fresh `unknown` one when none (or an unreadable one) is stored. */
  loadHealth(): HealthSnapshot;
  saveTarget(target: ResolvedProbeTarget): void;
  saveHealth(health: HealthSnapshot): void;
  /** Deletes everything stored, the alarm included; the store stays usable afterwards. */
  drop(): Promise<void>;
}

/** Probes an MCP server: its discovery or initialize, never a tool call (src/mcp/health-probe.ts). */
export type McpProbe = (fetchFn: ProbeFetch, target: ResolvedProbeTarget, clock: Clock, credentialHeaders: Readonly<Record<string, string>>) => Promise<ProbeResult>;

/** What a monitor works with; the object passes its storage, its env's secrets and the isolate's config. */
export interface HealthMonitorDeps {
  readonly store: HealthStore;
  readonly alarm: AlarmStorage;
  readonly clock: Clock;
  readonly rng: Rng;
  /** The egress rules every probe passes first (gateway.yaml `security.egress`), read per probe. */
  readonly egress: () => EgressPolicy;
  /** A secret's value by name, read at probe time; undefined when it is not set. */
  readonly secret: (name: string) => string | undefined;
  /** A Worker fetcher binding by name, for targets reached through one (backends with `tls`); undefined when none is bound by that name. */
  readonly fetcher?: ((binding: string) => ProbeFetch | undefined) | undefined;
  /** How an MCP target is probed (the MCP layer sits above this one, so it is passed in). */
  readonly probeMcp: McpProbe;
}

/** The global `fetch`, as probes call it: a plain function, never a method of something else. */
export const globalProbeFetch: ProbeFetch = (input, init) => fetch(input, init);

/**
 * What the HealthMonitor object serves over RPC and runs on its alarm, runnable without it.
 *
 * `watch` stores the target and arms the alarm unless one is armed (a second `watch` never adds or
 * delays a probe; a shorter interval brings the next probe forward). The alarm probes once,
 * records the result in one transaction with no `await` between read and write, and re-arms at
 * `nextProbeAt` (jittered). The fetch a probe uses is handed to each alarm run, so a test can
 * replace it on a live object.
 *
 * Credentials: a target names a secret, read at probe time; only the name is stored. Egress: every
 * probe passes the egress guard first, whatever target was stored; a refused one fails as
 * `egress_refused: <code>` without being sent.
 */
export class HealthMonitorService {
  readonly #store: HealthStore;
  readonly #alarm: AlarmStorage;
  readonly #clock: Clock;
  readonly #rng: Rng;
  readonly #egress: () => EgressPolicy;
  readonly #secret: (name: string) => string | undefined;
  readonly #probeMcp: McpProbe;
  readonly #fetcher: ((binding: string) => ProbeFetch | undefined) | undefined;

  constructor(deps: HealthMonitorDeps) {
    this.#store = deps.store;
    this.#alarm = deps.alarm;
    this.#clock = deps.clock;
    this.#rng = deps.rng;
    this.#egress = deps.egress;
    this.#secret = deps.secret;
    this.#probeMcp = deps.probeMcp;
    this.#fetcher = deps.fetcher;
  }

  /** @throws RangeError listing every invalid field of the target (nothing is stored or armed). */
  async watch(target: ProbeTarget): Promise<HealthView> {
    const resolved = resolveProbeTarget(target);
    this.#store.transaction(() => this.#store.saveTarget(resolved));
    const now = this.#clock.now();
    const current = await this.#alarm.getAlarm();
    // Arm when nothing is armed, or when the armed probe is later than the new target would ever schedule it.
    const latest = now + resolved.intervalMs * (1 + resolved.jitterRatio);
    if (current === null || current > latest) await this.#alarm.setAlarm(firstProbeAt(now, resolved, this.#rng));
    return this.state();
  }

  async state(): Promise<HealthView> {
    const { target, health } = this.#store.transaction(() => ({ target: this.#store.loadTarget(), health: this.#store.loadHealth() }));
    const next = target === undefined ? null : await this.#alarm.getAlarm();
    return { ...health, watching: target !== undefined, targetKey: target === undefined ? undefined : probeTargetKey(target), nextProbeAt: next ?? undefined };
  }

  async unwatch(): Promise<void> {
    await this.#store.drop();
  }

  /** Probes the watched target once with `fetchFn`, records the result and re-arms; nothing when unwatched. */
  async alarm(fetchFn: ProbeFetch): Promise<void> {
    const target = this.#store.transaction(() => this.#store.loadTarget());
    if (target === undefined) return; // unwatched: let the alarm lapse
    const result = await this.#probe(target, fetchFn);
    const next = this.#store.transaction(() => {
      // Re-read: the target may have been replaced or removed while the probe was in flight.
      const current = this.#store.loadTarget();
      if (current === undefined) return undefined;
      const now = this.#clock.now();
      this.#store.saveHealth(recordProbe(this.#store.loadHealth(), result, now, current));
      return nextProbeAt(now, current, this.#rng);
    });
    if (next !== undefined) await this.#alarm.setAlarm(next);
  }

  async #probe(target: ResolvedProbeTarget, fetchFn: ProbeFetch): Promise<ProbeResult> {
    // The stored target may predate the egress guard or the current allowlist: checked per probe.
    const refused = probeEgressRefusal(target, this.#egress());
    if (refused) return refused;
    const creds = credentialHeaders(target, this.#secret);
    if ("missing" in creds) return { ok: false, latencyMs: 0, reason: `credential_missing: ${creds.missing}` };
    if (target.binding !== undefined) {
      const through = this.#fetcher?.(target.binding);
      if (through === undefined) return { ok: false, latencyMs: 0, reason: `binding_missing: ${target.binding}` };
      fetchFn = through;
    }
    return target.mcp ? this.#probeMcp(fetchFn, target, this.#clock, creds.headers) : probeOnce(fetchFn, target, this.#clock, creds.headers);
  }
}
