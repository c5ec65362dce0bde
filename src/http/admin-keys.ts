import type { Hono } from "hono";
import { z } from "zod";
import type { ApprovalDeskRpc } from "../approvals/approval-desk-rpc.ts";
import { auditEvent } from "../approvals/approval-events.ts";
import { sha256Hex } from "../digest/canonical-digest.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { KeyAmendResult } from "../publication-lifecycle/controller.ts";
import type { KeyOperation } from "../publication-lifecycle/key-operations.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { readAdminJson, readOptionalAdminJson } from "./admin-json.ts";
import { idParam } from "./admin-tasks.ts";

type AdminEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime; actor?: string } };

const keyId = z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, "ids are 1-64 lower-case letters, digits, '.', '_' or '-'");
const instant = z.iso.datetime({ offset: true });

const createSchema = z.strictObject({
  tenant: keyId,
  /** Default: `key-` and the first 12 hex digits of the new key's digest. */
  id: keyId.optional(),
  entrypoints: z.array(z.string().min(1)).min(1).default(["*"]),
  chargeTo: z.string().min(1).optional(),
  expiresAt: instant.optional(),
});
const rotateSchema = z.strictObject({
  /** How long the replaced value keeps working; 0: not at all. */
  graceSeconds: z.number().int().min(0).max(366 * 86_400),
});
const reasonSchema = z.strictObject({ reason: z.string().min(1).max(1024).optional() });

/**
 * A new API key: 32 random bytes, base64url, behind a recognisable prefix (so secret scanners and
 * people can tell what leaked). It has no dot, so the authenticator chain never mistakes it for a
 * JWT.
 */
async function newKey(): Promise<{ key: string; sha256: string }> {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  const key = `sk-sluice-${btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "")}`;
  return { key, sha256: await sha256Hex(key) };
}

/**
 * API keys as a lifecycle on the admin API (docs/publication.md, Keys): list, create, revoke,
 * disable, enable, rotate. Each change publishes a revision holding only digests; a new key's
 * value is in the answer that created it and nowhere else. This isolate serves the change at
 * once, every other within `traffic.publicationCacheTtlMs`.
 */
export function registerKeyRoutes(app: Hono<AdminEnv>, deskFor: (env: Env, tenant: string) => ApprovalDeskRpc): void {
  app.get("/keys", async (c) => {
    const tenant = c.req.query("tenant");
    const keys = await c.var.runtime.publicationController.keys(tenant === undefined ? undefined : idParam(tenant, "tenant"));
    return c.json({ keys });
  });

  app.post("/keys", async (c) => {
    const rt = c.var.runtime;
    const body = await readAdminJson(c.req.raw, createSchema);
    const { key, sha256 } = await newKey();
    const id = body.id ?? `key-${sha256.slice(0, 12)}`;
    const op: KeyOperation = { kind: "create", tenant: body.tenant, id, sha256, entrypoints: body.entrypoints, chargeTo: body.chargeTo, expiresAt: body.expiresAt, at: now(rt) };
    const result = settled(await rt.publicationController.amendKeys(op, `admin: create key ${body.tenant}/${id}`));
    rt.publications.invalidate();
    // The only time the key is ever shown.
    return c.json({ ...result, apiKey: key }, 201);
  });

  app.post("/keys/:id/:action{revoke|disable|enable}", async (c) => {
    const rt = c.var.runtime;
    const action = c.req.param("action") as "revoke" | "disable" | "enable";
    const id = idParam(c.req.param("id"), "id");
    const tenantQuery = c.req.query("tenant");
    const tenant = tenantQuery === undefined ? undefined : idParam(tenantQuery, "tenant");
    const { reason } = await readOptionalAdminJson(c.req.raw, reasonSchema, {});
    const op: KeyOperation = { kind: action, tenant, id, at: now(rt) };
    const result = settled(await rt.publicationController.amendKeys(op, `admin: ${action} key ${tenant === undefined ? "" : `${tenant}/`}${id}`));
    rt.publications.invalidate();
    if (action !== "revoke") return c.json(result);
    // The key's approvals end with it: nothing it asked for can be approved or executed any more.
    const actor = c.get("actor") ?? "admin";
    const why = reason ?? `API key ${result.key.tenant}/${result.key.id} was revoked`;
    const revoked = await deskFor(c.env, result.key.tenant).revokeKey(result.key.id, actor, why);
    const events = revoked.map((a) => auditEvent("approval.revoked", a, undefined, a.decidedAt ?? Date.now(), { actor, reason: why }));
    if (events.length > 0) rt.taskLedger.record(result.key.tenant, events, (p) => c.executionCtx.waitUntil(p));
    return c.json({ ...result, approvalsRevoked: revoked.map((a) => a.id) });
  });

  app.post("/keys/:id/rotate", async (c) => {
    const rt = c.var.runtime;
    const id = idParam(c.req.param("id"), "id");
    const tenantQuery = c.req.query("tenant");
    const tenant = tenantQuery === undefined ? undefined : idParam(tenantQuery, "tenant");
    const { graceSeconds } = await readAdminJson(c.req.raw, rotateSchema);
    const at = rt.clock.now();
    const { key, sha256 } = await newKey();
    const op: KeyOperation = { kind: "rotate", tenant, id, sha256, graceUntil: new Date(at + graceSeconds * 1000).toISOString(), at: new Date(at).toISOString() };
    const result = settled(await rt.publicationController.amendKeys(op, `admin: rotate key ${tenant === undefined ? "" : `${tenant}/`}${id}`));
    rt.publications.invalidate();
    return c.json({ ...result, apiKey: key });
  });
}

const now = (rt: GatewayRuntime) => new Date(rt.clock.now()).toISOString();

/** A key change that did not publish is an error in the admin API's envelope. */
function settled(result: KeyAmendResult): Extract<KeyAmendResult, { key: unknown }> {
  if (result.status === "not_found") throw new GatewayError("not_found", `${result.message}.`);
  if (result.status === "rejected") {
    throw new GatewayError("publication_rejected", `The key change was rejected (${result.issues.length} issue${result.issues.length === 1 ? "" : "s"}); the active publication is unchanged.`, {
      details: result.issues,
    });
  }
  return result;
}
