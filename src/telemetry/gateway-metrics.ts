import type { AttemptOutcome, AttemptRecord, EvidenceClass } from "../context/attempt-record.ts";
import type { RequestRecord } from "../context/request-record.ts";
import { ERROR_CODES } from "../errors/gateway-error.ts";
import { A2A_METHODS } from "../protocol/a2a/a2a-request.ts";
import { SPOKEN_GENERATIONS } from "../protocol/a2a/agent-card.ts";
import { PROTOCOL_IDS } from "../protocol/codec.ts";
import { ConfiguredNames, firstDistinct, MetricRegistry, oneOf, type Counter, type Histogram, type LabelDomain, type LabelSpec } from "./metric-registry.ts";
import type { FinishedRequestReader } from "./request-assembly.ts";
import { BUCKETS, GATEWAY_PROVIDER, OPERATION_CHAT, providerName } from "./semconv.ts";

/** What the configuration allows as label values. Nothing here comes from a caller. */
export interface MetricDomains {
  readonly entrypoints: readonly string[];
  readonly models: readonly string[];
  /** Decision rule names (`default` included). */
  readonly routes: readonly string[];
  readonly tenants: readonly string[];
  /** Tenant as a label: off unless configured, then the first `maxTenants` seen, the rest `other`. */
  readonly tenantLabel: { readonly enabled: boolean; readonly maxTenants: number };
  /**
   * Backend, pool and upstream model names come from BackendSnapshots, which the admin API may
   * replace at any time: the first this many distinct names are kept per label, the rest fold.
   */
  readonly maxSnapshotNames: number;
  /** The A2A agents' names (gateway.yaml `a2a.agents`); absent: none. */
  readonly agents?: readonly string[] | undefined;
}

/** The names a publication revision gives the labels it owns. */
export type PublicationNames = Pick<MetricDomains, "entrypoints" | "models" | "routes" | "tenants">;

/** Names one label may hold in all, across every revision an isolate serves. */
const MAX_CONFIGURED_NAMES = 512;

/** What the isolate holds now, read at each scrape. */
export interface GaugeSources {
  readonly inFlight: () => number;
  readonly draining: () => boolean;
  readonly admission: () => { readonly inFlight: number; readonly queued: number; readonly admitted: number; readonly waited: number; readonly refused: Readonly<Record<string, number>> };
  readonly snapshotRevision: () => number | undefined;
  readonly ledger: () => { readonly leases: number; readonly attemptsOpen: number; readonly settlementsQueued: number };
  /** Breaker states this isolate has cached, by backend name. */
  readonly breakers: () => readonly (readonly [string, "closed" | "open" | "half_open"])[];
  /** Health statuses this isolate has cached, by backend name. */
  readonly health: () => readonly (readonly [string, "unknown" | "healthy" | "unhealthy"])[];
  /** Provider access tokens (Entra ID, Google) this isolate minted, and mints that failed. */
  readonly credentialMints?: (() => { readonly minted: number; readonly failed: number }) | undefined;
  /** The publication revisions this isolate serves: the stable one and the running canary's (undefined when none). */
  readonly publicationRevisions?: (() => { readonly stable: number | undefined; readonly canary: number | undefined }) | undefined;
  /** The running canary's `label@N` as requests record it; undefined when none runs. */
  readonly canaryRevision?: (() => string | undefined) | undefined;
}

/** A request's publication population: the canary's revision, or the stable one. A bounded label, never a revision number. */
const PUBLICATION_ROLES = ["stable", "canary"] as const;

const ATTEMPT_OUTCOMES: readonly AttemptOutcome[] = ["gateway_error", "success", "upstream_status", "connect_failed", "network_error", "timeout", "client_cancelled", "stream_cut", "protocol_error"];
const EVIDENCE: readonly (EvidenceClass | "none")[] = ["known_zero", "unknown", "client_error", "success", "none"];
const TOKEN_KINDS = ["input", "output", "cached_input", "cache_write_input", "reasoning"] as const;

/**
 * Every instrument of the gateway, fed from finished requests and their attempts (the logging
 * phase) and from gauges read at scrape time. Label names and meanings: docs/observability.md.
 */
export class GatewayMetrics implements FinishedRequestReader {
  readonly registry: MetricRegistry;
  readonly #requests: Counter;
  readonly #serverDuration: Histogram;
  readonly #overhead: Histogram;
  readonly #ttft: Histogram;
  readonly #tpot: Histogram;
  readonly #clientDuration: Histogram;
  readonly #tokenUsage: Histogram;
  readonly #tokens: Counter;
  readonly #attempts: Counter;
  readonly #retries: Counter;
  readonly #fallbacks: Counter;
  readonly #unknownUsage: Counter;
  readonly #cacheLookups: Counter;
  readonly #snapshotChanges: Counter;
  readonly #snapshotRefreshFailures: Counter;
  readonly #spansDropped: Counter;
  readonly #settlements: Counter;
  readonly #mcpDuration: Histogram;
  readonly #a2aDuration: Histogram;
  readonly #overruns: Counter;
  readonly #cost: Counter;
  readonly #looperSteps: Counter;
  readonly #looperEscalations: Counter;
  readonly #canaryRevision: () => string | undefined;
  readonly #tenantLabel: boolean;

  readonly #names: Readonly<Record<keyof PublicationNames, ConfiguredNames>>;

  // Instruments are registered family by family, in the order they are exposed.
  constructor(d: MetricDomains, gauges: GaugeSources, registry = new MetricRegistry()) {
    this.registry = registry;
    this.#canaryRevision = gauges.canaryRevision ?? (() => undefined);
    this.#tenantLabel = d.tenantLabel.enabled;
    this.#names = {
      entrypoints: new ConfiguredNames(d.entrypoints, MAX_CONFIGURED_NAMES),
      models: new ConfiguredNames(d.models, MAX_CONFIGURED_NAMES),
      routes: new ConfiguredNames(d.routes, MAX_CONFIGURED_NAMES),
      tenants: new ConfiguredNames(d.tenants, MAX_CONFIGURED_NAMES),
    };
    const l = sharedLabels(d, this.#names);
    const request = requestInstruments(registry, l);
    this.#requests = request.requests;
    this.#serverDuration = request.serverDuration;
    this.#overhead = request.overhead;
    this.#ttft = request.ttft;
    this.#tpot = request.tpot;
    const attempt = attemptInstruments(registry, l);
    this.#clientDuration = attempt.clientDuration;
    this.#tokenUsage = attempt.tokenUsage;
    this.#tokens = attempt.tokens;
    this.#attempts = attempt.attempts;
    this.#retries = attempt.retries;
    this.#fallbacks = attempt.fallbacks;
    this.#unknownUsage = attempt.unknownUsage;
    const looper = looperInstruments(registry, l);
    this.#looperSteps = looper.steps;
    this.#looperEscalations = looper.escalations;
    this.#cacheLookups = registry.counter({
      name: "sluice.cache.lookups",
      promName: "sluice_cache_lookups_total",
      unit: "{request}",
      help: "Requests a response cache plugin ran for, by entrypoint and outcome: hit_exact and hit_semantic (answered with no provider attempt), miss, skipped (not looked up).",
      labels: [L("sluice.entrypoint", l.entrypoint), L("sluice.cache.outcome", oneOf(["hit_exact", "hit_semantic", "miss", "skipped"]))],
    });
    const ops = operationsInstruments(registry);
    this.#snapshotChanges = ops.snapshotChanges;
    this.#snapshotRefreshFailures = ops.snapshotRefreshFailures;
    this.#spansDropped = ops.spansDropped;
    this.#mcpDuration = mcpInstrument(registry, d);
    this.#a2aDuration = a2aInstrument(registry, d);
    const ledger = ledgerInstruments(registry, l);
    this.#settlements = ledger.settlements;
    this.#overruns = ledger.overruns;
    this.#cost = ledger.cost;
    registerIsolateGauges(registry, gauges);
    registerBackendStateGauges(registry, gauges, l.backend);
    registerAdmissionTotals(registry, gauges);
    registerCredentialMints(registry, gauges);
    registerPublicationGauge(registry, gauges);
  }

  /** Records one finished request and its attempts. */
  /**
   * A publication revision this isolate now serves: its entrypoint, model, route and tenant names
   * become label values (names it adds were `other` before). Names are only ever added, up to a
   * cap per label, so series of an older revision keep their labels.
   */
  admitPublication(names: PublicationNames): void {
    for (const k of ["entrypoints", "models", "routes", "tenants"] as const) this.#names[k].admit(names[k]);
  }

  finished(r: Readonly<RequestRecord>, attempts: readonly Readonly<AttemptRecord>[]): void {
    // An explain is not a request of its entrypoint; the embeddings it made are counted as theirs.
    if (r.explain === true && r.parentRequestId === undefined) return;
    const endedAt = r.endedAt ?? r.receivedAt;
    const entrypoint = r.entrypoint ?? "";
    const error = r.errorCode ?? "";
    // The canary's population is the requests that ran under its revision (told apart at the end, as the rest of the record).
    const canary = this.#canaryRevision();
    const publication = canary !== undefined && r.publicationRevision === canary ? "canary" : "stable";
    const byTenant = this.#tenantLabel ? [r.tenant ?? ""] : [];
    this.#requests.add([entrypoint, r.protocol ?? "", r.outcome ?? "error", error, r.route ?? "", ...byTenant, publication]);
    const looper = r.looper;
    if (looper) {
      for (const c of looper.calls) this.#looperSteps.add([entrypoint, looper.algorithm, c.role]);
      // A cascade escalated each time a candidate fell short and the next tier was asked.
      const escalations = Math.max(0, looper.calls.filter((c) => c.role === "candidate").length - 1);
      if (escalations > 0) this.#looperEscalations.add([entrypoint, looper.algorithm], escalations);
    }
    for (const p of r.plugins) {
      if (p.action === "cache_hit") this.#cacheLookups.add([entrypoint, p.detail === "semantic" ? "hit_semantic" : "hit_exact"]);
      else if (p.action === "cache_miss") this.#cacheLookups.add([entrypoint, "miss"]);
      else if (p.action === "cache_skipped") this.#cacheLookups.add([entrypoint, "skipped"]);
    }
    const mcp = r.mcp;
    // Tool names come from upstream lists and callers: only a call the policy let through counts its tool.
    if (mcp) this.#mcpDuration.observe([mcp.method, mcp.server ?? "", mcp.decision?.allowed ? (mcp.target ?? "") : "", error || (mcp.toolError ? "tool_error" : "")], (endedAt - r.receivedAt) / 1000);
    const a2a = r.a2a;
    // Skill names come from agents' cards and callers: only a call the policy let through counts its skill.
    if (a2a) this.#a2aDuration.observe([a2a.method, a2a.agent, a2a.decision?.allowed ? (a2a.skill ?? "*") : "", error], (endedAt - r.receivedAt) / 1000);
    const sent = attempts.filter((a) => a.outcome !== "not_sent");
    const last = sent.at(-1);
    const responseModel = last?.logicalModel ?? "";
    const server = [OPERATION_CHAT, GATEWAY_PROVIDER, entrypoint, responseModel];
    const stream = r.stream === true ? "true" : "false";
    if (r.entrypoint !== undefined) this.#serverDuration.observe([...server, error, stream, publication], (endedAt - r.receivedAt) / 1000);
    // A sub-request's own time is inside its parent's: only the caller's requests are observed.
    if (r.parentRequestId === undefined) {
      const kind = r.mcp ? "mcp" : r.a2a ? "a2a" : "model";
      const total = endedAt - r.receivedAt;
      this.#overhead.observe([kind, entrypoint, stream, r.outcome ?? "error", publication], Math.max(0, total - Math.min(total, r.upstreamMs ?? 0)) / 1000);
    }
    if (r.outcome === "success" && last?.firstContentAt !== undefined) {
      this.#ttft.observe([...server, stream], (last.firstContentAt - r.receivedAt) / 1000);
      const out = last.usage?.outputTokens;
      if (r.stream === true && out !== undefined && out > 1 && last.endedAt !== undefined) this.#tpot.observe(server, (last.endedAt - last.firstContentAt) / 1000 / (out - 1));
    }
    let previous: string | undefined;
    for (const a of sent) {
      const provider = providerName(a.backendProtocol);
      const client = [OPERATION_CHAT, provider, a.upstreamModel, a.backendName];
      if (a.endedAt !== undefined) this.#clientDuration.observe([...client, a.errorCode ?? ""], (a.endedAt - a.startedAt) / 1000);
      this.#attempts.add([a.backendName, a.pool, a.logicalModel, a.outcome, a.evidence?.class ?? "none"]);
      if (a.usage) {
        this.#tokenUsage.observe([...client, "input"], a.usage.inputTokens);
        this.#tokenUsage.observe([...client, "output"], a.usage.outputTokens);
        this.#tokens.add([a.logicalModel, "input", publication], a.usage.inputTokens);
        this.#tokens.add([a.logicalModel, "output", publication], a.usage.outputTokens);
        this.#tokens.add([a.logicalModel, "cached_input", publication], a.usage.cachedInputTokens ?? 0);
        this.#tokens.add([a.logicalModel, "cache_write_input", publication], a.usage.cacheWriteInputTokens ?? 0);
        this.#tokens.add([a.logicalModel, "reasoning", publication], a.usage.reasoningTokens ?? 0);
      } else if (!a.unbilled && (a.evidence?.class === "unknown" || a.evidence?.class === "success")) {
        // The backend may have done (and billed) the work: the ledger holds it for reconciliation.
        this.#unknownUsage.add([a.backendName, a.logicalModel]);
      }
      if (previous !== undefined) (previous === a.logicalModel ? this.#retries : this.#fallbacks).add([entrypoint]);
      previous = a.logicalModel;
    }
  }

  /** How one budgeted attempt's settlement ended. */
  settlement(o: { readonly result: "settled" | "released" | "pending_reconciliation" | "refused" | "failed"; readonly model: string; readonly costMicros?: number | undefined; readonly currency?: string | undefined; readonly overrun: boolean }): void {
    this.#settlements.add([o.result, o.model]);
    if (o.overrun) this.#overruns.add([o.model]);
    if (o.costMicros !== undefined && o.costMicros > 0) this.#cost.add([o.currency ?? "", o.model], o.costMicros);
  }

  /** A snapshot proposal or rollback the admin API handled. */
  snapshotChange(result: "activated" | "unchanged" | "rejected" | "rolled_back"): void {
    this.#snapshotChanges.add([result]);
  }

  /** The snapshot controller could not be read; the last known snapshot keeps serving. */
  snapshotRefreshFailed(): void {
    this.#snapshotRefreshFailures.add([]);
  }

  /** Spans or a metric export the exporter had to drop. */
  dropped(signal: "spans" | "metrics", n: number): void {
    this.#spansDropped.add([signal], n);
  }
}

/** The label domains instruments share: a stateful domain is one object, so every instrument with that label folds the same names. */
interface SharedLabels {
  readonly entrypoint: LabelDomain;
  readonly model: LabelDomain;
  readonly route: LabelDomain;
  readonly protocol: LabelDomain;
  readonly errorType: LabelDomain;
  readonly backend: LabelDomain;
  readonly pool: LabelDomain;
  readonly upstreamModel: LabelDomain;
  readonly provider: LabelDomain;
  readonly op: LabelDomain;
  /** Undefined when the tenant is not a label (`observability.metrics.tenantLabel.enabled` false). */
  readonly tenant: LabelDomain | undefined;
  readonly publication: LabelDomain;
}

/** The domains of the labels several instruments use, made once per registry so they fold alike. */
function sharedLabels(d: MetricDomains, names: Readonly<Record<keyof PublicationNames, ConfiguredNames>>): SharedLabels {
  return {
    entrypoint: names.entrypoints.domain,
    model: names.models.domain,
    route: names.routes.domain,
    protocol: oneOf(PROTOCOL_IDS),
    errorType: oneOf(["", ...ERROR_CODES]),
    backend: firstDistinct(d.maxSnapshotNames),
    pool: firstDistinct(d.maxSnapshotNames),
    upstreamModel: firstDistinct(d.maxSnapshotNames),
    provider: oneOf(["openai", "anthropic", "_OTHER", GATEWAY_PROVIDER]),
    op: oneOf([OPERATION_CHAT]),
    tenant: d.tenantLabel.enabled ? firstDistinct(d.tenantLabel.maxTenants, names.tenants.domain) : undefined,
    publication: oneOf(PUBLICATION_ROLES),
  };
}

/** One label of an instrument spec; short because the specs list many. */
function L(key: string, domain: LabelDomain): LabelSpec {
  return { key, domain };
}

/** Requests as the client saw them: counted by outcome, timed to the last byte and to the first token. */
function requestInstruments(registry: MetricRegistry, l: SharedLabels): { requests: Counter; serverDuration: Histogram; overhead: Histogram; ttft: Histogram; tpot: Histogram } {
  const { entrypoint, protocol, errorType, route, tenant, op, provider, model, publication } = l;
  const requests = registry.counter({
    name: "sluice.requests",
    promName: "sluice_requests_total",
    unit: "{request}",
    help: "Requests finished, by entrypoint, client protocol, outcome (success, error, cancelled), error code and publication population (stable or canary).",
    // Without the tenant label the series carry no tenant at all, not one `other` on every series.
    labels: [
      L("sluice.entrypoint", entrypoint),
      L("sluice.protocol", protocol),
      L("sluice.outcome", oneOf(["success", "error", "cancelled"])),
      L("error.type", errorType),
      L("sluice.route", route),
      ...(tenant !== undefined ? [L("sluice.tenant", tenant)] : []),
      L("sluice.publication", publication),
    ],
  });
  const serverLabels = [L("gen_ai.operation.name", op), L("gen_ai.provider.name", provider), L("gen_ai.request.model", entrypoint), L("gen_ai.response.model", model)];
  const serverDuration = registry.histogram({
    name: "gen_ai.server.request.duration",
    promName: "gen_ai_server_request_duration_seconds",
    unit: "s",
    help: "Request duration as the client saw it: from receipt to the last byte of the answer (streams included).",
    labels: [...serverLabels, L("error.type", errorType), L("sluice.stream", oneOf(["true", "false"])), L("sluice.publication", publication)],
    bounds: BUCKETS.duration,
  });
  const overhead = registry.histogram({
    name: "sluice.gateway.overhead",
    promName: "sluice_gateway_overhead_seconds",
    unit: "s",
    help: "The gateway's own time per request: from receipt to the end of the answer (streams included), less the time waiting for providers, MCP servers or agents.",
    labels: [L("sluice.kind", oneOf(["model", "mcp", "a2a"])), L("sluice.entrypoint", entrypoint), L("sluice.stream", oneOf(["true", "false"])), L("sluice.outcome", oneOf(["success", "error", "cancelled"])), L("sluice.publication", publication)],
    bounds: BUCKETS.overhead,
  });
  const ttft = registry.histogram({
    name: "gen_ai.server.time_to_first_token",
    promName: "gen_ai_server_time_to_first_token_seconds",
    unit: "s",
    help: "From receipt of the request to the first content the model produced (a text, reasoning or tool-call delta; not the first byte), successful requests.",
    labels: [...serverLabels, L("sluice.stream", oneOf(["true", "false"]))],
    bounds: BUCKETS.timeToFirstToken,
  });
  const tpot = registry.histogram({
    name: "gen_ai.server.time_per_output_token",
    promName: "gen_ai_server_time_per_output_token_seconds",
    unit: "s",
    help: "After the first token, time per further output token of successful streamed requests with reported usage.",
    labels: serverLabels,
    bounds: BUCKETS.timePerOutputToken,
  });
  return { requests, serverDuration, overhead, ttft, tpot };
}

/** Attempts at providers: their duration, reported tokens, outcomes, and what retries and fallbacks cost. */
function attemptInstruments(
  registry: MetricRegistry,
  l: SharedLabels,
): { clientDuration: Histogram; tokenUsage: Histogram; tokens: Counter; attempts: Counter; retries: Counter; fallbacks: Counter; unknownUsage: Counter } {
  const { entrypoint, errorType, backend, pool, upstreamModel, provider, op, model, publication } = l;
  const clientLabels = [L("gen_ai.operation.name", op), L("gen_ai.provider.name", provider), L("gen_ai.request.model", upstreamModel), L("sluice.backend", backend)];
  const clientDuration = registry.histogram({
    name: "gen_ai.client.operation.duration",
    promName: "gen_ai_client_operation_duration_seconds",
    unit: "s",
    help: "One attempt at a provider: from sending it to its end.",
    labels: [...clientLabels, L("error.type", errorType)],
    bounds: BUCKETS.duration,
  });
  const tokenUsage = registry.histogram({
    name: "gen_ai.client.token.usage",
    promName: "gen_ai_client_token_usage",
    unit: "{token}",
    help: "Tokens per attempt as the provider reported them (attempts without reported usage are not recorded).",
    labels: [...clientLabels, L("gen_ai.token.type", oneOf(["input", "output"]))],
    bounds: BUCKETS.tokens,
  });
  const tokens = registry.counter({
    name: "sluice.tokens",
    promName: "sluice_tokens_total",
    unit: "{token}",
    help: "Tokens the providers reported, by logical model, kind and publication population; cached_input, cache_write_input and reasoning are parts of input and output.",
    labels: [L("sluice.model", model), L("sluice.token.kind", oneOf(TOKEN_KINDS)), L("sluice.publication", publication)],
  });
  const attempts = registry.counter({
    name: "sluice.attempts",
    promName: "sluice_attempts_total",
    unit: "{attempt}",
    help: "Attempts sent to a backend, by backend, pool, logical model, outcome and evidence class (a backend selection is an attempt).",
    labels: [L("sluice.backend", backend), L("sluice.pool", pool), L("sluice.model", model), L("sluice.attempt.outcome", oneOf(ATTEMPT_OUTCOMES)), L("sluice.evidence", oneOf(EVIDENCE))],
  });
  const retries = registry.counter({
    name: "sluice.retries",
    promName: "sluice_retries_total",
    unit: "{attempt}",
    help: "Attempts after the first of a request on the same logical model.",
    labels: [L("sluice.entrypoint", entrypoint)],
  });
  const fallbacks = registry.counter({
    name: "sluice.fallbacks",
    promName: "sluice_fallbacks_total",
    unit: "{attempt}",
    help: "Attempts after the first of a request on another logical model (the next tier).",
    labels: [L("sluice.entrypoint", entrypoint)],
  });
  const unknownUsage = registry.counter({
    name: "sluice.usage.unknown",
    promName: "sluice_usage_unknown_total",
    unit: "{attempt}",
    help: "Attempts that reached a backend and ended without reported usage (their cost waits in reconciliation).",
    labels: [L("sluice.backend", backend), L("sluice.model", model)],
  });
  return { clientDuration, tokenUsage, tokens, attempts, retries, fallbacks, unknownUsage };
}

/** Looper runs: the sub-calls their algorithms made, and a cascade's escalations. */
function looperInstruments(registry: MetricRegistry, l: SharedLabels): { steps: Counter; escalations: Counter } {
  const { entrypoint } = l;
  const algorithm = L("sluice.looper.algorithm", oneOf(["cascade", "panel"]));
  const steps = registry.counter({
    name: "sluice.looper.steps",
    promName: "sluice_looper_steps_total",
    unit: "{call}",
    help: "Sub-calls Looper algorithms made, by role: a cascade's candidate or verifier, a panel's member or arbiter.",
    labels: [L("sluice.entrypoint", entrypoint), algorithm, L("sluice.looper.role", oneOf(["candidate", "verifier", "member", "arbiter"]))],
  });
  const escalations = registry.counter({
    name: "sluice.looper.escalations",
    promName: "sluice_looper_escalations_total",
    unit: "{step}",
    help: "Cascade steps whose answer scored below the threshold, so the next tier was asked.",
    labels: [L("sluice.entrypoint", entrypoint), algorithm],
  });
  return { steps, escalations };
}

/** The gateway's own machinery: snapshot proposals and refreshes, and telemetry it had to drop. */
function operationsInstruments(registry: MetricRegistry): { snapshotChanges: Counter; snapshotRefreshFailures: Counter; spansDropped: Counter } {
  const snapshotChanges = registry.counter({
    name: "sluice.snapshot.proposals",
    promName: "sluice_snapshot_proposals_total",
    unit: "{proposal}",
    help: "Snapshot candidates and rollbacks this isolate's admin API handled, by result.",
    labels: [L("sluice.result", oneOf(["activated", "unchanged", "rejected", "rolled_back"]))],
  });
  const snapshotRefreshFailures = registry.counter({
    name: "sluice.snapshot.refresh_failures",
    promName: "sluice_snapshot_refresh_failures_total",
    unit: "{failure}",
    help: "Times the snapshot controller could not be read and the last known snapshot kept serving.",
    labels: [],
  });
  const spansDropped = registry.counter({
    name: "sluice.telemetry.dropped",
    promName: "sluice_telemetry_dropped_total",
    unit: "{item}",
    help: "Spans and metric exports dropped because the export queue was full or the collector failed.",
    labels: [L("sluice.signal", oneOf(["spans", "metrics"]))],
  });
  return { snapshotChanges, snapshotRefreshFailures, spansDropped };
}

/** MCP requests the gateway served, named by the MCP semantic conventions; their server and tool names fold on their own. */
function mcpInstrument(registry: MetricRegistry, d: MetricDomains): Histogram {
  return registry.histogram({
    name: "mcp.server.operation.duration",
    promName: "mcp_server_operation_duration_seconds",
    unit: "s",
    help: "MCP requests the gateway served, from receipt to answer, by method, server and tool (MCP semantic conventions).",
    labels: [L("mcp.method.name", oneOf(["server/discover", "ping", "tools/list", "tools/call", "initialize", "prompts/list", "prompts/get", "resources/list", "resources/read", "resources/templates/list"])), L("sluice.mcp.server", firstDistinct(d.maxSnapshotNames)), L("gen_ai.tool.name", firstDistinct(d.maxSnapshotNames)), L("error.type", oneOf(["", "tool_error", ...ERROR_CODES]))],
    bounds: BUCKETS.duration,
  });
}

/** A2A calls the gateway served, by method, agent (from gateway.yaml) and skill (folded like snapshot names). */
function a2aInstrument(registry: MetricRegistry, d: MetricDomains): Histogram {
  return registry.histogram({
    name: "sluice.a2a.call.duration",
    promName: "sluice_a2a_call_duration_seconds",
    unit: "s",
    help: "A2A calls the gateway served (POST /a2a/<agent>, and POST /a2a under the agent routed to), from receipt to answer (a stream's end), by method, agent, skill and error.",
    labels: [
      L("sluice.a2a.method", oneOf(SPOKEN_GENERATIONS.flatMap((g) => Object.keys(A2A_METHODS[g])))),
      L("sluice.a2a.agent", oneOf(d.agents ?? [])),
      L("sluice.a2a.skill", firstDistinct(d.maxSnapshotNames)),
      L("error.type", oneOf(["", ...ERROR_CODES])),
    ],
    bounds: BUCKETS.duration,
  });
}

/** Budgeted attempts' settlements as the ledger answered them, and the cost it booked. */
function ledgerInstruments(registry: MetricRegistry, l: SharedLabels): { settlements: Counter; overruns: Counter; cost: Counter } {
  const { model } = l;
  const settlements = registry.counter({
    name: "sluice.ledger.settlements",
    promName: "sluice_ledger_settlements_total",
    unit: "{attempt}",
    help: "Budgeted attempts' settlements as the ledger answered them: settled, released (nothing was done), pending_reconciliation (usage unknown), refused, failed (the hold stays until its lease expires).",
    labels: [L("sluice.result", oneOf(["settled", "released", "pending_reconciliation", "refused", "failed"])), L("sluice.model", model)],
  });
  const overruns = registry.counter({
    name: "sluice.ledger.overruns",
    promName: "sluice_ledger_overruns_total",
    unit: "{attempt}",
    help: "Settlements whose actual cost exceeded the reserved worst case: a price or output cap below the provider's.",
    labels: [L("sluice.model", model)],
  });
  const cost = registry.counter({
    name: "sluice.cost",
    promName: "sluice_cost_total",
    unit: "{currency}",
    help: "Actual cost booked by the ledger for budgeted attempts with reported usage, in units of the currency its sluice_currency label names (USD: dollars).",
    labels: [L("sluice.currency", firstDistinct(8)), L("sluice.model", model)],
    // The ledger books whole micro-units; they are summed as integers and exported in the currency's unit.
    scale: 1_000_000,
  });
  return { settlements, overruns, cost };
}

/** What the isolate holds now, one number each, read at every scrape. */
function registerIsolateGauges(registry: MetricRegistry, gauges: GaugeSources): void {
  const g = (name: string, promName: string, help: string, read: () => number) =>
    registry.gauge({ name, promName, unit: "1", help, labels: [], read: (set) => set([], read()) });
  g("sluice.requests.in_flight", "sluice_requests_in_flight", "Requests this isolate is serving now.", gauges.inFlight);
  g("sluice.drain.state", "sluice_draining", "1 while this isolate drains (admits nothing new), else 0.", () => (gauges.draining() ? 1 : 0));
  g("sluice.admission.in_flight", "sluice_admission_in_flight", "Admission leases held now.", () => gauges.admission().inFlight);
  g("sluice.admission.queue.depth", "sluice_admission_queue_depth", "Requests waiting in the admission queue now.", () => gauges.admission().queued);
  g("sluice.snapshot.revision", "sluice_snapshot_revision", "The BackendSnapshot revision this isolate serves (0 before the first).", () => gauges.snapshotRevision() ?? 0);
  g("sluice.ledger.leases", "sluice_ledger_leases", "Budget lease slices this isolate holds.", () => gauges.ledger().leases);
  g("sluice.ledger.attempts_open", "sluice_ledger_attempts_open", "Attempts admitted from a lease and not settled yet.", () => gauges.ledger().attemptsOpen);
  g("sluice.ledger.settlements_queued", "sluice_ledger_settlements_queued", "Settlements queued for the ledger and not yet written.", () => gauges.ledger().settlementsQueued);
  g("sluice.telemetry.label_folds", "sluice_metric_series_folded", "Label sets folded into `other` because an instrument reached its series cap.", () => registry.folded);
}

/** Each backend's breaker state and health as this isolate last saw them, one-hot so a dashboard can pick the state. */
function registerBackendStateGauges(registry: MetricRegistry, gauges: GaugeSources, backend: LabelDomain): void {
  const BREAKER = ["closed", "open", "half_open"] as const;
  registry.gauge({
    name: "sluice.breaker.state",
    promName: "sluice_breaker_state",
    unit: "1",
    help: "1 for the state of each backend's circuit breaker as this isolate last saw it, 0 for the others.",
    labels: [L("sluice.backend", backend), L("sluice.state", oneOf(BREAKER))],
    read: (set) => {
      for (const [name, state] of gauges.breakers()) for (const s of BREAKER) set([name, s], s === state ? 1 : 0);
    },
  });
  const HEALTH = ["unknown", "healthy", "unhealthy"] as const;
  registry.gauge({
    name: "sluice.backend.health",
    promName: "sluice_backend_health",
    unit: "1",
    help: "1 for each actively probed backend's health as this isolate last saw it, 0 for the others.",
    labels: [L("sluice.backend", backend), L("sluice.health", oneOf(HEALTH))],
    read: (set) => {
      for (const [name, status] of gauges.health()) for (const h of HEALTH) set([name, h], h === status ? 1 : 0);
    },
  });
}

/** Admission totals are the controller's own counts: read from it at each scrape (not counted again here) and exposed as counters. */
function registerAdmissionTotals(registry: MetricRegistry, gauges: GaugeSources): void {
  registry.gauge({
    monotonic: true,
    name: "sluice.admission.decisions",
    promName: "sluice_admission_decisions_total",
    unit: "{request}",
    help: "Since the isolate started: requests admitted, requests that waited in the queue, and refusals by reason.",
    labels: [L("sluice.decision", oneOf(["admitted", "waited", "refused_queue_full", "refused_deadline", "refused_cancelled"]))],
    read: (set) => {
      const a = gauges.admission();
      set(["admitted"], a.admitted);
      set(["waited"], a.waited);
      for (const [reason, n] of Object.entries(a.refused)) set([`refused_${reason}`], n);
    },
  });
}

/**
 * Token mints are the token cache's own counts, read at each scrape. A failed mint sent nothing to
 * the provider (its attempt is known-zero `credential_unavailable`); this says how often.
 */
function registerCredentialMints(registry: MetricRegistry, gauges: GaugeSources): void {
  const read = gauges.credentialMints;
  if (read === undefined) return;
  registry.gauge({
    monotonic: true,
    name: "sluice.credential.mints",
    promName: "sluice_credential_mints_total",
    unit: "{token}",
    help: "Since the isolate started: provider access tokens minted (Entra ID, Google service accounts), and mints that failed.",
    labels: [L("sluice.result", oneOf(["minted", "failed"]))],
    read: (set) => {
      const m = read();
      set(["minted"], m.minted);
      set(["failed"], m.failed);
    },
  });
}

/** The publication revisions the isolate serves, by role: numbers as values, never as labels. */
function registerPublicationGauge(registry: MetricRegistry, gauges: GaugeSources): void {
  const read = gauges.publicationRevisions;
  if (!read) return;
  registry.gauge({
    name: "sluice.publication.revision",
    promName: "sluice_publication_revision",
    unit: "1",
    help: "The publication revision this isolate serves as stable, and the running canary's (0 when none).",
    labels: [L("sluice.publication", oneOf(PUBLICATION_ROLES))],
    read: (set) => {
      const r = read();
      set(["stable"], r.stable ?? 0);
      set(["canary"], r.canary ?? 0);
    },
  });
}
