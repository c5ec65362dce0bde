import type { Hono } from "hono";
import { z } from "zod";
import { echo } from "../errors/echo.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import { PROTOCOL_IDS } from "../protocol/codec.ts";
import { newRequestId, type GatewayRuntime } from "../worker/runtime.ts";
import { readAdminJson } from "./admin-json.ts";

type AdminEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime } };

/** `POST /admin/explain`: a request body as a client would send it, and whom to explain it for. */
const explainSchema = z.strictObject({
  /** The chat request's body, in `protocol`'s shape. */
  request: z.record(z.string(), z.unknown()),
  protocol: z.enum(PROTOCOL_IDS).default("openai-chat"),
  /** An API key's id: explained as that key (its tenant, charge target and grants). */
  key: z.string().min(1).max(256).optional(),
  /** A tenant: explained as the tenant (with `key`, the key of that tenant). */
  tenant: z.string().min(1).max(256).optional(),
  /** Trusted headers the request would carry (names from gateway.yaml `security.trustedHeaders`). */
  headers: z.record(z.string(), z.string().max(8192)).optional(),
});

/** The body, parsed as the generation endpoints parse theirs (size and depth bounded) and checked against the schema. */
async function readExplain(request: Request, rt: GatewayRuntime): Promise<z.infer<typeof explainSchema>> {
  const limits = rt.config.gateway.limits;
  // The client's request sits one level down, inside `request`.
  const body = await readAdminJson(request, explainSchema, limits.maxBodyBytes + 4096, limits.maxJsonDepth + 1);
  if (body.key === undefined && body.tenant === undefined) throw new GatewayError("invalid_request", "Name the caller to explain for: 'key' (an API key id) or 'tenant'.", { param: "key" });
  return body;
}

/**
 * `POST /admin/explain`: how the gateway would decide a request — the signals and their scores,
 * the unknowns, the decision, the plan with its candidate backends, what the plugins would do —
 * with nothing dispatched, reserved or charged, and no content stored. The request runs on the
 * one runner in explain mode (src/engine/runner.ts); its similarity signals make their embedding
 * sub-request, unbilled. A request refused before it is decided (a bad body, an unknown model, a
 * key without the grant) answers that error; a refusal at decide or by a plugin is the answer's
 * `outcome`.
 */
export function registerExplainRoutes(app: Hono<AdminEnv>): void {
  app.post("/explain", async (c) => {
    const rt = c.var.runtime;
    const body = await readExplain(c.req.raw, rt);
    const trusted = new Map<string, string>();
    const allowed = new Set(rt.config.gateway.security.trustedHeaders.map((h) => h.toLowerCase()));
    for (const [name, value] of Object.entries(body.headers ?? {})) {
      const n = name.toLowerCase();
      if (!allowed.has(n)) throw new GatewayError("invalid_request", `'headers.${echo(name)}' is not a trusted header (gateway.yaml security.trustedHeaders): a request's other headers never reach a decision.`, { param: `headers.${echo(name)}` });
      trusted.set(n, value);
    }
    const answer = await rt.engine.explain(
      {
        requestId: newRequestId(),
        receivedAt: rt.clock.now(),
        protocol: body.protocol,
        apiKey: undefined,
        readBody: async () => body.request,
        trustedHeaders: trusted,
        waitUntil: (p) => c.executionCtx.waitUntil(p),
      },
      { as: { key: body.key, tenant: body.tenant }, offline: false },
    );
    return c.json(answer);
  });
}
