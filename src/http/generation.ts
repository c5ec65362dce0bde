import { attributionOf } from "../attribution/attribution.ts";
import { workloadOf } from "../attribution/workload.ts";
import type { PresentedCredentials } from "../auth/authenticator-chain.ts";
import { cacheDirectives } from "../cache/cache-policy.ts";
import { TASK_BUDGET_HEADER } from "../reserve/task-scope.ts";
import { parseCallBudget } from "../call-budget/attempt-budget-client.ts";
import { parseTraceparent } from "../context/trace-context.ts";
import type { Session } from "../engine/session-api.ts";
import type { ReplyMeta, RequestOperation } from "../kinds/model/model-api.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { ProtocolId } from "../protocol/codec.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { errorResponse } from "./error-response.ts";
import { limitFigure } from "./budget-headers.ts";
import { checkHeaders, discardUnreadBody, readJsonBody } from "./limits.ts";
import { bearerOf } from "./bearer-token.ts";
import { timed } from "./server-timing.ts";

/** Transport facts the HTTP adapter passes along; nothing here is Hono-specific. */
export interface GenerationInput {
  readonly request: Request;
  readonly protocol: ProtocolId;
  /** What the route serves: a chat (the generation APIs), embeddings, moderations, or a token count. */
  readonly operation?: RequestOperation | undefined;
  readonly requestId: string;
  readonly receivedAt: number;
  /** Keeps the isolate alive for work after the response (settlements, breaker reports). */
  readonly waitUntil: (p: Promise<unknown>) => void;
}

/** The caller's key from `Authorization: Bearer` or `x-api-key`; never forwarded anywhere. */
export function presentedKey(headers: Headers): string | undefined {
  const auth = headers.get("authorization");
  if (auth !== null) {
    const m = /^Bearer\s+(.+)$/i.exec(auth.trim());
    return m?.[1]?.trim();
  }
  return headers.get("x-api-key")?.trim() ?? undefined;
}

/** Both places a credential may come from: the authenticator chain tells an API key from an access token. */
export function presentedCredentials(headers: Headers): PresentedCredentials {
  return { apiKey: presentedKey(headers), bearer: bearerOf(headers.get("authorization") ?? undefined) };
}

/** Trusted headers only: the ones the bootstrap config lists. */
export function trustedHeaders(headers: Headers, names: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const n of names) {
    const v = headers.get(n);
    if (v !== null) out.set(n, v);
  }
  return out;
}

/**
 * The reply's facts as HTTP headers (the engine decided them; this only spells them). Provider
 * headers a backend passes on come first, so the gateway's own always win a name clash.
 */
function metaHeaders(idHeader: Record<string, string>, meta: ReplyMeta | undefined): Record<string, string> {
  const h: Record<string, string> = { ...meta?.upstreamHeaders, ...idHeader };
  if (!meta) return h;
  if (meta.attempts.length > 0) h["x-sluice-attempts"] = meta.attempts.join(", ");
  // A declared downgrade is the client's business: it is told which of its fields were dropped.
  if (meta.downgraded.length > 0) h["x-sluice-downgraded"] = meta.downgraded.join(", ");
  if (meta.injectedMaxOutputTokens !== undefined) h["x-sluice-max-output-tokens"] = `${meta.injectedMaxOutputTokens}; injected`;
  if (meta.callId !== undefined) h["x-sluice-call-id"] = meta.callId;
  if (meta.decision !== undefined) h["x-sluice-decision"] = meta.decision;
  if (meta.looper !== undefined) h["x-sluice-looper"] = meta.looper;
  if (meta.budgetUnchecked) h["x-sluice-budget"] = "unchecked";
  // A token count says whether the model's backend counted it or the gateway estimated it.
  if (meta.tokenCount !== undefined) h["x-sluice-token-count"] = meta.tokenCount;
  if (meta.cache !== undefined) h["x-sluice-cache"] = meta.cache;
  if (meta.task && meta.task.length > 0) {
    const metric = (t: (typeof meta.task)[number]) => (t.currency !== undefined ? `${t.metric}:${t.currency}` : t.metric);
    h["x-sluice-task-spent"] = meta.task.map((t) => limitFigure(metric(t), t.spent)).join(", ");
    h["x-sluice-task-remaining"] = meta.task.map((t) => limitFigure(metric(t), t.remaining)).join(", ");
  }
  if (meta.budgetRemaining && meta.budgetRemaining.length > 0) {
    h["x-sluice-budget-remaining"] = meta.budgetRemaining.map((r) => `${r.scope};${limitFigure(r.metric, r.remaining)}`).join(", ");
  }
  return h;
}

/**
 * The HTTP adapter for the generation endpoints: request bytes into an ingress, the engine's
 * action or reply back into a response. It decides nothing: limits on the request's own bytes are
 * its only checks. A client disconnect the runtime reports (`request.signal`) aborts the session,
 * which releases everything there and then.
 */
export async function handleGeneration(rt: GatewayRuntime, input: GenerationInput): Promise<Response> {
  const { request, protocol, requestId } = input;
  const idHeader = { [rt.config.gateway.observability.requestIdHeader]: requestId };
  const limits = rt.config.gateway.limits;
  try {
    checkHeaders(request.headers, limits);
  } catch (err) {
    await discardUnreadBody(request, limits);
    return errorResponse(err instanceof GatewayError ? err : new GatewayError("internal_error", "The gateway failed to process the request."), protocol, idHeader);
  }
  const session: Session = rt.engine.begin({
    requestId,
    receivedAt: input.receivedAt,
    protocol,
    operation: input.operation,
    ...presentedCredentials(request.headers),
    readBody: () => readJsonBody(request, limits),
    trustedHeaders: trustedHeaders(request.headers, rt.config.gateway.security.trustedHeaders),
    call: parseCallBudget(request.headers, input.receivedAt),
    attribution: attributionOf(request.headers),
    workload: workloadOf(request.headers, rt.config.gateway.governance.workload),
    taskBudget: request.headers.get(TASK_BUDGET_HEADER) ?? undefined,
    cacheDirectives: cacheDirectives(request.headers),
    waitUntil: input.waitUntil,
    // Parsed always; the engine continues it only when policy trusts it, and links it otherwise.
    traceParent: parseTraceparent(request.headers.get("traceparent"), request.headers.get("tracestate")),
  });
  const onAbort = () => session.abort("client_disconnected");
  request.signal.addEventListener("abort", onAbort, { once: true });
  let streaming = false;
  try {
    const action = await session.prepare();
    if (action.kind === "immediate") {
      // Refused before its body was read (a bad key, say): drop the body so the client can read the answer.
      await discardUnreadBody(request, limits);
      return errorResponse(action.error, protocol, timed(idHeader, session.timing()));
    }
    const reply = await session.dispatch();
    // What is known as the headers go out: a stream's whole figures are in the overhead histogram.
    const headers = timed(metaHeaders(idHeader, reply.meta), session.timing());
    switch (reply.kind) {
      case "error":
        return errorResponse(reply.error, protocol, headers);
      case "buffered":
        return new Response(JSON.stringify(reply.body), { headers: { "content-type": "application/json", ...headers } });
      case "stream":
        streaming = true;
        // The runtime cancels the body when the client goes away; the stream ends the request.
        return new Response(reply.body, { headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", ...headers } });
    }
    throw new Error("unreachable: every reply kind is written above");
  } finally {
    if (!streaming) {
      request.signal.removeEventListener("abort", onAbort);
      session.close();
    }
  }
}
