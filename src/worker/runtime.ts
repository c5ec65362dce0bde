import { connect } from "cloudflare:sockets";
import { ApiKeyAuthenticator } from "../auth/api-key-authenticator.ts";
import type { LoadedConfig } from "../config/load-config.ts";
import { canonicalDigest } from "../digest/canonical-digest.ts";
import { createEngine, type Engine } from "../engine/engine.ts";
import { GatewayExecutor } from "../invoker/executor.ts";
import type { AttemptSink } from "../pipeline/attempt-finalizer.ts";
import { builtinCodecs } from "../protocol/registry.ts";
import type { CodecRegistry } from "../protocol/codec.ts";
import type { SnapshotControllerClient } from "../snapshot/controller-client.ts";
import { SnapshotCache } from "../snapshot/snapshot-cache.ts";
import { systemClock, type Clock } from "../deps/clock.ts";
import { systemRng } from "../deps/rng.ts";
import { AdmissionController, systemScheduler } from "../traffic/admission.ts";
import { BreakerCache } from "../traffic/breaker-cache.ts";
import { breakerClient } from "../traffic/breaker-client.ts";
import { DrainController } from "../traffic/drain.ts";
import { HealthCache } from "../traffic/health-cache.ts";
import { healthClient } from "../traffic/health-client.ts";
import { attemptBudgetClient, type AttemptBudgetClient } from "../budget/attempt-budget-client.ts";
import { compileBudgetPolicy, type BudgetPolicy } from "../billing/budget-policy.ts";
import { budgetLedgerClient, type BudgetLedgerClient } from "../ledger/ledger-client.ts";
import { LoadTracker } from "../traffic/load-tracker.ts";
import { isolateConfig } from "./isolate-config.ts";

/** Everything a request handler needs, built once per isolate from config and bindings. */
export interface GatewayRuntime {
  readonly config: LoadedConfig;
  /** Digest of the effective (parsed, defaulted) bootstrap + publication config. */
  readonly configDigest: string;
  readonly engine: Engine;
  readonly codecs: CodecRegistry;
  readonly authenticator: ApiKeyAuthenticator;
  readonly executor: GatewayExecutor;
  readonly snapshots: SnapshotCache;
  /** Per-backend circuit breakers (cached view per isolate); undefined when disabled. */
  readonly breakers: BreakerCache | undefined;
  /** Active health of backends (cached view per isolate); undefined when disabled. */
  readonly health: HealthCache | undefined;
  /** Cross-layer attempt budgets, one Durable Object per (tenant, call id). */
  readonly callBudgets: AttemptBudgetClient;
  /** Budget scopes, prices and entrypoint budget policies, compiled from the publication. */
  readonly budgets: BudgetPolicy;
  /** The tenants' BudgetLedger objects (striped where the publication says so). */
  readonly ledger: BudgetLedgerClient;
  /** Graceful drain of this isolate: stop admission, let requests finish, cancel the rest. */
  readonly drain: DrainController;
  /** Isolate-local admission: concurrency limits and the fair, deadline-aware queue. */
  readonly admission: AdmissionController;
  readonly controller: SnapshotControllerClient;
  readonly clock: Clock;
  readonly startedAt: number;
  readonly adminToken: string | undefined;
}

/** Access log: one JSON line per finished attempt; ids only, never a key, prompt or provider secret. */
function accessLogSink(enabled: boolean): AttemptSink {
  return {
    attemptFinished(a) {
      if (!enabled) return;
      console.log(
        JSON.stringify({
          kind: "attempt",
          requestId: a.requestId,
          attemptId: a.id,
          snapshotRevision: a.snapshotRevision,
          model: a.logicalModel,
          modelRevision: a.modelRevision,
          backend: a.backendName,
          status: a.status,
          outcome: a.outcome,
          errorCode: a.errorCode,
          stopReason: a.stopReason,
          headersMs: a.headersAt === undefined ? undefined : a.headersAt - a.startedAt,
          ttftMs: a.firstContentAt === undefined ? undefined : a.firstContentAt - a.startedAt,
          durationMs: a.endedAt === undefined ? undefined : a.endedAt - a.startedAt,
          usage: a.usage ?? "unknown",
          downgraded: a.downgraded,
        }),
      );
    },
  };
}

/**
 * Typed client over the controller's RPC stub. A stub is an I/O object bound to the request that
 * created it, so each call takes a fresh one (cheap) instead of caching one per isolate.
 */
function snapshotControllerClient(env: Env): SnapshotControllerClient {
  const stub = () => env.SNAPSHOT_CONTROLLER.getByName("global");
  return {
    getActive: async () => await stub().getActive(),
    propose: async (candidate, source) => await stub().propose(candidate, source),
    rollback: async (revision, source) => await stub().rollback(revision, source),
    history: async (limit) => await stub().history(limit),
  };
}

/**
 * Opens a TCP connection and closes it again: true when it opened. Backends with `connectCheck`
 * use it before each attempt, so a connection that cannot be opened is proof nothing was sent.
 */
async function tcpPreconnect(hostname: string, port: number, signal: AbortSignal): Promise<boolean> {
  const socket = connect({ hostname, port });
  const onAbort = () => void socket.close().catch(() => {});
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    await socket.opened;
    return true;
  } catch {
    return false;
  } finally {
    signal.removeEventListener("abort", onAbort);
    socket.close().catch(() => {});
  }
}

let runtime: { env: Env; value: Promise<GatewayRuntime> } | undefined;

/** The isolate's runtime, built on first use and rebuilt only if the bindings object changes. */
export function getRuntime(env: Env): Promise<GatewayRuntime> {
  if (runtime?.env !== env) runtime = { env, value: buildRuntime(env) };
  return runtime.value;
}

async function buildRuntime(env: Env): Promise<GatewayRuntime> {
  const config = isolateConfig(env);
  const clock = systemClock;
  const controller = snapshotControllerClient(env);
  const load = new LoadTracker(clock, {
    freshnessMs: config.gateway.traffic.loadFreshnessMs,
    halfLifeMs: config.gateway.traffic.latencyHalfLifeMs,
  });
  const secrets = env as unknown as Record<string, unknown>;
  const budgets = compileBudgetPolicy(config.publication);
  const stripes = new Map(budgets.tenants().map((t) => [t.root, t.stripes]));
  return {
    budgets,
    ledger: budgetLedgerClient((name) => env.BUDGET_LEDGER.getByName(name), { stripes: (root) => stripes.get(root) ?? 1 }),
    config,
    configDigest: await canonicalDigest({ gateway: config.gateway, publication: config.publication }),
    engine: createEngine(config.gateway, config.publication, { clock, codecs: builtinCodecs }),
    codecs: builtinCodecs,
    authenticator: new ApiKeyAuthenticator(config.publication),
    executor: new GatewayExecutor({
      codecs: builtinCodecs,
      credentials: { get: (name) => (typeof secrets[name] === "string" ? (secrets[name] as string) : undefined) },
      load,
      clock,
      rng: systemRng,
      sink: accessLogSink(config.gateway.observability.accessLog),
      fetch: (input, init) => fetch(input, init),
      firstByteTimeoutMs: config.gateway.traffic.firstByteTimeoutMs,
      preconnect: tcpPreconnect,
    }),
    breakers: (() => {
      const b = config.gateway.breaker;
      if (!b.enabled) return undefined;
      const client = breakerClient((id) => env.CIRCUIT_BREAKER.getByName(id), {
        windowMs: b.windowMs,
        minSamples: b.minSamples,
        failureRatio: b.failureRatio,
        openMs: b.openMs,
        halfOpenProbes: b.halfOpenProbes,
        halfOpenSuccesses: b.halfOpenSuccesses,
      });
      return new BreakerCache(client, clock, {
        ttlMs: b.cacheTtlMs,
        onError: (err, backendId, operation) => console.error(JSON.stringify({ kind: "breaker_error", backendId, operation, error: String(err) })),
      });
    })(),
    drain: new DrainController(clock),
    health: config.gateway.health.enabled
      ? new HealthCache(healthClient((id) => env.HEALTH_MONITOR.getByName(id)), clock, {
          ttlMs: config.gateway.health.cacheTtlMs,
          onError: (err) => console.error(JSON.stringify({ kind: "health_error", error: String(err) })),
        })
      : undefined,
    callBudgets: attemptBudgetClient((key) => env.ATTEMPT_BUDGET.getByName(key)),
    admission: new AdmissionController(clock, systemScheduler, {
      limits: {
        global: config.gateway.admission.maxConcurrent,
        perTenant: config.gateway.admission.perTenant,
        perModel: config.gateway.admission.perModel,
        perBackend: config.gateway.admission.perBackend,
      },
      maxQueue: config.gateway.admission.maxQueue,
      maxQueuePerTenant: config.gateway.admission.maxQueuePerTenant,
    }),
    snapshots: new SnapshotCache(() => controller.getActive(), clock, config.gateway.traffic.snapshotCacheTtlMs, (err) =>
      console.error(JSON.stringify({ kind: "snapshot_refresh_failed", error: String(err) })),
    ),
    controller,
    clock,
    startedAt: clock.now(),
    adminToken: (() => {
      const t = secrets[config.gateway.security.adminTokenSecret];
      return typeof t === "string" && t !== "" ? t : undefined;
    })(),
  };
}
