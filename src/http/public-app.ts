import { Hono } from "hono";
import { GatewayError } from "../errors/gateway-error.ts";
import { echo } from "../errors/echo.ts";
import { unmetRequirementsOf } from "../snapshot/requirements.ts";
import { newRequestId, type GatewayRuntime } from "../worker/runtime.ts";
import { corsPreflight, corsResponseHeaders } from "./cors.ts";
import { errorResponse } from "./error-response.ts";
import { handleGeneration, presentedCredentials } from "./generation.ts";
import { errorProtocolOf, GENERATION_ROUTES } from "./generation-routes.ts";
import { checkHeaders, discardUnreadBody } from "./limits.ts";
import { registerMcpRoutes } from "./mcp-routes.ts";
import { registerA2aCardRoutes } from "./a2a-card-route.ts";
import { registerA2aRoutes } from "./a2a-routes.ts";
import { a2aSkillVisible } from "../a2a/a2a-policy.ts";
import { registerApprovalPage } from "./approval-page.ts";
import { registerKeyTaskRoutes } from "./key-tasks.ts";
import { routingKeyOf } from "./routing-key.ts";
import { gatewayTiming, SERVER_TIMING } from "./server-timing.ts";

type PublicEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime; requestId: string; receivedAt: number } };

/**
 * The public listener: OpenAI-compatible API, liveness and readiness. Admin routes do not exist
 * here at all; they live on a separate entrypoint bound to the admin listener only.
 */
export function createPublicApp(runtimeOf: (env: Env, routingKey?: () => string | undefined) => Promise<GatewayRuntime>): Hono<PublicEnv> {
  const app = new Hono<PublicEnv>();

  app.get("/health", (c) => c.json({ status: "ok" }));

  app.use("*", async (c, next) => {
    c.set("requestId", newRequestId());
    c.set("receivedAt", Date.now());
    // The caller's credential picks stable or canary while a canary runs (read only then).
    const runtime = await runtimeOf(c.env, () => routingKeyOf(c.req.raw.headers));
    c.set("runtime", runtime);
    // CORS is closed unless origins are configured: then a listed origin's preflight is answered
    // here, and anything else takes its ordinary route without a grant.
    const origins = runtime.config.gateway.security.cors.allowOrigins;
    const preflight = corsPreflight(c.req.raw, origins);
    if (preflight) return preflight;
    await next();
    // Only where the route did not set it: setting a header on a finished response makes Hono
    // copy the whole Response, which the profile showed on every generation request.
    const idHeader = runtime.config.gateway.observability.requestIdHeader;
    if (!c.res.headers.has(idHeader)) c.header(idHeader, c.get("requestId"));
    // Every answer says what it cost; a route the engine ran wrote its own (with its upstream wait),
    // and the rest — refusals at the door, lists, readiness — were the gateway's time alone.
    if (!c.res.headers.has(SERVER_TIMING)) c.header(SERVER_TIMING, gatewayTiming(c.get("receivedAt"), Date.now()));
    const cors = corsResponseHeaders(c.req.raw, origins, c.res.headers);
    if (cors) for (const [name, value] of Object.entries(cors)) c.header(name, value, { append: name === "vary" });
  });

  // Coarse on purpose: no revision numbers or backend names on the public listener. Ready means a
  // valid config, an active snapshot, and a snapshot that can serve every active model revision.
  app.get("/ready", async (c) => {
    const rt = c.get("runtime");
    if (rt.drain.draining) return c.json({ status: "not_ready" }, 503);
    try {
      const snapshot = await rt.snapshots.current();
      if (unmetRequirementsOf(snapshot, rt.publication.poolRequirements).length > 0) return c.json({ status: "not_ready" }, 503);
      return c.json({ status: "ready" });
    } catch {
      return c.json({ status: "not_ready" }, 503);
    }
  });

  // One list, two shapes: Anthropic clients (they send `anthropic-version`) get Anthropic's.
  app.get("/v1/models", async (c) => {
    const rt = c.get("runtime");
    checkHeaders(c.req.raw.headers, rt.config.gateway.limits);
    const models = await rt.engine.listModels(presentedCredentials(c.req.raw.headers));
    if (c.req.header("anthropic-version") !== undefined) {
      const createdAt = new Date(rt.startedAt).toISOString();
      const data = models.map((m) => ({ type: "model", id: m.id, display_name: m.description ?? m.id, created_at: createdAt }));
      return c.json({ data, has_more: false, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null });
    }
    const created = Math.floor(rt.startedAt / 1000);
    return c.json({ object: "list", data: models.map((m) => ({ id: m.id, object: "model", created, owned_by: "sluice" })) });
  });

  registerMcpRoutes(app);
  // A card shows the caller only the skills its A2A policy could let it use.
  registerA2aRoutes(app);
  registerA2aCardRoutes(app, (rt, principal, agent) => (skill) => a2aSkillVisible(rt.a2aPolicy, { tenant: principal.tenantId, key: principal.keyId }, agent, skill));
  registerApprovalPage(app, (env, tenant) => env.APPROVAL_DESK.getByName(tenant));
  registerKeyTaskRoutes(app, (env, tenant) => env.TASK_LEDGER.getByName(tenant));

  for (const route of GENERATION_ROUTES) {
    app.post(route.path, (c) =>
      handleGeneration(c.get("runtime"), {
        request: c.req.raw,
        protocol: route.protocol,
        operation: route.operation,
        requestId: c.get("requestId"),
        receivedAt: c.get("receivedAt"),
        waitUntil: (p) => c.executionCtx.waitUntil(p),
      }),
    );
    app.all(route.path, () => {
      throw new GatewayError("method_not_allowed", `Use POST for ${route.path}.`);
    });
  }

  // Errors outside a generation route are rendered for the protocol the client or the path belongs to.
  const protocolOf = (req: Request) => errorProtocolOf(new URL(req.url).pathname, req.headers.has("anthropic-version"));
  // Refusals drop the unread body first (bounded), so an uploading client reads them.
  app.notFound(async (c) => {
    await discardUnreadBody(c.req.raw, c.get("runtime")?.config.gateway.limits);
    return errorResponse(new GatewayError("not_found", `Unknown request URL: ${echo(c.req.method)} ${echo(new URL(c.req.url).pathname)}.`), protocolOf(c.req.raw));
  });
  app.onError(async (err, c) => {
    await discardUnreadBody(c.req.raw, c.get("runtime")?.config.gateway.limits);
    const ge = err instanceof GatewayError ? err : new GatewayError("internal_error", "The gateway failed to process the request.", { cause: err });
    if (!(err instanceof GatewayError)) console.error(JSON.stringify({ kind: "unhandled_error", error: String(err) }));
    const headers: Record<string, string> = {};
    const rt = c.get("runtime");
    if (rt) headers[rt.config.gateway.observability.requestIdHeader] = c.get("requestId");
    return errorResponse(ge, protocolOf(c.req.raw), headers);
  });
  return app;
}
