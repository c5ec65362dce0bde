/**
 * The authorize phase of A2A calls: the publication's A2A policy (src/a2a/a2a-policy.ts, the MCP
 * policy's rule language) asked about principal × agent × skill. Every decision is recorded on the
 * request's A2A record before a refusal is thrown, so a refusal is audited like an allowance.
 */

import type { A2aCaller, A2aDecision, A2aPolicy } from "../a2a/a2a-policy.ts";
import type { A2aRecord } from "../context/request-record.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { PolicyDecision } from "../mcp/tool-policy.ts";

function note(record: A2aRecord | undefined, d: PolicyDecision): void {
  if (record) record.decision = { allowed: d.allowed, rule: d.rule, policyRevision: d.policyRevision, reason: d.reason };
}

/**
 * A message to an agent: the skill it names (which the agent must declare), or — naming none —
 * every skill the agent declares, since it may use any. Refused as `tool_not_allowed` when the
 * policy does; a decision that requires approval is answered for decide's approval gate
 * (src/decide/agent-approval-gate.ts), which holds the message until a human approves it.
 */
export function authorizeMessage(policy: A2aPolicy, caller: A2aCaller, agent: string, skill: string | undefined, declared: readonly string[], record: A2aRecord | undefined): A2aDecision {
  if (skill !== undefined && declared.length > 0 && !declared.includes(skill)) {
    throw new GatewayError("invalid_request", `Agent ${agent} declares no skill ${JSON.stringify(skill.slice(0, 64))}.`, { param: "params.message.metadata.skill" });
  }
  const d = policy.decide(caller, agent, skill, declared);
  note(record, d);
  if (!d.allowed) throw new GatewayError("tool_not_allowed", `The message to agent ${agent} is not allowed: ${d.reason} (policy ${d.policyRevision}).`, { param: skill === undefined ? "params.message" : "params.message.metadata.skill" });
  return d;
}

/**
 * A request about the agent's tasks: the caller must be allowed some skill
 * of the agent (the first allowed one is recorded); the task's own skill is not known here.
 */
export function authorizeAgentUse(policy: A2aPolicy, caller: A2aCaller, agent: string, declared: readonly string[], record: A2aRecord | undefined): void {
  let last: PolicyDecision | undefined;
  for (const skill of declared.length === 0 ? [undefined] : declared) {
    const d = policy.decide(caller, agent, skill, declared);
    last = d;
    if (d.allowed) {
      note(record, d);
      return;
    }
  }
  note(record, last!);
  throw new GatewayError("tool_not_allowed", `Agent ${agent} is not available to this caller: ${last!.reason} (policy ${last!.policyRevision}).`);
}
