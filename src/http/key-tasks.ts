import type { Hono } from "hono";
import { authenticateCaller } from "../auth/authenticator-chain.ts";
import { echo } from "../errors/echo.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { TaskLedgerRpc } from "../task-ledger/task-ledger-client.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { idParam, limitParam, msParam } from "./admin-tasks.ts";
import { presentedCredentials } from "./generation.ts";
import { checkHeaders } from "./limits.ts";

type PublicEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime; requestId: string; receivedAt: number } };

/**
 * A key's read-only view of its own tasks on the public listener: only tasks its tenant's ledger
 * holds calls of this key in, and of those only this key's calls and the figures summed from them.
 */
export function registerKeyTaskRoutes(app: Hono<PublicEnv>, ledgerOf: (env: Env, tenant: string) => TaskLedgerRpc): void {
  app.get("/v1/sluice/tasks", async (c) => {
    const rt = c.get("runtime");
    checkHeaders(c.req.raw.headers, rt.config.gateway.limits);
    const p = await authenticateCaller({ publication: rt.publication, oauth: rt.oauth, clock: rt.clock }, presentedCredentials(c.req.raw.headers), "model");
    const tasks = await ledgerOf(c.env, p.tenantId).tasks(p.tenantId, {
      key: p.keyId,
      onlyKey: true,
      since: msParam(c.req.query("since"), "since"),
      until: msParam(c.req.query("until"), "until"),
      limit: limitParam(c.req.query("limit")),
    });
    return c.json({ tasks });
  });

  app.get("/v1/sluice/tasks/:taskId", async (c) => {
    const rt = c.get("runtime");
    checkHeaders(c.req.raw.headers, rt.config.gateway.limits);
    const p = await authenticateCaller({ publication: rt.publication, oauth: rt.oauth, clock: rt.clock }, presentedCredentials(c.req.raw.headers), "model");
    const taskId = idParam(c.req.param("taskId"), "taskId");
    const found = await ledgerOf(c.env, p.tenantId).task(p.tenantId, taskId, p.keyId);
    // Another key's task (or another tenant's) is as unknown as a task that never was.
    if (!found) throw new GatewayError("not_found", `No task '${echo(taskId)}' of this key.`);
    return c.json(found);
  });
}
