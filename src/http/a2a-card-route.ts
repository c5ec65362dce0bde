import type { Hono } from "hono";
import { requestedCardShape, rewriteAgentCard, type GatewaySecurity } from "../a2a/card-rewrite.ts";
import { servableGenerations } from "../protocol/a2a/bridge.ts";
import { authenticateCaller } from "../auth/authenticator-chain.ts";
import { echo } from "../errors/echo.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { Principal } from "../publication/principal.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { presentedCredentials } from "./generation.ts";
import { checkHeaders } from "./limits.ts";

type A2aEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime; requestId: string; receivedAt: number } };

/**
 * Which of an agent's skills a caller may see: the caller's A2A policy (principal × agent ×
 * skill). The route takes it as a parameter so the card endpoint never decides visibility itself.
 */
export type SkillVisibility = (rt: GatewayRuntime, principal: Principal, agent: string) => (skillId: string) => boolean;

/** How long a caller may keep its card; it is the caller's own (skills are filtered for it), so never shared. */
const CARD_CACHE_CONTROL = "private, max-age=60";

/** The gateway's security schemes: API keys always, and each OAuth issuer's OpenID Connect discovery URL when configured. */
function gatewaySecurity(rt: GatewayRuntime): GatewaySecurity {
  const issuers = rt.config.gateway.auth.oauth?.issuers ?? [];
  return { openIdConnectUrls: issuers.map((i) => `${i.issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`) };
}

/**
 * `GET /a2a/<agent>/.well-known/agent-card.json`: the agent's card as the gateway serves it
 * (src/a2a/card-rewrite.ts), for the caller. Authenticated like the model API (an API key or an
 * OAuth access token): a card is per caller here, because its skills are filtered by the caller's
 * policy. The shape follows the caller's `A2A-Version` (none: 0.3). Refusals: no or a bad
 * credential (401), an unknown agent (`agent_not_found`, 404), no good card fetched yet
 * (`agent_card_unavailable`, 503 with `retry-after`). The card is read from the isolate's cache of
 * the agent's registry; the agent itself is never asked on this path.
 */
export function registerA2aCardRoutes(app: Hono<A2aEnv>, skillVisible: SkillVisibility): void {
  app.get("/a2a/:agent/.well-known/agent-card.json", async (c) => {
    const rt = c.get("runtime");
    const request = c.req.raw;
    checkHeaders(request.headers, rt.config.gateway.limits);
    const principal = await authenticateCaller({ publication: rt.publication, oauth: rt.oauth, clock: rt.clock }, presentedCredentials(request.headers), "model");
    const agent = c.req.param("agent");
    if (!rt.agentCards.has(agent)) throw new GatewayError("agent_not_found", `No agent named ${echo(agent)} is configured.`);
    const schedule = (p: Promise<unknown>) => c.executionCtx.waitUntil(p);
    // Reading the card is a use of the agent: its probes start here when it has `healthCheck`.
    rt.agentHealth.forRequest(schedule).status(agent);
    const view = await rt.agentCards.card(agent, schedule);
    if (view === undefined) throw new GatewayError("agent_card_unavailable", `The card of agent ${echo(agent)} has not been fetched yet.`, { retryAfterSeconds: 5 });
    const card = rewriteAgentCard(
      view,
      // `POST /a2a/<agent>` bridges the generation the agent does not speak: the card lists both.
      { agent, publicOrigin: new URL(request.url).origin, skillVisible: skillVisible(rt, principal, agent), security: gatewaySecurity(rt), generations: servableGenerations(view), pushNotifications: rt.pushRelay },
      requestedCardShape(request.headers.get("a2a-version")),
    );
    return c.json(card, 200, { "cache-control": CARD_CACHE_CONTROL, vary: "A2A-Version, Authorization, x-api-key" });
  });
}
