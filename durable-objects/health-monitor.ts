import { DurableObject } from "cloudflare:workers";
import { systemClock } from "../src/deps/clock.ts";
import { systemRng } from "../src/deps/rng.ts";
import type { ProbeFetch, ProbeTarget } from "../src/traffic/health.ts";
import type { HealthRpc, HealthView } from "../src/traffic/health-client.ts";
import { globalProbeFetch, HealthMonitorService } from "../src/traffic/health-monitor-service.ts";
import { probeMcpServer } from "../src/mcp/health-probe.ts";
import { isolateConfig } from "../src/worker/isolate-config.ts";
import { secretReader } from "../src/worker/secrets.ts";
import { fetcherBindings } from "../src/worker/fetcher-bindings.ts";
import { SqliteHealthStore } from "./sqlite-health-store.ts";

/**
 * HealthMonitor: one instance per backend id (`HEALTH_MONITOR.getByName(backendId)`), or per MCP
 * server (`mcp:<name>`, probed with src/mcp/health-probe.ts). A thin shell: what it serves is
 * HealthMonitorService over the pure pieces in src/traffic/health.ts, tested without this class.
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
  readonly #monitor: HealthMonitorService;
  /**
   * The fetch probes use: the global fetch. Tests replace it on the instance (inside
   * `runInDurableObject`) so alarm tests need no network; it is not reachable over RPC.
   */
  probeFetch: ProbeFetch = globalProbeFetch;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#monitor = new HealthMonitorService({
      store: new SqliteHealthStore(ctx.storage),
      alarm: ctx.storage,
      clock: systemClock,
      rng: systemRng,
      egress: () => isolateConfig(env).gateway.security.egress,
      secret: secretReader(env),
      probeMcp: probeMcpServer,
      fetcher: fetcherBindings(env),
    });
  }

  async watch(target: ProbeTarget): Promise<HealthView> {
    return this.#monitor.watch(target);
  }

  async state(): Promise<HealthView> {
    return this.#monitor.state();
  }

  async unwatch(): Promise<void> {
    await this.#monitor.unwatch();
  }

  override async alarm(): Promise<void> {
    await this.#monitor.alarm(this.probeFetch);
  }
}
