import type { Hono } from "hono";
import { z } from "zod";
import type { AuditEventType } from "../audit/audit-event.ts";
import { echo } from "../errors/echo.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { TaskLedgerRpc } from "../task-ledger/task-ledger-client.ts";
import { decodeCursor, encodeCursor, type RequestLogRow } from "../task-ledger/request-log.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { bearerOf, tokenMatches } from "./bearer-token.ts";
import { readAdminJson } from "./admin-json.ts";

type AdminEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime } };

const AUDIT_TYPES: readonly AuditEventType[] = [
  "decision.allowed",
  "decision.denied",
  "approval.requested",
  "approval.granted",
  "approval.denied",
  "approval.expired",
  "approval.revoked",
  "tool.executed",
  "agent.executed",
  "model.completed",
  "model.tool_call_proposed",
  "content.redacted",
  "content.blocked",
];

/** Tenant, task and key ids as the gateway accepts them elsewhere (attribution ids, config ids). */
const ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** Most tasks or audit events one answer lists. */
export const MAX_LIST = 500;

/** A required or optional id parameter, refused when malformed. */
export function idParam(value: string | undefined, name: string): string;
export function idParam(value: string | undefined, name: string, optional: true): string | undefined;
export function idParam(value: string | undefined, name: string, optional?: true): string | undefined {
  if (value === undefined || value === "") {
    if (optional) return undefined;
    throw new GatewayError("invalid_request", `'${name}' is required.`, { param: name });
  }
  if (!ID.test(value)) throw new GatewayError("invalid_request", `'${name}' must be 1–128 characters of letters, digits and . _ : - (starting with a letter or digit).`, { param: name });
  return value;
}

/** `limit`: 1–{@link MAX_LIST}, 50 when absent. */
export function limitParam(value: string | undefined): number {
  if (value === undefined) return 50;
  const n = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_LIST) throw new GatewayError("invalid_request", `'limit' must be an integer from 1 to ${MAX_LIST}.`, { param: "limit" });
  return n;
}

/** Epoch milliseconds. */
export function msParam(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n)) throw new GatewayError("invalid_request", `'${name}' must be epoch milliseconds.`, { param: name });
  return n;
}

/** A filter value that names something (a model, a decision, an error code): bounded, no control characters. */
function nameParam(value: string | undefined, name: string): string | undefined {
  if (value === undefined || value === "") return undefined;
  if (value.length > 256 || /[\u0000-\u001f\u007f]/.test(value)) throw new GatewayError("invalid_request", `'${name}' must be at most 256 characters with no control characters.`, { param: name });
  return value;
}

const OUTCOMES: readonly RequestLogRow["outcome"][] = ["success", "error", "cancelled"];

const outcomeSchema = z.strictObject({
  /** What the verifier found, in its own words (`succeeded`, `failed`, `partial`…). */
  status: z.string().regex(/^[a-z][a-z0-9_-]{0,31}$/, "a lower-case word of at most 32 characters"),
  /** A reference to the evidence (a URL, a report id): never the evidence itself. */
  evidence: z.string().min(1).max(2048),
});

/** The one admin route the admin token does not open: it takes the verifier's credential. */
export function isOutcomeRoute(method: string, path: string): boolean {
  return method === "POST" && /^\/admin\/tasks\/[^/]+\/outcome\/?$/.test(path);
}

/**
 * The call ledger and audit trail on the admin listener (docs/governance.md): tasks with their
 * rollups, one task with its calls and attempts, a verifier's outcome, the request log (every
 * call, attributed or not, filtered and paged by cursor), the audit events.
 */
export function registerTaskRoutes(app: Hono<AdminEnv>, ledgerOf: (env: Env, tenant: string) => TaskLedgerRpc): void {
  app.get("/tasks", async (c) => {
    const tenant = idParam(c.req.query("tenant"), "tenant");
    const sort = c.req.query("sort");
    if (sort !== undefined && sort !== "recent" && sort !== "spend") throw new GatewayError("invalid_request", "'sort' must be recent (last seen first) or spend (costliest first).", { param: "sort" });
    const tasks = await ledgerOf(c.env, tenant).tasks(tenant, {
      order: sort,
      key: idParam(c.req.query("key"), "key", true),
      since: msParam(c.req.query("since"), "since"),
      until: msParam(c.req.query("until"), "until"),
      limit: limitParam(c.req.query("limit")),
    });
    return c.json({ tasks });
  });

  app.get("/tasks/:taskId", async (c) => {
    const tenant = idParam(c.req.query("tenant"), "tenant");
    const taskId = idParam(c.req.param("taskId"), "taskId");
    const found = await ledgerOf(c.env, tenant).task(tenant, taskId);
    if (!found) throw new GatewayError("not_found", `Tenant '${echo(tenant)}' has no task '${echo(taskId)}'.`);
    return c.json(found);
  });

  app.post("/tasks/:taskId/outcome", async (c) => {
    const rt = c.var.runtime;
    if (rt.verifierToken === undefined) throw new GatewayError("admin_unauthorized", "Outcomes are disabled: no verifier token is configured.");
    const presented = bearerOf(c.req.header("authorization"));
    if (presented === undefined || !(await tokenMatches(presented, rt.verifierToken))) throw new GatewayError("admin_unauthorized", "A valid verifier bearer token is required to attach an outcome.");
    const tenant = idParam(c.req.query("tenant"), "tenant");
    const taskId = idParam(c.req.param("taskId"), "taskId");
    const body = await readAdminJson(c.req.raw, outcomeSchema);
    const outcome = { status: body.status, evidence: body.evidence, at: rt.clock.now(), verifier: "verifier" };
    if (!(await ledgerOf(c.env, tenant).setOutcome(taskId, outcome))) throw new GatewayError("not_found", `Tenant '${echo(tenant)}' has no task '${echo(taskId)}'.`);
    return c.json({ taskId, outcome });
  });

  // The request log: every call of the tenant, newest first, a page at a time.
  app.get("/calls", async (c) => {
    const tenant = idParam(c.req.query("tenant"), "tenant");
    const outcome = c.req.query("outcome");
    if (outcome !== undefined && outcome !== "" && !OUTCOMES.includes(outcome as RequestLogRow["outcome"])) throw new GatewayError("invalid_request", `'outcome' must be one of ${OUTCOMES.join(", ")}.`, { param: "outcome" });
    const cursorText = c.req.query("cursor");
    const cursor = cursorText === undefined || cursorText === "" ? undefined : decodeCursor(cursorText);
    if (cursorText !== undefined && cursorText !== "" && cursor === undefined) throw new GatewayError("invalid_request", "'cursor' is not a cursor this API handed out; start again without one.", { param: "cursor" });
    const page = await ledgerOf(c.env, tenant).requests({
      // A key as the log names it: a key id, or an OAuth caller's `<issuer>:<subject>`.
      key: nameParam(c.req.query("key"), "key"),
      project: nameParam(c.req.query("project"), "project"),
      entrypoint: nameParam(c.req.query("entrypoint"), "entrypoint"),
      model: nameParam(c.req.query("model"), "model"),
      decision: nameParam(c.req.query("decision"), "decision"),
      outcome: outcome === undefined || outcome === "" ? undefined : (outcome as RequestLogRow["outcome"]),
      errorCode: nameParam(c.req.query("code"), "code"),
      taskId: idParam(c.req.query("task"), "task", true),
      since: msParam(c.req.query("since"), "since"),
      until: msParam(c.req.query("until"), "until"),
      cursor,
      limit: limitParam(c.req.query("limit")),
    });
    return c.json({ calls: page.calls, ...(page.next ? { next: encodeCursor(page.next) } : {}) });
  });

  app.get("/calls/:requestId", async (c) => {
    const tenant = idParam(c.req.query("tenant"), "tenant");
    const requestId = nameParam(c.req.param("requestId"), "requestId")!;
    const call = await ledgerOf(c.env, tenant).request(requestId);
    if (!call) throw new GatewayError("not_found", `Tenant '${echo(tenant)}' has no call '${echo(requestId)}' in its request log.`);
    return c.json({ call });
  });

  app.get("/audit", async (c) => {
    const tenant = idParam(c.req.query("tenant"), "tenant");
    const type = c.req.query("type");
    if (type !== undefined && !AUDIT_TYPES.includes(type as AuditEventType)) throw new GatewayError("invalid_request", `'type' must be one of ${AUDIT_TYPES.join(", ")}.`, { param: "type" });
    const events = await ledgerOf(c.env, tenant).audit({ type: type as AuditEventType | undefined, taskId: idParam(c.req.query("taskId"), "taskId", true), limit: limitParam(c.req.query("limit")) });
    return c.json({ events });
  });
}

