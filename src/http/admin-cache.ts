import type { Hono } from "hono";
import type { ResponseCacheRpc } from "../cache/response-cache-service.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { idParam } from "./admin-tasks.ts";

type AdminEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime } };

/** A principal's charge target as the cache keeps it: `team` or `team/project`. */
const PROJECT = /^[a-z0-9][a-z0-9._-]{0,63}(?:\/[a-z0-9][a-z0-9._-]{0,63})?$/;

function projectParam(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (!PROJECT.test(value)) throw new GatewayError("invalid_request", "'project' must be a team id or team/project ids.", { param: "project" });
  return value;
}

/**
 * The response cache on the admin listener (docs/cache.md): `DELETE /admin/cache/:tenant` empties
 * the tenant's partition, or only the entries of callers charged to one team or project
 * (`?project=team/project`), or only one key's key-scoped entries (`?key=`).
 */
export function registerCacheRoutes(app: Hono<AdminEnv>, cacheOf: (env: Env, tenant: string) => Pick<ResponseCacheRpc, "purge">): void {
  app.delete("/cache/:tenant", async (c) => {
    const tenant = idParam(c.req.param("tenant"), "tenant");
    const project = projectParam(c.req.query("project"));
    const key = idParam(c.req.query("key"), "key", true);
    const deleted = await cacheOf(c.env, tenant).purge({ project, key });
    return c.json({ tenant, ...(project === undefined ? {} : { project }), ...(key === undefined ? {} : { key }), deleted });
  });
}
