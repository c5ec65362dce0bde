import type { Hono } from "hono";
import { z } from "zod";
import { GatewayError } from "../errors/gateway-error.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { readAdminDocument } from "./admin-json.ts";
import { readBodyText } from "./limits.ts";

type AdminEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime } };

const rollbackSchema = z.strictObject({ revision: z.number().int().min(1).optional() });

/**
 * The publication's lifecycle on the admin API (docs/publication.md): read the active revision,
 * publish a candidate (checked, then activated atomically), history, rollback. This isolate serves
 * a change at once; every other within `traffic.publicationCacheTtlMs`.
 */
export function registerPublicationRoutes(app: Hono<AdminEnv>): void {
  app.get("/publication", async (c) => {
    const rt = c.var.runtime;
    const active = await rt.publicationController.getActive();
    // What this isolate serves may trail the controller by up to the cache TTL.
    return c.json({ ...active, servedRevision: rt.publications.peek()?.revision ?? null, servedAs: rt.publication.revision });
  });

  app.put("/publication", async (c) => {
    const rt = c.var.runtime;
    const candidate = await readAdminDocument(c.req.raw, rt.config.gateway.limits.maxBodyBytes);
    const result = await rt.publicationController.publish(candidate, "admin");
    if (result.status === "rejected") {
      throw new GatewayError("publication_rejected", `The publication candidate was rejected (${result.issues.length} issue${result.issues.length === 1 ? "" : "s"}); the active publication is unchanged.`, {
        details: result.issues,
      });
    }
    rt.publications.invalidate();
    return c.json(result);
  });

  app.get("/publication/history", async (c) => {
    const limit = Math.min(200, Math.max(1, Number(c.req.query("limit") ?? "50") || 50));
    return c.json(await c.var.runtime.publicationController.history(limit));
  });

  app.post("/publication/rollback", async (c) => {
    const rt = c.var.runtime;
    const text = await readBodyText(c.req.raw, { maxBodyBytes: 4096, maxHeaderBytes: 0, maxHeaderCount: 0, maxJsonDepth: 0 });
    // No body: the last-known-good.
    const body = text.trim() === "" ? {} : parseRollback(text);
    const result = await rt.publicationController.rollback(body.revision, "admin");
    if (result.status === "not_found") throw new GatewayError("revision_not_found", result.message);
    rt.publications.invalidate();
    return c.json(result);
  });
}

/** `{revision?}`: invalid JSON is `invalid_json`, anything else off the shape `invalid_request`. */
function parseRollback(text: string): z.infer<typeof rollbackSchema> {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new GatewayError("invalid_json", "The rollback body is not valid JSON.");
  }
  const parsed = rollbackSchema.safeParse(body);
  if (!parsed.success) throw new GatewayError("invalid_request", "The rollback body is {\"revision\"?: a positive integer}.", { param: "revision" });
  return parsed.data;
}
