import { checkRequestPushConfig, isPushConfigMethod, mapConfigAnswer, pushConfigOfRequest, relayRequestParams, type PushRelayDeps, type RelayRegistration } from "../../a2a/push-relay.ts";
import type { A2aAnswer } from "../../invoker/a2a-exchange.ts";
import type { A2aRequest } from "../../protocol/a2a/a2a-request.ts";
import type { A2aJsonRpcRequest } from "../../protocol/a2a/bridge.ts";

/**
 * How an A2A call takes part in the push relay (src/a2a/push-relay.ts): its push config checked at
 * decode, replaced by the relay's before it is sent, and the agent's answers about configs mapped
 * back to the caller's view. Hooks the A2A turn calls; the relay's own inbound request is
 * src/kinds/a2a/push-relay-turn.ts.
 */

/** Decode: a push config the caller's request carries is refused now if it could not be relayed. */
export function checkPushAtDecode(push: PushRelayDeps | undefined, req: A2aRequest): void {
  checkRequestPushConfig(push, req.method, req.generation, req.params);
}

/** Where a call is sent and for whom: what a relayed config is sealed with. */
export type PushCallFacts = RelayRegistration;

/** Invoke, before sending: the request as the agent gets it, with the relay's config in place of the caller's. */
export async function relayedRequest(push: PushRelayDeps | undefined, request: A2aJsonRpcRequest, facts: PushCallFacts): Promise<A2aJsonRpcRequest> {
  const params = (request.params ?? {}) as Readonly<Record<string, unknown>>;
  if (push === undefined || pushConfigOfRequest(request.method, params) === undefined) return request;
  return { ...request, params: await relayRequestParams(push, request.method, params, facts) };
}

/** Invoke, after the answer: a push-config method's answer as the caller may see it (still in the agent's generation). */
export async function answerForCaller(push: PushRelayDeps | undefined, method: string, answer: A2aAnswer, facts: PushCallFacts): Promise<A2aAnswer> {
  if (push === undefined || answer.kind !== "json" || !isPushConfigMethod(method)) return answer;
  // Its task ids are bound to the caller with every other answer's, once in the caller's generation.
  const body = await mapConfigAnswer(push, { caller: facts.caller, agent: facts.agent, origin: facts.origin, generation: facts.agentGeneration }, method, answer.body);
  return { ...answer, body };
}
