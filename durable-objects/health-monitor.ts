import { DurableObject } from "cloudflare:workers";
import { systemClock, type Clock } from "../src/deps/clock.ts";
import { systemRng, type Rng } from "../src/deps/rng.ts";
import {
  credentialHeaders,
  firstProbeAt,
  nextProbeAt,
  probeEgressRefusal,
  probeOnce,
  probeTargetKey,
  recordProbe,
  resolveProbeTarget,
  type ProbeFetch,
  type ProbeResult,
  type ProbeTarget,
  type ResolvedProbeTarget,
} from "../src/traffic/health.ts";
import type { HealthRpc, HealthView } from "../src/traffic/health-client.ts";
import { probeMcpServer } from "../src/mcp/health-probe.ts";
import { isolateConfig } from "../src/worker/isolate-config.ts";
import { SqliteHealthStore } from "./sqlite-health-store.ts";

/**
 * HealthMonitor: one instance per backend id (`HEALTH_MONITOR.getByName(backendId)`), or per MCP
 * server (`mcp:<name>`, probed with src/mcp/health-probe.ts). A thin shell
 * around the pure pieces in src/traffic/health.ts, tested without this class.
 *
 * `watch` stores the target and arms the alarm unless one is armed (a second `watch` never adds or
 * delays a probe; a shorter interval brings the next probe forward). The alarm probes once, records
 * the result in one `transactionSync` with no `await` between read and write, and re-arms at
 * `nextProbeAt` (jittered). Probing lives here, not in the isolates serving traffic, so a backend
 * receives one probe per interval however many isolates there are.
 *
 * Credentials: a target names a secret (`credential.authorizationSecret`), read from this object's
 * own `env` at probe time; only the name is stored. The target comes from the gateway's config, the
 * same source that names the backend's credential for real traffic.
 *
 * Egress: every probe passes the egress guard first (gateway.yaml `security.egress`), whatever
 * target was stored; a refused one fails as `egress_refused: <code>` without being sent.
 */
export class HealthMonitor extends DurableObject<Env> implements HealthRpc {
  readonly #store: SqliteHealthStore;
  readonly #clock: Clock = systemClock;
  readonly #rng: Rng = systemRng;
  /**
   * The fetch probes use: the global fetch. Tests replace it on the instance (inside
   * `runInDurableObject`) so alarm tests need no network; it is not reachable over RPC.
   */
  probeFetch: ProbeFetch = (input, init) => fetch(input, init);

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#store = new SqliteHealthStore(ctx.storage);
  }

  async watch(target: ProbeTarget): Promise<HealthView> {
    const resolved = resolveProbeTarget(target);
    this.#store.transaction(() => this.#store.saveTarget(resolved));
    const now = this.#clock.now();
    const current = await this.ctx.storage.getAlarm();
    // Arm when nothing is armed, or when the armed probe is later than the new target would ever schedule it.
    const latest = now + resolved.intervalMs * (1 + resolved.jitterRatio);
    if (current === null || current > latest) await this.ctx.storage.setAlarm(firstProbeAt(now, resolved, this.#rng));
    return this.state();
  }

  async state(): Promise<HealthView> {
    const { target, health } = this.#store.transaction(() => ({ target: this.#store.loadTarget(), health: this.#store.loadHealth() }));
    const next = target === undefined ? null : await this.ctx.storage.getAlarm();
    return { ...health, watching: target !== undefined, targetKey: target === undefined ? undefined : probeTargetKey(target), nextProbeAt: next ?? undefined };
  }

  async unwatch(): Promise<void> {
    await this.#store.drop();
  }

  override async alarm(): Promise<void> {
    const target = this.#store.transaction(() => this.#store.loadTarget());
    if (target === undefined) return; // unwatched: let the alarm lapse
    const result = await this.#probe(target);
    const next = this.#store.transaction(() => {
      // Re-read: the target may have been replaced or removed while the probe was in flight.
      const current = this.#store.loadTarget();
      if (current === undefined) return undefined;
      const now = this.#clock.now();
      this.#store.saveHealth(recordProbe(this.#store.loadHealth(), result, now, current));
      return nextProbeAt(now, current, this.#rng);
    });
    if (next !== undefined) await this.ctx.storage.setAlarm(next);
  }

  async #probe(target: ResolvedProbeTarget): Promise<ProbeResult> {
    // The stored target may predate the egress guard or the current allowlist: checked per probe.
    const refused = probeEgressRefusal(target, isolateConfig(this.env).gateway.security.egress);
    if (refused) return refused;
    const creds = credentialHeaders(target, (name) => {
      const v = (this.env as unknown as Record<string, unknown>)[name];
      return typeof v === "string" ? v : undefined;
    });
    if ("missing" in creds) return { ok: false, latencyMs: 0, reason: `credential_missing: ${creds.missing}` };
    // An MCP server is asked for its discovery or initialize, never a tool call (src/mcp/health-probe.ts).
    return target.mcp ? probeMcpServer(this.probeFetch, target, this.#clock, creds.headers) : probeOnce(this.probeFetch, target, this.#clock, creds.headers);
  }
}
