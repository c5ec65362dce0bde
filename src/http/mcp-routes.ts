import type { Context, Hono } from "hono";
import { GatewayError } from "../errors/gateway-error.ts";
import { checkStatelessFraming } from "../protocol/mcp/stateless-request.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { toJsonRpcErrorBody } from "../errors/json-rpc.ts";
import { callerIngressOf } from "./caller-ingress.ts";
import { errorResponse } from "./error-response.ts";
import { checkHeaders, discardUnreadBody } from "./limits.ts";
import { timed } from "./server-timing.ts";

type McpEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime; requestId: string; receivedAt: number } };

/**
 * The MCP adapter: `POST /mcp` (the virtual server over every configured server) and
 * `POST /mcp/:server` (one server, names unchanged), for clients of the 2026-07-28 revision and,
 * when session secrets are configured, of the 2025 era. It
 * checks the HTTP framing and its own byte limits, hands the engine an ingress and writes the
 * engine's JSON-RPC answer — one JSON body, or an SSE stream when the engine sends messages before
 * it — and serves the OAuth protected-resource metadata; it decides nothing. Nothing is cacheable.
 */
export function registerMcpRoutes(app: Hono<McpEnv>): void {
  const handle = async (c: Context<McpEnv>, server: string | undefined) => {
    const rt = c.get("runtime");
    const request = c.req.raw;
    const idHeader = { [rt.config.gateway.observability.requestIdHeader]: c.get("requestId") };
    const limits = rt.config.gateway.limits;
    try {
      checkStatelessFraming(request.method, request.headers, rt.config.gateway.mcp.allowedOrigins);
      checkHeaders(request.headers, limits);
    } catch (err) {
      await discardUnreadBody(request, limits);
      return errorResponse(err instanceof GatewayError ? err : new GatewayError("internal_error", "The gateway failed to process the request."), "json-rpc", idHeader);
    }
    // The answer is one JSON body unless the engine sends something first (progress, a log
    // message, a request relayed to the client): then it becomes an SSE stream that the reply ends.
    const encoder = new TextEncoder();
    let stream: WritableStreamDefaultWriter<Uint8Array> | undefined;
    let streaming!: (r: Response) => void;
    const streamed = new Promise<Response>((resolve) => (streaming = resolve));
    const open = (): WritableStreamDefaultWriter<Uint8Array> => {
      if (!stream) {
        const pipe = new TransformStream<Uint8Array, Uint8Array>();
        stream = pipe.writable.getWriter();
        // Opened by the engine's first message, while the request runs: its timing so far.
        const headers = session ? timed(idHeader, session.timing()) : idHeader;
        streaming(new Response(pipe.readable, { status: 200, headers: { "content-type": "text/event-stream", "cache-control": "no-store", ...headers } }));
      }
      return stream;
    };
    const send = (message: Readonly<Record<string, unknown>>) => {
      // A client that went away ends the request, as a disconnect does.
      open().write(encoder.encode(`event: message\ndata: ${JSON.stringify(message)}\n\n`)).catch(() => session?.abort("client_disconnected"));
    };
    const session = rt.engine.beginMcp({
      ...callerIngressOf(c),
      server,
      send,
      open: () => void open(),
      httpMethod: request.method === "GET" ? "GET" : "POST",
      origin: () => new URL(request.url).origin,
    });
    if (!session) {
      await discardUnreadBody(request, limits);
      return errorResponse(new GatewayError("not_found", "No MCP server is configured on this gateway."), "json-rpc", idHeader);
    }
    const onAbort = () => session.abort("client_disconnected");
    request.signal.addEventListener("abort", onAbort, { once: true });
    const answered = session
      .run()
      .then(async (reply): Promise<Response | undefined> => {
        if (stream) {
          const last = reply.kind === "error" ? toJsonRpcErrorBody(reply.error, reply.id) : reply.body;
          if (last !== undefined) send(last as Record<string, unknown>);
          await stream.close().catch(() => undefined);
          return undefined;
        }
        const headers = timed(idHeader, session.timing());
        if (reply.kind === "error") return errorResponse(reply.error, "json-rpc", headers, reply.id, reply.status);
        if (reply.body === undefined) return new Response(null, { status: reply.status, headers: { ...headers, ...reply.headers } });
        return new Response(JSON.stringify(reply.body), { status: reply.status, headers: { "content-type": "application/json", "cache-control": "no-store", ...headers, ...reply.headers } });
      })
      .finally(() => request.signal.removeEventListener("abort", onAbort));
    return (await Promise.race([streamed, answered])) ?? (await streamed);
  };
  // RFC 9728: the path-inserted URL of the `/mcp` resource, and the root one clients fall back to.
  const metadata = (c: Context<McpEnv>) => {
    const oauth = c.get("runtime").oauth;
    if (!oauth) throw new GatewayError("not_found", "This gateway does not accept OAuth access tokens.");
    // Public facts, read by browser-based clients on other origins too.
    return new Response(JSON.stringify(oauth.metadata()), { headers: { "content-type": "application/json", "cache-control": "public, max-age=300", "access-control-allow-origin": "*" } });
  };
  app.get("/.well-known/oauth-protected-resource/mcp", metadata);
  app.get("/.well-known/oauth-protected-resource", metadata);
  app.all("/mcp", (c) => handle(c, undefined));
  app.all("/mcp/:server", (c) => handle(c, c.req.param("server")));
}
