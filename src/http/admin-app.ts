import { Hono } from "hono";
import { redactedConfig } from "../config/redact.ts";
import { unmetRequirements } from "../snapshot/requirements.ts";
import { bearerOf, tokenMatches } from "./bearer-token.ts";
import { TRAFFIC_SLOTS } from "../telemetry/recent-traffic.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import { echo } from "../errors/echo.ts";
import { readAdminDocument as readCandidate } from "./admin-json.ts";
import { registerPublicationRoutes } from "./admin-publication.ts";
import { registerKeyRoutes } from "./admin-keys.ts";
import type { LoadTracker } from "../traffic/load-tracker.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { errorResponse } from "./error-response.ts";
import { metricsResponse } from "./metrics-endpoint.ts";
import { discardUnreadBody, readBodyText } from "./limits.ts";
import { registerApprovalRoutes } from "./admin-approvals.ts";
import { registerBudgetRoutes } from "./admin-budgets.ts";
import { registerCacheRoutes } from "./admin-cache.ts";
import { registerExplainRoutes } from "./admin-explain.ts";
import { isOutcomeRoute, registerTaskRoutes } from "./admin-tasks.ts";
import { describeRoutes } from "./route-table.ts";
import { mcpServerStatuses } from "./admin-mcp-health.ts";
import { a2aAgentStatuses } from "../a2a/agent-health.ts";
import { healthClient } from "../traffic/health-client.ts";
import { isConsolePath, registerConsoleRoutes } from "./admin-console.ts";

type AdminEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime; actor?: string } };

/**
 * What this isolate holds for requests in flight: every count is zero once they have all ended
 * (the end-to-end suite checks it on every stack it stops).
 */
function resourcesHeld(rt: GatewayRuntime) {
  const a = rt.admission.stats();
  const l = rt.ledger.stats();
  return {
    requestsInFlight: rt.drain.inFlight,
    admissionLeases: a.inFlight.global,
    admissionQueued: a.queued.total,
    backendSlots: Object.values(a.inFlight.backend).reduce((n, v) => n + v, 0),
    breakerPermits: rt.breakers?.permitsHeld ?? 0,
    // Attempts admitted from a budget lease not yet settled, and settlements not yet written.
    ledgerAttemptsOpen: l.inFlight,
    settlementsQueued: l.queued,
  };
}

/** Attempts in flight, and the EWMA latency (ms, rounded) with when its newest sample was taken (null before any). */
const loadOf = ({ inFlight, latency: l }: ReturnType<LoadTracker["summary"]>) => ({
  inFlight,
  latencyMs: l === undefined ? null : Math.round(l.ms),
  latencyAt: l === undefined ? null : new Date(l.at).toISOString(),
});

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

/**
 * Each backend of the active snapshot as this isolate sees it: what its provider last said of the
 * gateway's credential (a wrong key shows here, not as an outage), attempts in flight and latency
 * (the selectors' own figures), and the breaker and health views it holds (absent: none cached
 * yet, or the feature is off).
 */
function backendStatuses(rt: GatewayRuntime, backends: readonly { readonly id: string; readonly name: string }[]) {
  const breakers = new Map(rt.breakers?.cachedSnapshots() ?? []);
  const health = new Map(rt.health?.cachedViews() ?? []);
  return backends.map((b) => {
    const v = rt.credentialWatch.view(b.id);
    const br = breakers.get(b.id);
    const h = health.get(b.id);
    return {
      name: b.name,
      credential: v?.state ?? "not_used",
      ...(v?.status === undefined ? {} : { status: v.status }),
      ...(v ? { since: new Date(v.at).toISOString() } : {}),
      // Load is tracked per pool member (backend and model): the backend's is its members' together.
      ...loadOf(rt.load.summary(`${b.id}/`)),
      breaker: br
        ? { state: br.state, failures: br.failures, samples: br.samples, openUntil: iso(br.openUntil) ?? null, changedAt: br.changedAt > 0 ? iso(br.changedAt)! : null }
        : rt.breakers ? { state: "closed", failures: 0, samples: 0, openUntil: null, changedAt: null } : null,
      health: h
        ? { status: h.status, watching: h.watching, lastProbeAt: iso(h.lastProbeAt) ?? null, lastOk: h.lastOk ?? null, lastReason: h.lastReason ?? null, lastLatencyMs: h.lastLatencyMs ?? null, nextProbeAt: iso(h.nextProbeAt) ?? null }
        : null,
    };
  });
}

/**
 * The admin API: served only by the Admin entrypoint, which only the admin listener reaches.
 * Bearer-token authenticated; errors use the OpenAI envelope so one client library can read both.
 */
export function createAdminApp(runtimeOf: (env: Env) => Promise<GatewayRuntime>): Hono<AdminEnv> {
  const app = new Hono<AdminEnv>().basePath("/admin");

  app.use("*", async (c, next) => {
    const rt = await runtimeOf(c.env);
    c.set("runtime", rt);
    // A task's outcome is attached with the verifier's credential, never the admin's (the route checks it).
    if (isOutcomeRoute(c.req.method, c.req.path)) return next();
    const presented = bearerOf(c.req.header("authorization"));
    // The approvers' own credential opens the approvals routes and nothing else.
    if (presented && rt.approverToken !== undefined && /^\/admin\/approvals(?:\/|$)/.test(c.req.path) && (await tokenMatches(presented, rt.approverToken))) {
      c.set("actor", "approver");
      return await next();
    }
    if (rt.adminToken === undefined) {
      throw new GatewayError("admin_unauthorized", "The admin API is disabled: no admin token is configured.");
    }
    // The console's pages check their own session cookie (a browser cannot send the bearer header).
    if (isConsolePath(c.req.path)) return await next();
    if (!presented || !(await tokenMatches(presented, rt.adminToken))) {
      throw new GatewayError("admin_unauthorized", "A valid admin bearer token is required.");
    }
    await next();
  });

  app.get("/status", async (c) => {
    const rt = c.var.runtime;
    const snap = await rt.snapshots.current().catch(() => undefined);
    return c.json({
      configDigest: rt.configDigest,
      publicationRevision: rt.engine.publicationRevision,
      snapshot: snap ? { revision: snap.revision, digest: snap.digest } : null,
      // A snapshot activated under an older publication may not serve this one; say what is missing.
      unmetRequirements: snap ? unmetRequirements(snap, rt.publication.poolRequirements) : null,
      startedAt: new Date(rt.startedAt).toISOString(),
      uptimeSeconds: Math.floor((rt.clock.now() - rt.startedAt) / 1000),
      draining: rt.drain.draining,
      inFlight: rt.drain.inFlight,
      resources: resourcesHeld(rt),
      // Slices of budgets this isolate holds; idle ones go back on their own (docs/budgets.md).
      budgetLeases: rt.ledger.stats().leases,
      mcpServers: await mcpServerStatuses(rt, healthClient((id) => c.env.HEALTH_MONITOR.getByName(id))),
      a2aAgents: await a2aAgentStatuses(rt.config.gateway.a2a.agents, rt.config.gateway.health.enabled, healthClient((id) => c.env.HEALTH_MONITOR.getByName(id)), (agent) => c.env.AGENT_CARD_REGISTRY.getByName(agent).state()),
      // Each backend of the active snapshot, and what its provider last said of the gateway's
      // credential in this isolate's traffic: a wrong key shows here, not as an outage.
      backends: snap ? backendStatuses(rt, [...snap.backends.values()]) : [],
    });
  });

  // This isolate's recent traffic (the console's overview): per entrypoint, route and backend.
  app.get("/traffic", (c) => {
    const q = c.req.query("minutes");
    const minutes = q === undefined || q === "" ? TRAFFIC_SLOTS : Number(q);
    if (!Number.isInteger(minutes) || minutes < 1 || minutes > TRAFFIC_SLOTS) {
      throw new GatewayError("invalid_request", `'minutes' must be a whole number from 1 to ${TRAFFIC_SLOTS}: the isolate keeps its last ${TRAFFIC_SLOTS} minutes.`, { param: "minutes" });
    }
    return c.json({ scope: "isolate", minutes, ...c.var.runtime.traffic.summary(minutes) });
  });

  app.get("/config", (c) => c.json(redactedConfig(c.var.runtime.config)));

  app.get("/metrics", (c) => metricsResponse(c.var.runtime));

  app.get("/snapshot", async (c) => c.json(await c.var.runtime.controller.getActive()));

  app.put("/snapshot", async (c) => {
    const rt = c.var.runtime;
    const candidate = await readCandidate(c.req.raw, rt.config.gateway.limits.maxBodyBytes);
    const result = await rt.controller.propose(candidate, "admin");
    rt.telemetry.metrics.snapshotChange(result.status === "rejected" ? "rejected" : result.status === "unchanged" ? "unchanged" : "activated");
    if (result.status === "rejected") {
      throw new GatewayError("snapshot_rejected", "The snapshot candidate was rejected; the active snapshot is unchanged.", {
        details: result.reasons,
      });
    }
    // This isolate sees the new revision at once; others within the cache TTL.
    rt.snapshots.invalidate();
    return c.json(result);
  });

  app.get("/snapshot/history", async (c) => {
    const limit = Math.min(200, Math.max(1, Number(c.req.query("limit") ?? "50") || 50));
    return c.json(await c.var.runtime.controller.history(limit));
  });

  app.post("/snapshot/rollback", async (c) => {
    const rt = c.var.runtime;
    const text = await readBodyText(c.req.raw, { maxBodyBytes: 4096, maxHeaderBytes: 0, maxHeaderCount: 0, maxJsonDepth: 0 });
    let revision: number | undefined;
    if (text.trim() !== "") {
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        throw new GatewayError("invalid_json", "The rollback body is not valid JSON.");
      }
      const r = (body as { revision?: unknown } | null)?.revision;
      if (r !== undefined && (typeof r !== "number" || !Number.isInteger(r) || r < 1)) {
        throw new GatewayError("invalid_request", "'revision' must be a positive integer.", { param: "revision" });
      }
      revision = r;
    }
    const result = await rt.controller.rollback(revision, "admin");
    if (result.status === "not_found") throw new GatewayError("revision_not_found", result.message);
    rt.telemetry.metrics.snapshotChange("rolled_back");
    rt.snapshots.invalidate();
    return c.json(result);
  });

  // Graceful drain of this instance: stop admitting, give requests in flight `budgetMs` to finish,
  // cancel the rest (their upstream calls are aborted). /ready answers 503 from the start.
  app.post("/drain", async (c) => {
    const text = await readBodyText(c.req.raw, { maxBodyBytes: 4096, maxHeaderBytes: 0, maxHeaderCount: 0, maxJsonDepth: 0 });
    let budgetMs = 30_000;
    if (text.trim() !== "") {
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        throw new GatewayError("invalid_json", "The drain body is not valid JSON.");
      }
      const b = (body as { budgetMs?: unknown } | null)?.budgetMs;
      if (b !== undefined && (typeof b !== "number" || !Number.isInteger(b) || b < 0 || b > 3_600_000)) {
        throw new GatewayError("invalid_request", "'budgetMs' must be an integer from 0 to 3600000.", { param: "budgetMs" });
      }
      if (typeof b === "number") budgetMs = b;
    }
    const report = await c.var.runtime.drain.drain(budgetMs);
    // Nothing new is admitted: return this isolate's budget leases and write its settlements,
    // and send the spans and metrics still queued.
    await c.var.runtime.ledger.drain();
    c.var.runtime.telemetry.exporter?.flushIfDue((p) => c.executionCtx.waitUntil(p), true);
    return c.json({ status: "drained", ...report });
  });

  app.post("/resume", (c) => {
    c.var.runtime.drain.resume();
    c.var.runtime.ledger.resume();
    return c.json({ status: "serving" });
  });

  app.get("/routes", async (c) => {
    const rt = c.var.runtime;
    return c.json(describeRoutes(rt.publication, await rt.snapshots.current()));
  });

  registerPublicationRoutes(app);
  registerKeyRoutes(app, (env, tenant) => env.APPROVAL_DESK.getByName(tenant));
  registerExplainRoutes(app);
  registerBudgetRoutes(app, (env, name) => env.BUDGET_LEDGER.getByName(name));
  registerApprovalRoutes(app, (env, tenant) => env.APPROVAL_DESK.getByName(tenant));
  registerTaskRoutes(app, (env, tenant) => env.TASK_LEDGER.getByName(tenant));
  registerCacheRoutes(app, (env, tenant) => env.RESPONSE_CACHE.getByName(tenant));
  registerConsoleRoutes(app);

  // Refusals drop the unread body first (bounded), so an uploading client reads them.
  app.notFound(async (c) => {
    await discardUnreadBody(c.req.raw);
    return errorResponse(new GatewayError("not_found", `Unknown admin URL: ${echo(c.req.method)} ${echo(new URL(c.req.url).pathname)}.`), "openai-chat");
  });
  app.onError(async (err, c) => {
    await discardUnreadBody(c.req.raw);
    const ge = err instanceof GatewayError ? err : new GatewayError("internal_error", "The admin request failed.", { cause: err });
    if (!(err instanceof GatewayError)) console.error(JSON.stringify({ kind: "admin_error", error: String(err) }));
    return errorResponse(ge, "openai-chat");
  });
  return app;
}
