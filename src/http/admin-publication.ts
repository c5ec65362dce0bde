import type { Hono } from "hono";
import { z } from "zod";
import { GatewayError } from "../errors/gateway-error.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { readAdminDocument, readOptionalAdminJson } from "./admin-json.ts";

type AdminEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime } };

const rollbackSchema = z.strictObject({ revision: z.number().int().min(1).optional() });

/**
 * The publication's lifecycle on the admin API (docs/publication.md): read the active revision,
 * publish a candidate (checked, then activated atomically, or started as a canary with
 * `?canary=P`), promote or abort the canary, history, rollback. This isolate serves a change at
 * once; every other within `traffic.publicationCacheTtlMs`.
 */
export function registerPublicationRoutes(app: Hono<AdminEnv>): void {
  app.get("/publication", async (c) => {
    const rt = c.var.runtime;
    const active = await rt.publicationController.getActive();
    // What this isolate serves may trail the controller by up to the cache TTL.
    const served = rt.publications.peekCanary();
    return c.json({
      ...active,
      canary: active.canary ?? null,
      servedRevision: rt.publications.peek()?.revision ?? null,
      servedCanary: served ? { revision: served.revision, percent: served.percent } : null,
      servedAs: rt.publication.revision,
    });
  });

  app.put("/publication", async (c) => {
    const rt = c.var.runtime;
    const canary = canaryParam(c.req.query("canary"));
    const candidate = await readAdminDocument(c.req.raw, rt.config.gateway.limits.maxBodyBytes);
    const result = await rt.publicationController.publish(candidate, "admin", canary === undefined ? undefined : { canary });
    if (result.status === "rejected") {
      throw new GatewayError("publication_rejected", `The publication candidate was rejected (${result.issues.length} issue${result.issues.length === 1 ? "" : "s"}); the active publication is unchanged.`, {
        details: result.issues,
      });
    }
    rt.publications.invalidate();
    return c.json(result);
  });

  for (const action of ["promote", "abort"] as const) {
    app.post(`/publication/canary/${action}`, async (c) => {
      const rt = c.var.runtime;
      const result = action === "promote" ? await rt.publicationController.promoteCanary("admin") : await rt.publicationController.abortCanary("admin");
      if (result.status === "not_found") throw new GatewayError("revision_not_found", "No publication canary is running.");
      rt.publications.invalidate();
      return c.json(result);
    });
  }

  app.get("/publication/history", async (c) => {
    const limit = Math.min(200, Math.max(1, Number(c.req.query("limit") ?? "50") || 50));
    return c.json(await c.var.runtime.publicationController.history(limit));
  });

  app.post("/publication/rollback", async (c) => {
    const rt = c.var.runtime;
    // No body: the last-known-good.
    const body = await readOptionalAdminJson(c.req.raw, rollbackSchema, {});
    const result = await rt.publicationController.rollback(body.revision, "admin");
    if (result.status === "not_found") throw new GatewayError("revision_not_found", result.message);
    rt.publications.invalidate();
    return c.json(result);
  });
}

/** `?canary=P`: absent, or an integer 1..99 (the share of callers the candidate serves). */
function canaryParam(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^[1-9]\d?$/.test(value)) throw new GatewayError("invalid_request", "canary must be an integer from 1 to 99: the percent of callers the candidate serves.", { param: "canary" });
  return Number(value);
}
