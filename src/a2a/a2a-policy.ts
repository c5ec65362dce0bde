import type { A2aPriceRuleConfig } from "../config/tool-price-schema.ts";
import { ToolPolicy, type A2aPolicyConfig, type PolicyDecision } from "../mcp/tool-policy.ts";
import { ToolPrices, type ToolPricing } from "../publication/tool-prices.ts";

/**
 * The publication's A2A policy and prices (`a2a.policy`, `a2a.prices`), compiled once per
 * publication. Decisions come from the MCP policy's matcher, so an agent's skill is allowed,
 * denied or held for approval exactly as a tool is, and every decision names its rule, the
 * policy revision and the reason.
 */

/** Who asks: the authenticated principal's tenant and key ids. */
export interface A2aCaller {
  readonly tenant: string;
  readonly key: string;
}

/** The decision on one message to one agent. */
export interface A2aDecision extends PolicyDecision {
  /** The skill decided on; undefined when the message named none and every declared skill was. */
  readonly skill: string | undefined;
}

/**
 * The skill asked for when a message names none and its agent declares no skills: only a rule
 * whose skills include `*` covers it, since nothing narrower could.
 */
const ANY_SKILL = "*";

/** A compiled A2A policy and price list. */
export class A2aPolicy {
  readonly #policy: ToolPolicy;
  readonly #prices: ToolPrices;

  constructor(policy: A2aPolicyConfig | undefined, prices: readonly A2aPriceRuleConfig[] = []) {
    // Without `a2a.policy` nothing is allowed: deny by default, as for MCP.
    this.#policy = new ToolPolicy({ a2a: policy ?? { revision: "none", rules: [] } });
    this.#prices = new ToolPrices(prices.map((r) => ({ ...r, servers: r.agents, names: r.skills })));
  }

  get revision(): string {
    return this.#policy.revision;
  }

  /**
   * May the caller send this message to this agent? With a skill (the one routing matched, or
   * the one the message names), that skill is decided. Without one the agent may use any skill it
   * declares, so every declared skill must be allowed: the first refusal refuses the message, and
   * an approval any of them needs is needed. An agent that declares none needs a rule for `*`.
   */
  decide(caller: A2aCaller, agent: string, skill: string | undefined, declaredSkills: readonly string[] = []): A2aDecision {
    if (skill !== undefined) return { ...this.#ask(caller, agent, skill), skill };
    const skills = declaredSkills.length === 0 ? [ANY_SKILL] : declaredSkills;
    let allowed: PolicyDecision | undefined;
    for (const s of skills) {
      const d = this.#ask(caller, agent, s);
      if (!d.allowed) return { ...d, reason: skills.length > 1 || s !== ANY_SKILL ? `skill ${JSON.stringify(s)}: ${d.reason}` : d.reason, skill: undefined };
      if (allowed === undefined || (d.approval === "required" && allowed.approval === undefined)) allowed = d;
    }
    return { ...allowed!, skill: undefined };
  }

  /**
   * Whether the caller may see this skill on the agent's card: a skill no call of which the
   * caller could make is absent from its card (a deny rule, or no allow rule).
   */
  skillVisible(caller: A2aCaller, agent: string, skillId: string): boolean {
    return this.#policy.visible({ tenant: caller.tenant, key: caller.key, server: agent, kind: "skill", name: skillId }).allowed;
  }

  /** The price and call-rate limit of a call (first matching `a2a.prices` rule); undefined: free and unlimited. */
  pricing(agent: string, skill: string | undefined): ToolPricing | undefined {
    return this.#prices.of(agent, skill ?? ANY_SKILL);
  }

  /** True when no rule prices or limits anything: no A2A call needs the ledger. */
  get unpriced(): boolean {
    return this.#prices.empty;
  }

  #ask(caller: A2aCaller, agent: string, skill: string): PolicyDecision {
    return this.#policy.decide({ tenant: caller.tenant, key: caller.key, server: agent, kind: "skill", name: skill }, undefined);
  }
}

/** The card endpoint's filter: whether the caller may see a skill (see {@link A2aPolicy.skillVisible}). */
export function a2aSkillVisible(policy: A2aPolicy, caller: A2aCaller, agent: string, skillId: string): boolean {
  return policy.skillVisible(caller, agent, skillId);
}
