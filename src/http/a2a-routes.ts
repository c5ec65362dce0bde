import type { Context, Hono } from "hono";
import { echo } from "../errors/echo.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { callerIngressOf } from "./caller-ingress.ts";
import { errorResponse } from "./error-response.ts";
import { checkHeaders, discardUnreadBody, readJsonBody } from "./limits.ts";
import { timed } from "./server-timing.ts";

type A2aEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime; requestId: string; receivedAt: number } };

/**
 * The status an A2A refusal is answered with. A2A's JSON-RPC binding answers errors in-band (HTTP
 * 200, the error in the JSON-RPC body), and its clients read them only there; a missing or bad
 * credential keeps its 401 (with its challenge), since the caller never reached the protocol.
 */
function a2aStatus(err: GatewayError): number {
  return err.status === 401 ? 401 : 200;
}

/**
 * The A2A adapter: `POST /a2a/<agent>` and the virtual agent `POST /a2a`, the JSON-RPC binding of A2A 1.0 and 0.3 (docs/a2a.md,
 * "Calling an agent"). It checks its byte limits, hands the engine an ingress, and writes the
 * engine's answer — one JSON-RPC response, or the agent's SSE stream — and decides nothing.
 * Other methods on the path are 405; nothing is cacheable.
 */
export function registerA2aRoutes(app: Hono<A2aEnv>): void {
  const handle = async (c: Context<A2aEnv>) => {
    const rt = c.get("runtime");
    const request = c.req.raw;
    const idHeader = { [rt.config.gateway.observability.requestIdHeader]: c.get("requestId") };
    const limits = rt.config.gateway.limits;
    const refuse = async (err: GatewayError, status: number = err.status) => {
      await discardUnreadBody(request, limits);
      return errorResponse(err, "json-rpc", idHeader, null, status);
    };
    if (request.method !== "POST") return await refuse(new GatewayError("method_not_allowed", "An A2A agent's endpoint takes POST (JSON-RPC); its card is at /.well-known/agent-card.json under it."));
    try {
      checkHeaders(request.headers, limits);
    } catch (err) {
      return await refuse(err instanceof GatewayError ? err : new GatewayError("internal_error", "The gateway failed to process the request."));
    }
    // No agent segment: the virtual agent, which routes each message by the capability it asks for.
    const agent = c.req.param("agent");
    const session = rt.engine.beginA2a({ ...callerIngressOf(c), agent, origin: new URL(request.url).origin });
    if (!session) return await refuse(new GatewayError("agent_not_found", agent === undefined ? "No A2A agents are configured." : `No agent named ${echo(agent)} is configured.`));
    const onAbort = () => session.abort("client_disconnected");
    request.signal.addEventListener("abort", onAbort, { once: true });
    let streaming = false;
    try {
      const reply = await session.run();
      const headers = timed(idHeader, session.timing());
      if (reply.kind === "error") return errorResponse(reply.error, "json-rpc", headers, reply.id, a2aStatus(reply.error));
      if (reply.kind === "stream") {
        // The client's going away ends the call even while the agent is silent (a task that waits):
        // the listener stays for the stream's life, and aborting an ended request does nothing.
        streaming = true;
        return new Response(reply.body, { status: 200, headers: { "content-type": "text/event-stream", "cache-control": "no-store", ...headers } });
      }
      return new Response(JSON.stringify(reply.body), { status: 200, headers: { "content-type": "application/json", "cache-control": "no-store", ...headers } });
    } finally {
      if (!streaming) request.signal.removeEventListener("abort", onAbort);
    }
  };
  app.all("/a2a/:agent", handle);
  app.all("/a2a", handle);
  app.all("/a2a/:agent/push/:sealed", relay);
}

/**
 * `POST /a2a/<agent>/push/<sealed>`: an agent's push notification for a caller's webhook (docs/a2a.md,
 * "Push notifications"). The engine relays it; the agent hears 204 when the webhook took it, else
 * the refusal in the JSON error envelope with its status.
 */
async function relay(c: Context<A2aEnv>): Promise<Response> {
  const rt = c.get("runtime");
  const request = c.req.raw;
  const idHeader = { [rt.config.gateway.observability.requestIdHeader]: c.get("requestId") };
  const limits = rt.config.gateway.limits;
  const refuse = async (err: GatewayError) => {
    await discardUnreadBody(request, limits);
    return errorResponse(err, "openai-chat", idHeader, null, err.status);
  };
  if (request.method !== "POST") return await refuse(new GatewayError("method_not_allowed", "The push relay takes POST."));
  try {
    checkHeaders(request.headers, limits);
  } catch (err) {
    return await refuse(err instanceof GatewayError ? err : new GatewayError("internal_error", "The gateway failed to process the request."));
  }
  const { requestId, receivedAt, headers, traceParent, waitUntil } = callerIngressOf(c);
  const readBody = () => readJsonBody(request, limits, true);
  const session = rt.engine.beginA2aPush({ requestId, receivedAt, headers, readBody, traceParent, waitUntil, agent: c.req.param("agent") ?? "", sealed: c.req.param("sealed") ?? "" });
  if (!session) return await refuse(new GatewayError("not_found", "No push relay at this address."));
  const onAbort = () => session.abort("client_disconnected");
  request.signal.addEventListener("abort", onAbort, { once: true });
  try {
    const reply = await session.run();
    const headers = timed(idHeader, session.timing());
    if (reply.kind === "error") return errorResponse(reply.error, "openai-chat", headers, null, reply.error.status);
    return new Response(null, { status: 204, headers: { "cache-control": "no-store", ...headers } });
  } finally {
    request.signal.removeEventListener("abort", onAbort);
  }
}
