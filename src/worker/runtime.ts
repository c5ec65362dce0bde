import { connect } from "cloudflare:sockets";
import { AdmissionController } from "../admit/admission.ts";
import { DrainController } from "../admit/drain.ts";
import { attemptBudgetClient } from "../call-budget/attempt-budget-client.ts";
import { taskBindingClient } from "../tasks/task-binding-client.ts";
import type { LoadedConfig } from "../config/load-config.ts";
import { systemClock, type Clock } from "../deps/clock.ts";
import { systemRng } from "../deps/rng.ts";
import { systemScheduler } from "../deps/scheduler.ts";
import { canonicalDigest } from "../digest/canonical-digest.ts";
import { createEngine, type Engine } from "../engine/engine.ts";
import { TokenCache } from "../invoker/auth/token-cache.ts";
import { GatewayExecutor } from "../invoker/executor.ts";
import { CredentialWatch } from "../traffic/credential-watch.ts";
import { isWorkersAiBinding } from "../invoker/workers-ai-binding.ts";
import { fetcherBindings } from "./fetcher-bindings.ts";
import { budgetLedgerClient } from "../ledger/ledger-client.ts";
import { LeasingLedgerClient } from "../ledger/leasing-ledger-client.ts";
import { builtinCodecs } from "../protocol/registry.ts";
import type { CompiledPublication } from "../publication/compile-publication.ts";
import { chargeTargetsOf } from "../publication/principal.ts";
import { accessLog } from "../settle/access-log.ts";
import { settleStep } from "../settle/settle-step.ts";
import { GatewayMetrics, type PublicationNames } from "../telemetry/gateway-metrics.ts";
import { OtlpExporter } from "../telemetry/otlp-exporter.ts";
import { assembledSink } from "../telemetry/request-assembly.ts";
import { taskLedgerSink, type TaskLedgerSink } from "../task-ledger/task-ledger-client.ts";
import type { SnapshotControllerClient } from "../snapshot/controller-client.ts";
import { SnapshotCache } from "../snapshot/snapshot-cache.ts";
import type { PinnedSnapshot } from "../snapshot/pinned-snapshot.ts";
import { BreakerCache } from "../traffic/breaker-cache.ts";
import { breakerClient } from "../traffic/breaker-client.ts";
import { HealthCache } from "../traffic/health-cache.ts";
import { AgentCardCache, agentCardSources, cardRegistryClient } from "../a2a/card-cache.ts";
import { AgentHealth } from "../a2a/agent-health.ts";
import { healthClient } from "../traffic/health-client.ts";
import { LoadTracker } from "../traffic/load-tracker.ts";
import { RecentTraffic } from "../telemetry/recent-traffic.ts";
import { A2aPolicy } from "../a2a/a2a-policy.ts";
import { A2aRouter, AffinityTable } from "../a2a/a2a-routing.ts";
import { A2aIdBinding } from "../a2a/task-binding.ts";
import { PushRelaySealer, type PushRelayDeps } from "../a2a/push-relay.ts";
import type { A2aDeps } from "../kinds/a2a/a2a-deps.ts";
import { A2A_METHODS } from "../protocol/a2a/a2a-request.ts";
import { SPOKEN_GENERATIONS } from "../protocol/a2a/agent-card.ts";
import { ToolPolicy } from "../mcp/tool-policy.ts";
import { McpUpstream } from "../mcp/upstream-client.ts";
import type { McpServerHandle } from "../mcp/server-handle.ts";
import type { McpDeps } from "../kinds/mcp/mcp-deps.ts";
import { ClientRelays, InFlightRequests } from "../mcp/client-relays.ts";
import { ToolPrices } from "../publication/tool-prices.ts";
import { RestServer } from "../mcp/rest-server.ts";
import { mcpProbeTarget } from "../mcp/health-probe.ts";
import { SessionSealer } from "../mcp/sealed-session.ts";
import { OAuthVerifier } from "../auth/oauth-verifier.ts";
import { isolateConfig, type IsolateConfig } from "./isolate-config.ts";
import { heldSecretValues } from "../egress/held-secrets.ts";
import { RequestStateSealer } from "../approvals/request-state.ts";
import { TaskHandleSealer } from "../approvals/task-handle.ts";
import { AgentTaskHandleSealer } from "../approvals/agent-task-handle.ts";
import type { ApprovalDeps, ApprovalDeskRpc } from "../approvals/approval-desk-rpc.ts";
import type { GatewayConfig } from "../config/gateway-schema.ts";
import { publicationSchema, type PublicationConfig } from "../config/publication-schema.ts";
import { compilePublication } from "../publication/compile-publication.ts";
import type { EngineDeps } from "../engine/engine-deps.ts";
import type { ActivePublication } from "../publication-lifecycle/controller.ts";
import type { PublicationControllerClient } from "../publication-lifecycle/controller-client.ts";
import { PublicationCache } from "../publication-lifecycle/publication-cache.ts";
import { credentialHeader } from "../egress/credential-header.ts";

/**
 * Everything the adapters need: built once per isolate from config and bindings, and seen by each
 * request through the publication revision it pinned (one view per revision, built once).
 */
export interface GatewayRuntime {
  /** The bootstrap, the pinned revision's publication, and the bundled backends seed. */
  readonly config: LoadedConfig;
  /** The pinned revision, compiled once per isolate: what every phase, the route table and readiness read. */
  readonly publication: CompiledPublication;
  /** The isolate's view of the active publication: each request's runtime comes from it. */
  readonly publications: PublicationCache<GatewayRuntime>;
  readonly publicationController: PublicationControllerClient;
  /** Digest of the effective (parsed, defaulted) bootstrap + publication config. */
  readonly configDigest: string;
  readonly engine: Engine;
  readonly snapshots: SnapshotCache;
  /** Per-backend circuit breakers (cached view per isolate); undefined when disabled. */
  readonly breakers: BreakerCache | undefined;
  /** Active health of backends (cached view per isolate); undefined when disabled. */
  readonly health: HealthCache | undefined;
  /** The A2A agents' cards (inline, or as their AgentCardRegistry objects last fetched them), cached per isolate. */
  readonly agentCards: AgentCardCache;
  /** The A2A agents' probed health (over `health`): what routing's `isHealthy(agent)` reads. */
  readonly agentHealth: AgentHealth;
  /** Whether the gateway relays A2A push notifications (gateway.yaml `a2a.push`, its secret set): cards claim them only then. */
  readonly pushRelay: boolean;
  /** The revision's A2A policy and prices (`a2a` in the publication): deny by default. */
  readonly a2aPolicy: A2aPolicy;
  /** The tenants' BudgetLedger objects (striped where the publication says so). */
  /** The tenants' ledgers, through this isolate's budget leases and settlement batches. */
  readonly ledger: LeasingLedgerClient;
  /** Graceful drain of this isolate: stop admission, let requests finish, cancel the rest. */
  readonly drain: DrainController;
  /** Isolate-local admission: concurrency limits and the fair, deadline-aware queue. */
  readonly admission: AdmissionController;
  readonly controller: SnapshotControllerClient;
  readonly clock: Clock;
  readonly startedAt: number;
  readonly adminToken: string | undefined;
  /** The approvers' bearer token (`governance.approverTokenSecret`): accepted on the approvals admin routes only. */
  readonly approverToken: string | undefined;
  /** The verifier's bearer token (governance.verifierTokenSecret): the only credential that may attach a task's outcome. */
  readonly verifierToken: string | undefined;
  /** This isolate's metrics, and the OTLP exporter when one is configured. */
  readonly telemetry: { readonly metrics: GatewayMetrics; readonly exporter: OtlpExporter | undefined };
  /** The call ledger's sink: the engine's requests go through it, and so do audit events the admin API causes. */
  readonly taskLedger: TaskLedgerSink;
  /** The MCP endpoint's OAuth resource server (its JWKS cache lives as long as the isolate); undefined when not configured. */
  readonly oauth: OAuthVerifier | undefined;
  /** Which backends' providers refused the gateway's credential in this isolate's traffic (`/admin/status`). */
  readonly credentialWatch: CredentialWatch;
  /** Attempts in flight and latency per backend, as this isolate's selectors see them (`/admin/status`). */
  readonly load: LoadTracker;
  /** This isolate's recent traffic per entrypoint, route and backend (the console's overview; `GET /admin/traffic`). */
  readonly traffic: RecentTraffic;
}

/** `req_` + 32 hex chars: unguessable, and never a metric label. */
export function newRequestId(): string {
  return `req_${crypto.randomUUID().replaceAll("-", "")}`;
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

const logError = (event: Readonly<Record<string, unknown>>) => console.error(JSON.stringify(event));

/** The version OTLP exports report as `service.version`. */
const SLUICE_VERSION = "0.1.0";

/** Collector headers from a secret: `name=value` pairs separated by commas (the OTEL_EXPORTER_OTLP_HEADERS form). */
function otlpHeaders(secret: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (typeof secret !== "string") return out;
  for (const pair of secret.split(",")) {
    const eq = pair.indexOf("=");
    if (eq > 0) out[pair.slice(0, eq).trim().toLowerCase()] = decodeURIComponent(pair.slice(eq + 1).trim());
  }
  return out;
}

/** Typed client over the publication controller's RPC stub (a fresh stub per call, as for snapshots). */
function publicationControllerClient(env: Env): PublicationControllerClient {
  const stub = () => env.PUBLICATION_CONTROLLER.getByName("global");
  return {
    getActive: async () => await stub().getActive(),
    head: async () => await stub().head(),
    get: async (revision) => await stub().get(revision),
    publish: async (candidate, source, options) => await stub().publish(candidate, source, options),
    promoteCanary: async (source) => await stub().promoteCanary(source),
    abortCanary: async (source) => await stub().abortCanary(source),
    rollback: async (revision, source) => await stub().rollback(revision, source),
    history: async (limit) => await stub().history(limit),
    amendKeys: async (op, source) => await stub().amendKeys(op, source),
    keys: async (tenant) => await stub().keys(tenant),
  };
}

let runtime: Promise<PublicationCache<GatewayRuntime>> | undefined;

/**
 * The runtime a request runs with: the isolate's, built on first use and kept for the isolate's
 * life, seen through the active publication revision (refreshed at most once per
 * `traffic.publicationCacheTtlMs`). The caller keeps what it gets for the request's whole life:
 * that is the request's publication pin. Bindings are the isolate's, so the first `env` serves all.
 * While a publication canary runs, `routingKey` (the caller's identity, asked for only then) picks
 * the canary's view for the canary's share of callers; without one a request gets the stable view.
 */
export async function getRuntime(env: Env, routingKey?: () => string | undefined): Promise<GatewayRuntime> {
  runtime ??= buildRuntime(env);
  return (await runtime).current(routingKey);
}

async function buildRuntime(env: Env): Promise<PublicationCache<GatewayRuntime>> {
  const config = isolateConfig(env);
  const gw = config.gateway;
  const clock = systemClock;
  const secrets = env as unknown as Record<string, unknown>;
  const controller = snapshotControllerClient(env);
  const publicationController = publicationControllerClient(env);
  // Stripes of every ledger root this isolate has compiled: the controller refuses a revision that changes a root's.
  const stripes = new Map<string, number>();
  const { ledger, callBudgets, tasks } = ledgerClients(env, stripes, clock);
  const { breakers, health } = backendViews(env, gw, clock);
  const drain = new DrainController(clock);
  const admission = new AdmissionController(clock, systemScheduler, {
    limits: { global: gw.admission.maxConcurrent, perTenant: gw.admission.perTenant, perModel: gw.admission.perModel, perBackend: gw.admission.perBackend },
    maxQueue: gw.admission.maxQueue,
    maxQueuePerTenant: gw.admission.maxQueuePerTenant,
  });
  // One per isolate: concurrent requests share a mint, and a token serves until shortly before it expires.
  const tokens = new TokenCache({ clock });
  const credentialWatch = new CredentialWatch();
  const load = new LoadTracker(clock, { freshnessMs: gw.traffic.loadFreshnessMs, halfLifeMs: gw.traffic.latencyHalfLifeMs });
  const traffic = new RecentTraffic(clock);
  const { snapshots, metrics, exporter } = telemetryOf(config, secrets, clock, { controller, ledger, breakers, health, drain, admission, tokens, publications: () => publications });
  const mcpBase = await mcpOf(env, config, secrets);
  const taskLedger = taskLedgerSink({
    ledgerOf: (tenant) => env.TASK_LEDGER.getByName(tenant),
    retentionMs: gw.governance.retentionDays * 86_400_000,
    maxRequests: gw.governance.requestLog.maxCalls,
    modelCompletions: gw.governance.audit.modelCompletions,
    line: gw.observability.accessLog ? (line) => console.log(line) : undefined,
    log: logError,
  });
  const engineDeps: Omit<EngineDeps, "publication" | "mcp" | "oauth" | "a2a"> = {
    codecs: builtinCodecs,
    clock,
    scheduler: systemScheduler,
    newRequestId,
    requestDeadlineMs: gw.traffic.requestDeadlineMs,
    streamTimeouts: { firstTokenMs: gw.traffic.firstTokenTimeoutMs, idleMs: gw.traffic.streamIdleTimeoutMs },
    drain,
    admission,
    snapshot: () => snapshots.current(),
    invoker: invokerOf(gw, secrets, clock, tokens, credentialWatch, load, heldSecretsOf(gw, secrets, snapshots)),
    reserve: { ledger, callBudgets, tasks, log: logError },
    settle: settleStep({ ledger, log: logError, onSettlement: (o) => metrics.settlement(o) }),
    breakers,
    health,
    sink: assembledSink([accessLog(gw.observability.accessLog), metrics, traffic, ...(exporter ? [exporter] : []), taskLedger]),
    tracing: {
      // The trusted-header policy decides: a client's trace is continued only when `traceparent` is trusted.
      trustClient: gw.security.trustedHeaders.includes("traceparent"),
      sample: () => Math.random() < gw.observability.tracing.sampleRatio,
    },
    onUndoError: (err, what) => logError({ kind: "release_failed", resource: what, error: String(err) }),
    log: logError,
    // Each tenant's response cache is its own object: a lookup can only ever reach that tenant's entries.
    cacheOf: (tenant) => env.RESPONSE_CACHE.getByName(tenant),
  };
  const agentCards = new AgentCardCache(cardRegistryClient((agent) => env.AGENT_CARD_REGISTRY.getByName(agent)), agentCardSources(gw.a2a.agents), clock, {
    onError: (err, agent, operation) => logError({ kind: "agent_card_error", agent, operation, error: String(err) }),
  });
  const agentHealth = new AgentHealth(health, gw.a2a.agents);
  // The virtual agent's pins live in this isolate and outlive revisions (a Durable Object would
  // share them across isolates; until then another isolate routes a context afresh).
  const affinity = new AffinityTable();
  // Agent messages are held at the same approval desk as tool calls.
  const a2aBase = await a2aOf(gw, secrets, agentCards, agentHealth, mcpBase.approvals);
  const base: Omit<GatewayRuntime, "config" | "publication" | "configDigest" | "engine" | "oauth" | "publications" | "a2aPolicy"> = {
    publicationController,
    snapshots,
    breakers,
    health,
    agentCards,
    agentHealth,
    pushRelay: a2aBase?.push !== undefined,
    ledger,
    drain,
    admission,
    controller,
    clock,
    startedAt: clock.now(),
    telemetry: { metrics, exporter },
    taskLedger,
    credentialWatch,
    load,
    traffic,
    verifierToken: secretOf(secrets, gw.governance.verifierTokenSecret),
    adminToken: secretOf(secrets, gw.security.adminTokenSecret),
    approverToken: secretOf(secrets, gw.governance.approverTokenSecret),
  };
  // One verifier per isolate (its JWKS caches outlive revisions); each revision's view maps tokens to that revision's tenants.
  const oauthBase = oauthOf(gw, config.publication, clock);
  // One view per revision: its compiled publication, its engine (every request begun on it, and
  // every retry, fallback and sub-call inside, decides under that revision) and its MCP policy.
  let views = 0;
  const view = async (active: ActivePublication): Promise<GatewayRuntime> => {
    // A new revision may change limits: budget slices this isolate leased under the old ones go
    // back first (those with attempts in flight after their last one), so what they did not use
    // is returned before the new limits apply, not credited after them.
    if (views++ > 0) await ledger.settleNow(true).catch((err: unknown) => logError({ kind: "lease_return_failed", error: String(err) }));
    const pub = publicationSchema.parse(active.document);
    const compiled = compilePublication(pub, active.revision);
    for (const t of compiled.budgets.tenants()) stripes.set(t.root, t.stripes);
    metrics.admitPublication(metricNamesOf(compiled, gw));
    const oauth = oauthBase?.withTenants(chargeTargetsOf(pub));
    const mcp: McpDeps = { ...mcpBase, policy: new ToolPolicy(pub.mcp?.policy ?? { revision: "none", rules: [] }), prices: new ToolPrices(pub.mcp?.prices ?? []) };
    const a2aPolicy = new A2aPolicy(pub.a2a?.policy, pub.a2a?.prices ?? []);
    return {
      ...base,
      config: { ...config, publication: pub },
      publication: compiled,
      configDigest: await canonicalDigest({ gateway: config.gateway, publication: pub }),
      engine: createEngine({ ...engineDeps, publication: compiled, mcp, oauth, a2a: a2aBase && { ...a2aBase, policy: a2aPolicy, router: new A2aRouter(pub.a2a?.routes ?? [], affinity) } }),
      a2aPolicy,
      oauth,
      publications,
    };
  };
  const publications: PublicationCache<GatewayRuntime> = new PublicationCache(publicationController, view, {
    clock,
    ttlMs: gw.traffic.publicationCacheTtlMs,
    onRefreshFailure: (err) => logError({ kind: "publication_refresh_failed", error: String(err) }),
  });
  return publications;
}

/** A secret's value by its configured name; undefined when unnamed, unset or empty. */
function secretOf(secrets: Record<string, unknown>, name: string | undefined): string | undefined {
  const t = name === undefined ? undefined : secrets[name];
  return typeof t === "string" && t !== "" ? t : undefined;
}

/** The ledgers' clients: the tenants' budget ledgers (through this isolate's leases and batches), call budgets, task bindings. */
function ledgerClients(env: Env, stripes: ReadonlyMap<string, number>, clock: Clock) {
  const ledgerObject = (name: string) => env.BUDGET_LEDGER.getByName(name);
  const stripesOf = (root: string) => stripes.get(root) ?? 1;
  const ledger = new LeasingLedgerClient(budgetLedgerClient(ledgerObject, { stripes: stripesOf }), ledgerObject, {
    clock,
    scheduler: systemScheduler,
    newId: () => crypto.randomUUID(),
    stripes: stripesOf,
    log: logError,
  });
  return {
    ledger,
    callBudgets: attemptBudgetClient((key) => env.ATTEMPT_BUDGET.getByName(key)),
    tasks: taskBindingClient((name) => env.TASK_BINDING.getByName(name)),
  };
}

/** The isolate's cached views of the backends' circuit breakers and health monitors (each undefined when disabled). */
function backendViews(env: Env, gw: GatewayConfig, clock: Clock): { readonly breakers: BreakerCache | undefined; readonly health: HealthCache | undefined } {
  const b = gw.breaker;
  const breakers = b.enabled
    ? new BreakerCache(
        breakerClient((id) => env.CIRCUIT_BREAKER.getByName(id), {
          windowMs: b.windowMs,
          minSamples: b.minSamples,
          failureRatio: b.failureRatio,
          openMs: b.openMs,
          halfOpenProbes: b.halfOpenProbes,
          halfOpenSuccesses: b.halfOpenSuccesses,
        }),
        clock,
        { ttlMs: b.cacheTtlMs, onError: (err, backendId, operation) => logError({ kind: "breaker_error", backendId, operation, error: String(err) }) },
      )
    : undefined;
  const health = gw.health.enabled
    ? new HealthCache(healthClient((id) => env.HEALTH_MONITOR.getByName(id)), clock, {
        ttlMs: gw.health.cacheTtlMs,
        onError: (err) => logError({ kind: "health_error", error: String(err) }),
      })
    : undefined;
  return { breakers, health };
}

/** The isolate state metrics read at scrape time. */
interface MetricSources {
  readonly controller: SnapshotControllerClient;
  readonly ledger: LeasingLedgerClient;
  readonly breakers: BreakerCache | undefined;
  readonly health: HealthCache | undefined;
  readonly drain: DrainController;
  readonly admission: AdmissionController;
  readonly tokens: TokenCache;
  /** The isolate's publication views (built after the metrics that read them). */
  readonly publications: () => PublicationCache<GatewayRuntime> | undefined;
}

/** The label values a publication revision names (MCP and A2A requests are named by their endpoint, `mcp/<server>` or `a2a/<agent>`, and their method as the route). */
function metricNamesOf(publication: CompiledPublication, gw: GatewayConfig): PublicationNames {
  return {
    entrypoints: [...publication.source.entrypoints.map((e) => e.name), "mcp", ...gw.mcp.servers.map((m) => `mcp/${m.name}`), ...(gw.a2a.agents.length > 0 ? ["a2a"] : []), ...gw.a2a.agents.map((a) => `a2a/${a.name}`)],
    models: [...publication.models.keys()],
    routes: ["default", ...publication.source.entrypoints.flatMap((e) => e.routes.map((r) => r.name)), "server/discover", "ping", "tools/list", "tools/call", ...SPOKEN_GENERATIONS.flatMap((g) => Object.keys(A2A_METHODS[g]))],
    tenants: publication.source.tenants.map((t) => t.id),
  };
}

/** The snapshot cache, the metrics over the isolate's state (labels from configuration only), and the OTLP exporter when configured. */
function telemetryOf(config: IsolateConfig, secrets: Record<string, unknown>, clock: Clock, src: MetricSources) {
  const gw = config.gateway;
  const publication = config.compiled;
  let metrics: GatewayMetrics | undefined;
  // Backend ids are digests; metrics name backends as the snapshot the isolate serves does.
  const byBackendName = <T>(states: readonly [string, T][]): [string, T][] => {
    const names = snapshots.peek()?.backends;
    return names ? states.flatMap(([id, v]) => { const b = names.get(id); return b ? [[b.name, v] as [string, T]] : []; }) : [];
  };
  const snapshots = new SnapshotCache(() => src.controller.getActive(), clock, gw.traffic.snapshotCacheTtlMs, (err) => {
    metrics?.snapshotRefreshFailed();
    logError({ kind: "snapshot_refresh_failed", error: String(err) });
  });
  metrics = new GatewayMetrics(
    {
      ...metricNamesOf(publication, gw),
      tenantLabel: gw.observability.metrics.tenantLabel,
      maxSnapshotNames: gw.observability.metrics.maxSnapshotNames,
      agents: gw.a2a.agents.map((a) => a.name),
    },
    {
      inFlight: () => src.drain.inFlight,
      draining: () => src.drain.draining,
      admission: () => {
        const a = src.admission.stats();
        const t = src.admission.totals();
        return { inFlight: a.inFlight.global, queued: a.queued.total, admitted: t.admitted, waited: t.queued, refused: t.refused };
      },
      snapshotRevision: () => snapshots.peek()?.revision,
      ledger: () => {
        const l = src.ledger.stats();
        return { leases: l.leases, attemptsOpen: l.inFlight, settlementsQueued: l.queued };
      },
      breakers: () => byBackendName(src.breakers?.cachedStates() ?? []),
      health: () => byBackendName(src.health?.cachedStatuses() ?? []),
      credentialMints: () => src.tokens.stats(),
      publicationRevisions: () => ({ stable: src.publications()?.peek()?.revision, canary: src.publications()?.peekCanary()?.revision }),
      canaryRevision: () => src.publications()?.peekCanary()?.value.publication.revision,
    },
  );
  const done = metrics;
  const otlp = gw.observability.otlp;
  const exporter = otlp
    ? new OtlpExporter(
        { ...otlp, headers: otlpHeaders(otlp.headersSecret === undefined ? undefined : secrets[otlp.headersSecret]) },
        {
          resource: { serviceName: "sluice", serviceVersion: SLUICE_VERSION },
          clock,
          scheduler: systemScheduler,
          fetch: (input, init) => fetch(input, init),
          registry: done.registry,
          onDrop: (signal, n) => done.dropped(signal, n),
          onError: logError,
        },
      )
    : undefined;
  return { snapshots, metrics: done, exporter };
}

/**
 * The secret values the isolate holds: those gateway.yaml names and those the backends of the
 * snapshot it last pinned name, worked out once per snapshot (read only when a provider header
 * would be passed to a client).
 */
function heldSecretsOf(gw: GatewayConfig, secrets: Record<string, unknown>, snapshots: SnapshotCache): () => readonly string[] {
  const read = (name: string) => (typeof secrets[name] === "string" ? (secrets[name] as string) : undefined);
  const bySnapshot = new WeakMap<PinnedSnapshot, readonly string[]>();
  let withoutSnapshot: readonly string[] | undefined;
  return () => {
    const snapshot = snapshots.peek();
    if (snapshot === undefined) return (withoutSnapshot ??= heldSecretValues([gw], read));
    let held = bySnapshot.get(snapshot);
    if (!held) bySnapshot.set(snapshot, (held = heldSecretValues([gw, ...snapshot.backends.values()], read)));
    return held;
  };
}

/**
 * The invoke phase's executor: backends reached through the egress guard, credentials read per
 * attempt, and binding-protocol backends (Workers AI) through the Worker's own bindings by name.
 */
function invokerOf(gw: GatewayConfig, secrets: Record<string, unknown>, clock: Clock, tokens: TokenCache, credentialWatch: CredentialWatch, load: LoadTracker, heldSecrets: () => readonly string[]): GatewayExecutor {
  return new GatewayExecutor({
    codecs: builtinCodecs,
    credentials: { get: (name) => (typeof secrets[name] === "string" ? (secrets[name] as string) : undefined) },
    load,
    clock,
    rng: systemRng,
    fetch: (input, init) => fetch(input, init),
    firstByteTimeoutMs: gw.traffic.firstByteTimeoutMs,
    // Snapshots stored before the guard existed are checked again at each attempt.
    egress: gw.security.egress,
    preconnect: tcpPreconnect,
    tokens,
    credentialWatch,
    bindings: (name) => {
      const binding = secrets[name];
      return isWorkersAiBinding(binding) ? binding : undefined;
    },
    tlsFetchers: fetcherBindings(secrets),
    heldSecrets,
  });
}

/** The access-token link of the authenticator chain (`auth.oauth`), shared by every endpoint (views of later revisions take their tenants with `withTenants`); undefined: API keys only. */
function oauthOf(gw: GatewayConfig, pub: PublicationConfig, clock: Clock): OAuthVerifier | undefined {
  return gw.auth.oauth
    ? new OAuthVerifier(gw.auth.oauth, {
        tenants: chargeTargetsOf(pub),
        egress: gw.security.egress,
        fetch: (input, init) => fetch(input, init),
        clock,
        onError: logError,
      })
    : undefined;
}

/**
 * The isolate's MCP parts: the servers (the gateway's client of each, or its own REST server),
 * sessions, relays and approvals. The policy and prices come with each publication revision.
 */
async function mcpOf(env: Env, config: IsolateConfig, secrets: Record<string, unknown>): Promise<Omit<McpDeps, "policy" | "prices">> {
  const gw = config.gateway;
  return {
    servers: new Map(gw.mcp.servers.map((srv) => [srv.name, mcpServerHandle(srv, secrets, gw.security.egress)] as const)),
    serverInfo: { name: "sluice", version: SLUICE_VERSION },
    relays: new ClientRelays(),
    inFlight: new InFlightRequests(),
    sessions: await mcpSessions(gw.mcp.sessions, secrets),
    approvals: await approvalDeps(gw.governance.approvals, secrets, (tenant) => env.APPROVAL_DESK.getByName(tenant)),
  };
}

/**
 * The isolate's A2A parts: the agents' cards, each agent's credential header (read per call, so a
 * rotated secret applies at once) and the network agents are reached on. Undefined: no agents.
 */
async function a2aOf(gw: GatewayConfig, secrets: Record<string, unknown>, cards: AgentCardCache, health: AgentHealth, approvals: ApprovalDeps | undefined): Promise<Omit<A2aDeps, "policy" | "router"> | undefined> {
  if (gw.a2a.agents.length === 0) return undefined;
  const credentials = new Map(gw.a2a.agents.map((a) => [a.name, a.credential] as const));
  // The config requires the secret's name with any agent; its value must be set too.
  const stateSecret = secretOf(secrets, gw.a2a.stateSecret);
  if (stateSecret === undefined) throw new RangeError(`secret ${gw.a2a.stateSecret} (a2a.stateSecret) is not set`);
  return {
    cards,
    ids: await A2aIdBinding.fromSecret(stateSecret),
    push: await pushRelayOf(gw, stateSecret),
    approvals,
    isHealthy: (agent, schedule) => health.forRequest(schedule).isHealthy(agent),
    credential: (agent): Record<string, string> => {
      const c = credentials.get(agent);
      const secret = c ? secrets[c.secret] : undefined;
      if (!c || typeof secret !== "string" || secret === "") return {};
      return credentialHeader(c.scheme, secret);
    },
    network: { fetch: (input, init) => fetch(input, init), egress: gw.security.egress },
  };
}

/** The push relay, or undefined when `a2a.push` is absent: push configs are then refused and no card claims push notifications. */
async function pushRelayOf(gw: GatewayConfig, stateSecret: string): Promise<PushRelayDeps | undefined> {
  const conf = gw.a2a.push;
  if (!conf) return undefined;
  return { sealer: await PushRelaySealer.fromSecret(stateSecret), egress: gw.security.egress, allowOrigins: conf.allowOrigins };
}

/** One configured MCP server: served by the gateway itself from a REST API, or reached through the gateway's MCP client. */
function mcpServerHandle(srv: GatewayConfig["mcp"]["servers"][number], secrets: Record<string, unknown>, egress: GatewayConfig["security"]["egress"]): McpServerHandle {
  if (srv.rest !== undefined) {
    // Served by the gateway itself from the API at `url`; its credential is read per call.
    const rest = new RestServer({ baseUrl: srv.url, credential: srv.credential, rest: srv.rest, secret: (n) => (typeof secrets[n] === "string" ? (secrets[n] as string) : undefined), egress, fetch: (input, init) => fetch(input, init) });
    return { name: srv.name, listFailure: srv.listFailure, request: (method, params, opts) => rest.request(method, params, opts) };
  }
  const secret = srv.credential ? secrets[srv.credential.secret] : undefined;
  const headers: Record<string, string> = srv.credential && typeof secret === "string" && secret !== "" ? credentialHeader(srv.credential.scheme, secret) : {};
  const upstream = new McpUpstream({
    url: srv.url,
    era: srv.era,
    headers,
    fetch: (input, init) => fetch(input, init),
    clientInfo: { name: "sluice", version: SLUICE_VERSION },
    ...(srv.connectCheck ? { preconnect: tcpPreconnect } : {}),
  });
  return { name: srv.name, listFailure: srv.listFailure, era: srv.era, healthProbe: mcpProbeTarget(srv), request: (method, params, opts) => upstream.request(method, params, opts), listen: (filter, opts) => upstream.listen(filter, opts) };
}

/** Sealed stateful-era sessions, when secrets are named and set; undefined (logged) otherwise. */
async function mcpSessions(conf: GatewayConfig["mcp"]["sessions"], secrets: Record<string, unknown>): Promise<McpDeps["sessions"]> {
  if (!conf) return undefined;
  const values = conf.secrets.map((n) => secrets[n]).filter((v): v is string => typeof v === "string" && v !== "");
  try {
    return { sealer: await SessionSealer.fromSecrets(values), ttlMs: conf.ttlMs };
  } catch (err) {
    // Stateful-era clients are then refused as unsupported; everything else keeps serving.
    logError({ kind: "mcp_sessions_disabled", error: String(err) });
    return undefined;
  }
}

/**
 * The approvals' dependencies, or undefined when `governance.approvals` is absent or its state
 * secret is missing or too short (logged): a call whose rule requires approval is then refused.
 */
async function approvalDeps(conf: GatewayConfig["governance"]["approvals"], secrets: Record<string, unknown>, desk: (tenant: string) => ApprovalDeskRpc): Promise<ApprovalDeps | undefined> {
  if (!conf) return undefined;
  const secret = secrets[conf.stateSecret];
  try {
    if (typeof secret !== "string") throw new RangeError(`secret ${conf.stateSecret} is not set`);
    const sealer = await RequestStateSealer.fromSecret(secret);
    const tasks = await TaskHandleSealer.fromSecret(secret);
    const agentTasks = await AgentTaskHandleSealer.fromSecret(secret);
    const base = conf.publicUrl?.replace(/\/+$/, "");
    return { desk, sealer, tasks, agentTasks, ttlMs: conf.ttlMs, statusUrl: (id, origin) => `${base ?? origin ?? ""}/approvals/${id}` };
  } catch (err) {
    logError({ kind: "approvals_disabled", error: String(err) });
    return undefined;
  }
}
