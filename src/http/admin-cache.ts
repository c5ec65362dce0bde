import type { Hono } from "hono";
import type { ResponseCacheRpc } from "../cache/response-cache-service.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { idParam } from "./admin-tasks.ts";

type AdminEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime } };

/**
 * The response cache on the admin listener (docs/cache.md): `DELETE /admin/cache/:tenant` empties
 * the tenant's partition, or only one project's entries (`?project=`), or only one key's
 * key-scoped entries (`?key=`, with `project` optional).
 */
export function registerCacheRoutes(app: Hono<AdminEnv>, cacheOf: (env: Env, tenant: string) => Pick<ResponseCacheRpc, "purge">): void {
  app.delete("/cache/:tenant", async (c) => {
    const tenant = idParam(c.req.param("tenant"), "tenant");
    const project = idParam(c.req.query("project"), "project", true);
    const key = idParam(c.req.query("key"), "key", true);
    const deleted = await cacheOf(c.env, tenant).purge({ project, key });
    return c.json({ tenant, ...(project === undefined ? {} : { project }), ...(key === undefined ? {} : { key }), deleted });
  });
}
