import type { A2aPolicy } from "../../a2a/a2a-policy.ts";
import type { A2aRouter } from "../../a2a/a2a-routing.ts";
import type { ApprovalDeps } from "../../approvals/approval-desk-rpc.ts";
import type { A2aIdBinding } from "../../a2a/task-binding.ts";
import type { PushRelayDeps } from "../../a2a/push-relay.ts";
import type { A2aNetwork } from "../../invoker/a2a-exchange.ts";
import type { AgentCardView } from "../../protocol/a2a/agent-card.ts";
import type { Schedule } from "../../traffic/remote-view-cache.ts";

/** The agents' cards as the kind reads them (the isolate's card cache). */
export interface AgentCards {
  has(agent: string): boolean;
  /** The configured agents' names. */
  agents(): readonly string[];
  /** The agent's last good card; undefined: none fetched yet. */
  card(agent: string, schedule: Schedule): Promise<AgentCardView | undefined>;
}

/** The A2A agents and the policy an engine serves with: the policy is the revision's, the rest the isolate's. */
export interface A2aDeps {
  readonly cards: AgentCards;
  readonly policy: A2aPolicy;
  /** The credential header the gateway sends to an agent (from gateway.yaml, read per call); none: `{}`. */
  readonly credential: (agent: string) => Readonly<Record<string, string>>;
  readonly network: A2aNetwork;
  /** Binds the agents' task and context ids to the callers they are handed to (`a2a.stateSecret`). */
  readonly ids: A2aIdBinding;
  /** The revision's routes for the virtual agent `/a2a`, over the isolate's affinity table. */
  readonly router: A2aRouter;
  /** Whether an agent may be routed to now (its health monitor's cached view; probes start on first ask). */
  readonly isHealthy: (agent: string, schedule: Schedule) => boolean;
  /** The push-notification relay (gateway.yaml `a2a.push`); undefined: push configs are refused. */
  readonly push?: PushRelayDeps | undefined;
  /** The approval desk messages whose rule requires approval wait at (the MCP tool calls' own); absent: such messages are refused. */
  readonly approvals?: ApprovalDeps | undefined;
}
