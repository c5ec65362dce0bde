import type { Hono } from "hono";
import { z } from "zod";
import { APPROVAL_STATES, DECISIONS, type Approval, type ApprovalState, type ApproverAction } from "../approvals/approval-desk.ts";
import type { ApprovalDeskRpc } from "../approvals/approval-desk-rpc.ts";
import { auditEvent } from "../approvals/approval-events.ts";
import { echo } from "../errors/echo.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { readAdminJson } from "./admin-json.ts";
import { idParam } from "./admin-tasks.ts";

type AdminEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime; actor?: string } };

const decisionSchema = z.strictObject({ reason: z.string().min(1).max(1024) });


/** What the admin API shows of an approval: the contract's shape, without the desk's bookkeeping. */
function shown(a: Approval): Omit<Approval, "usedNonces" | "reported"> {
  const { usedNonces: _nonces, reported: _reported, ...rest } = a;
  return rest;
}

/**
 * The approvers' admin API: list, read, approve, deny and revoke (with a reason). Each decision
 * is an audit event, kept in the approval's own history and written as one `{"kind":"audit"}` log line.
 */
export function registerApprovalRoutes(app: Hono<AdminEnv>, deskFor: (env: Env, tenant: string) => ApprovalDeskRpc): void {
  app.get("/approvals", async (c) => {
    const state = c.req.query("state");
    if (state !== undefined && !APPROVAL_STATES.includes(state as ApprovalState)) throw new GatewayError("invalid_request", `state must be one of ${APPROVAL_STATES.join(", ")}.`, { param: "state" });
    const list = await deskFor(c.env, idParam(c.req.query("tenant"), "tenant")).list(state as ApprovalState | undefined);
    return c.json({ approvals: list.map(shown) });
  });

  app.get("/approvals/:id", async (c) => {
    const a = await deskFor(c.env, idParam(c.req.query("tenant"), "tenant")).get(c.req.param("id"));
    if (!a) throw new GatewayError("not_found", `No approval '${echo(c.req.param("id"))}' in this tenant.`);
    return c.json({ approval: shown(a) });
  });

  app.post("/approvals/:id/:action{approve|deny|revoke}", async (c) => {
    const action = c.req.param("action") as ApproverAction;
    const tenant = idParam(c.req.query("tenant"), "tenant");
    const { reason } = await readAdminJson(c.req.raw, decisionSchema, 8 * 1024);
    const actor = c.get("actor") ?? "admin";
    const out = await deskFor(c.env, tenant).decide(c.req.param("id"), action, actor, reason);
    if (!out.ok) {
      if (!out.approval) throw new GatewayError("not_found", `No approval '${echo(c.req.param("id"))}' in this tenant.`);
      throw new GatewayError("invalid_request", `Cannot ${action}: ${out.why}.`, { details: [{ approval: shown(out.approval) }] });
    }
    const event = auditEvent(`approval.${DECISIONS[action].event}`, out.approval, undefined, out.approval.decidedAt ?? Date.now(), { actor, reason });
    // One audit trail: the decision goes through the call ledger's sink beside the request-path
    // events (so a task's rollup counts the time its approvals waited), line and all.
    c.get("runtime").taskLedger.record(tenant, [event], (p) => c.executionCtx.waitUntil(p));
    return c.json({ approval: shown(out.approval) });
  });
}
