/**
 * The push relay's inbound request, `POST /a2a/<agent>/push/<sealed>`: an agent's notification for
 * a caller's webhook, through the runner's phases as an operation of the A2A kind. Authenticate
 * opens the sealed address (src/a2a/push-relay.ts) and checks the gateway token the agent was
 * given and the agent the path names: the call is then the registering caller's, for records and
 * policy. Decode reads the notification in the agent's generation; authorize asks today's policy
 * whether the caller may still use the agent; invoke sends it on to the caller's webhook (its URL
 * checked again), in the caller's generation, with the caller's token and authentication — never
 * the agent's credential, which the agent never had from the gateway anyway.
 */

import type { AdmissionLease } from "../../admit/admission.ts";
import { authorizeAgentUse } from "../../auth/a2a-authorize.ts";
import { readNotification, notificationFor, type AgentNotification } from "../../a2a/push-notification.ts";
import { NOTIFICATION_TOKEN_HEADER, type PushRelayDeps } from "../../a2a/push-relay.ts";
import { deliverableUrl, pushUrlError, type PushRelayRecord } from "../../a2a/push-url.ts";
import type { RequestContext } from "../../context/request-context.ts";
import type { TraceParent } from "../../context/trace-context.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import type { StreamEventChain } from "../../plugins/stream-event-chain.ts";
import { agentGenerationFor } from "../../protocol/a2a/bridge.ts";
import type { A2aGeneration, AgentCardView } from "../../protocol/a2a/agent-card.ts";
import type { HeaderReader } from "../../protocol/mcp/stateless-request.ts";
import type { Principal } from "../../publication/principal.ts";
import type { SignalSet } from "../../signals/signal-set.ts";
import type { AdmissionKey, Early, KindTurn, Responded } from "../traffic-kind.ts";
import type { A2aKindDeps } from "./a2a-turn.ts";
import type { A2aDeps } from "./a2a-deps.ts";
import { mapIds, resultIdSlots } from "../../protocol/a2a/id-slots.ts";

/** What the HTTP adapter hands the engine for one relayed notification. */
export interface A2aPushIngress {
  readonly requestId: string;
  readonly receivedAt: number;
  readonly headers: HeaderReader;
  readonly readBody: () => Promise<unknown>;
  readonly traceParent?: TraceParent | undefined;
  readonly waitUntil: (p: Promise<unknown>) => void;
  /** The agent the path names. */
  readonly agent: string;
  /** The sealed record, the path's last segment. */
  readonly sealed: string;
}

/** The answer to the agent: delivered (no content), or a refusal. */
export type A2aPushReply = { readonly kind: "delivered" } | { readonly kind: "error"; readonly error: GatewayError };


/** What a forged, tampered or misdirected relay address is told: nothing about why. */
const unknownRelay = () => new GatewayError("not_found", "No push relay at this address.");

/** Equal strings, compared in time independent of where they differ. */
function sameToken(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/** One relayed notification, as the runner drives it. */
export class A2aPushRelayTurn implements KindTurn<A2aPushReply> {
  readonly kind = "a2a";
  readonly #deps: A2aKindDeps;
  readonly #a2a: A2aDeps;
  readonly #push: PushRelayDeps | undefined;
  readonly #ingress: A2aPushIngress;
  readonly #ctx: RequestContext;
  #record: PushRelayRecord | undefined;
  #card: AgentCardView | undefined;
  #agentGeneration: A2aGeneration = "1.0";
  #notification: AgentNotification | undefined;

  constructor(deps: A2aKindDeps, a2a: A2aDeps, ctx: RequestContext, ingress: A2aPushIngress) {
    this.#deps = deps;
    this.#a2a = a2a;
    this.#push = a2a.push;
    this.#ingress = ingress;
    this.#ctx = ctx;
    ctx.setDeadline(ctx.receivedAt + deps.requestDeadlineMs);
    ctx.record.entrypoint = `a2a/${ingress.agent}`;
    ctx.record.route = "push/relay";
  }

  async authenticate(): Promise<Principal> {
    const push = this.#push;
    const ingress = this.#ingress;
    if (push === undefined || !this.#a2a.cards.has(ingress.agent)) throw unknownRelay();
    const opened = await push.sealer.open(ingress.sealed);
    this.#ctx.checkpoint();
    if (!opened.ok) throw unknownRelay();
    const record = opened.record;
    const presented = ingress.headers.get(NOTIFICATION_TOKEN_HEADER) ?? "";
    // The address names its agent, and only the agent it was given to holds the token: both must match.
    if (record.agent !== ingress.agent || !sameToken(presented, record.gatewayToken)) throw unknownRelay();
    this.#record = record;
    return { tenantId: record.tenant, keyId: record.key };
  }

  async decode(): Promise<Early<A2aPushReply> | undefined> {
    const ctx = this.#ctx;
    const record = this.#record!;
    const card = await this.#a2a.cards.card(record.agent, ctx.waitUntil);
    ctx.checkpoint();
    if (card === undefined) throw new GatewayError("agent_card_unavailable", `The card of agent ${record.agent} has not been fetched yet.`, { retryAfterSeconds: 5 });
    this.#card = card;
    // The generation the agent was registered with: the one the gateway speaks to it for this caller.
    this.#agentGeneration = agentGenerationFor(card, record.generation) ?? record.generation;
    const body = await this.#ingress.readBody();
    ctx.checkpoint();
    ctx.record.a2a = { method: "push/relay", jsonrpcId: "", generation: this.#agentGeneration, agent: record.agent, skill: undefined };
    const n = readNotification(this.#agentGeneration, body);
    this.#notification = n;
    if (n.taskId !== "") ctx.record.a2a.a2aTaskId = n.taskId.slice(0, 256);
    return undefined;
  }

  async authorize(): Promise<Early<A2aPushReply> | undefined> {
    const record = this.#record!;
    // An API key revoked or disabled since it registered stops its webhooks (an OAuth subject has no entry here: the policy decides).
    const key = this.#deps.publication.source.tenants.find((t) => t.id === record.tenant)?.apiKeys.find((k) => k.id === record.key);
    if (key !== undefined && (key.revokedAt !== undefined || key.disabled)) throw new GatewayError("tool_not_allowed", `The key that registered this push config is no longer active: agent ${record.agent}'s notifications for it are not relayed.`);
    authorizeAgentUse(this.#a2a.policy, { tenant: record.tenant, key: record.key }, record.agent, this.#card!.skills.map((s) => s.id), this.#ctx.record.a2a);
    return undefined;
  }

  async decide(_signals: SignalSet): Promise<Early<A2aPushReply> | undefined> {
    return undefined;
  }

  async reserve(): Promise<void> {}

  admission(): AdmissionKey {
    return { tenant: this.#record!.tenant, model: `a2a:${this.#record!.agent}` };
  }

  async invoke(_lease: AdmissionLease | undefined): Promise<void> {
    const record = this.#record!;
    const push = this.#push!;
    // Checked again: the policy or the operator's list may have changed since registration.
    const verdict = deliverableUrl(record, push.egress, push.allowOrigins);
    if (!verdict.ok) throw pushUrlError(verdict.refusal, "url");
    const payload = notificationFor(this.#notification!, this.#agentGeneration, record.generation);
    // The caller holds the task and context ids the gateway bound for it, so those are the ones its webhook is shown.
    const ids = this.#a2a.ids.forOwner({ tenant: record.tenant, key: record.key, agent: record.agent });
    await mapIds(resultIdSlots(payload), (kind, id) => ids.bind(kind, id));
    const headers: Record<string, string> = { "content-type": record.generation === "1.0" ? "application/a2a+json" : "application/json" };
    if (record.token !== undefined) headers[NOTIFICATION_TOKEN_HEADER] = record.token;
    if (record.authentication !== undefined) headers.authorization = record.authentication.credentials === undefined ? record.authentication.scheme : `${record.authentication.scheme} ${record.authentication.credentials}`;
    const a2aRecord = this.#ctx.record.a2a;
    let res: Response;
    try {
      if (a2aRecord) a2aRecord.sent = true;
      res = await this.#a2a.network.fetch(verdict.url, { method: "POST", headers, body: JSON.stringify(payload), redirect: "manual", signal: this.#ctx.signal });
    } catch (err) {
      if (this.#ctx.signal.aborted) throw err;
      throw new GatewayError("upstream_unreachable", "The caller's push notification webhook could not be reached.", { cause: err });
    }
    await res.body?.cancel().catch(() => undefined);
    if (!res.ok) throw new GatewayError("upstream_error", `The caller's push notification webhook answered ${res.status}.`);
  }

  respond(_events: StreamEventChain | undefined): Responded<A2aPushReply> {
    return { reply: { kind: "delivered" }, streaming: false };
  }

  failed(error: GatewayError, _thrown: unknown): A2aPushReply {
    return { kind: "error", error };
  }
}
