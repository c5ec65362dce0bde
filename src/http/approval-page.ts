import type { Hono } from "hono";
import { tenantOfApprovalId, type Approval } from "../approvals/approval-desk.ts";
import type { ApprovalDeskRpc } from "../approvals/approval-desk-rpc.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { html, type SafeHtml } from "./console-html.ts";

type PublicEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime; requestId: string; receivedAt: number } };


/** What the caller of an agent message does next: it continues the task it was answered with. */
const WHAT_NEXT_AGENT: Readonly<Record<Approval["state"], string>> = {
  pending: "Waiting for an approver. Once approved, the caller sends a message with the task's id to run it.",
  approved: "Approved. The caller sends a message with the task's id: the held message runs once.",
  denied: "Denied. The message will not be sent.",
  expired: "Expired before it was used. The caller sends the message anew to ask again.",
  revoked: "Revoked. The message will not be sent.",
  executed: "Approved and used: the message was sent once.",
};

const WHAT_NEXT: Readonly<Record<Approval["state"], string>> = {
  pending: "Waiting for an approver. Call the tool again once it is approved.",
  approved: "Approved. Call the tool again with the same arguments: it runs once.",
  denied: "Denied. The call will not run.",
  expired: "Expired before it was used. Call the tool again to ask anew.",
  revoked: "Revoked. The call will not run.",
  executed: "Approved and used: the call ran once.",
};

function page(status: number, title: string, body: SafeHtml): Response {
  const doc = html`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${title}</title><style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem}dt{font-weight:600}dd{margin:0 0 .5rem}</style></head><body>${body}</body></html>`;
  return new Response(doc.text, {
    status,
    headers: { "content-type": "text/html; charset=utf-8", "cache-control": "no-store", "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'", "x-content-type-options": "nosniff", "referrer-policy": "no-referrer" },
  });
}

/**
 * `GET /approvals/:id` on the public listener: the approval's status page, the URL the client was
 * sent to. Readable without a credential (the id is unguessable), so it shows only the tool and
 * server (an agent message's: the agent and skill), the state and the expiry — never arguments or
 * message, principal or reason.
 */
export function registerApprovalPage(app: Hono<PublicEnv>, deskFor: (env: Env, tenant: string) => ApprovalDeskRpc): void {
  app.get("/approvals/:id", async (c) => {
    const id = c.req.param("id");
    const tenant = tenantOfApprovalId(id);
    const a = tenant === undefined ? undefined : await deskFor(c.env, tenant).get(id);
    if (!a) return page(404, "Approval not found", html`<h1>Approval not found</h1><p>No approval has this address, or it is no longer kept.</p>`);
    return page(
      200,
      `Approval: ${a.state}`,
      a.kind === "agent"
        ? html`<h1>Agent message approval</h1><dl><dt>Agent</dt><dd>${a.server}</dd><dt>Skill</dt><dd>${a.tool}</dd><dt>State</dt><dd id="state">${a.state}</dd><dt>Expires</dt><dd>${new Date(a.expiresAt).toISOString()}</dd></dl><p>${WHAT_NEXT_AGENT[a.state]}</p>`
        : html`<h1>Tool call approval</h1><dl><dt>Tool</dt><dd>${a.tool}</dd><dt>Server</dt><dd>${a.server}</dd><dt>State</dt><dd id="state">${a.state}</dd><dt>Expires</dt><dd>${new Date(a.expiresAt).toISOString()}</dd></dl><p>${WHAT_NEXT[a.state]}</p>`,
    );
  });
}
