import { Hono } from "hono";
import { GatewayError } from "../errors/gateway-error.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { errorResponse } from "./error-response.ts";
import { handleGeneration, presentedKey } from "./generation.ts";
import { checkHeaders } from "./limits.ts";

type PublicEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime; requestId: string; receivedAt: number } };

/** `req_` + 32 hex chars: unguessable, and never a metric label. */
export function newRequestId(): string {
  return `req_${crypto.randomUUID().replaceAll("-", "")}`;
}

/**
 * The public listener: OpenAI-compatible API, liveness and readiness. Admin routes do not exist
 * here at all; they live on a separate entrypoint bound to the admin listener only.
 */
export function createPublicApp(runtimeOf: (env: Env) => Promise<GatewayRuntime>): Hono<PublicEnv> {
  const app = new Hono<PublicEnv>();

  app.get("/health", (c) => c.json({ status: "ok" }));

  app.use("*", async (c, next) => {
    c.set("requestId", newRequestId());
    c.set("receivedAt", Date.now());
    c.set("runtime", await runtimeOf(c.env));
    await next();
    c.header(c.var.runtime.config.gateway.observability.requestIdHeader, c.var.requestId);
  });

  // Coarse on purpose: no revision numbers or backend names on the public listener.
  app.get("/ready", async (c) => {
    try {
      await c.var.runtime.snapshots.current();
      return c.json({ status: "ready" });
    } catch {
      return c.json({ status: "not_ready" }, 503);
    }
  });

  app.get("/v1/models", async (c) => {
    const rt = c.var.runtime;
    checkHeaders(c.req.raw.headers, rt.config.gateway.limits);
    const principal = await rt.authenticator.authenticate(presentedKey(c.req.raw.headers));
    const created = Math.floor(rt.startedAt / 1000);
    return c.json({
      object: "list",
      data: rt.engine.listModels(principal).map((m) => ({ id: m.id, object: "model", created, owned_by: "sluice" })),
    });
  });

  app.post("/v1/chat/completions", (c) =>
    handleGeneration(c.var.runtime, {
      request: c.req.raw,
      protocol: "openai-chat",
      requestId: c.var.requestId,
      receivedAt: c.var.receivedAt,
      waitUntil: (p) => c.executionCtx.waitUntil(p),
    }),
  );
  app.all("/v1/chat/completions", () => {
    throw new GatewayError("method_not_allowed", "Use POST for /v1/chat/completions.");
  });

  app.notFound((c) => errorResponse(new GatewayError("not_found", `Unknown request URL: ${c.req.method} ${new URL(c.req.url).pathname}.`), "openai-chat"));
  app.onError((err, c) => {
    const ge = err instanceof GatewayError ? err : new GatewayError("internal_error", "The gateway failed to process the request.", { cause: err });
    if (!(err instanceof GatewayError)) console.error(JSON.stringify({ kind: "unhandled_error", error: String(err) }));
    const headers: Record<string, string> = {};
    const rt = c.get("runtime");
    if (rt) headers[rt.config.gateway.observability.requestIdHeader] = c.get("requestId");
    return errorResponse(ge, "openai-chat", headers);
  });
  return app;
}
