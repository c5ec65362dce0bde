import type { CompiledCondition, CompiledEntrypoint } from "../publication/compile-publication.ts";
import type { RequestFacts } from "./request-facts.ts";

/** Whether every condition of a rule holds for these facts. */
export function conditionHolds(when: CompiledCondition, facts: RequestFacts): boolean {
  if (when.keywords && !when.keywords.test(facts.lastUserText)) return false;
  if (when.regex && !when.regex.test(facts.lastUserText)) return false;
  if (when.promptTokensAbove !== undefined && !(facts.estimatedPromptTokens > when.promptTokensAbove)) return false;
  if (when.promptTokensAtMost !== undefined && !(facts.estimatedPromptTokens <= when.promptTokensAtMost)) return false;
  if (when.toolsPresent !== undefined && facts.toolsPresent !== when.toolsPresent) return false;
  if (when.imagesPresent !== undefined && facts.imagesPresent !== when.imagesPresent) return false;
  if (when.header) {
    const v = facts.trustedHeaders.get(when.header.name);
    if (v === undefined || !when.header.values.has(v)) return false;
  }
  return true;
}

/** First matching rule wins; otherwise the entrypoint's default tiers. */
export function decide(ep: CompiledEntrypoint, facts: RequestFacts): { route: string; tiers: readonly (readonly string[])[] } {
  for (const r of ep.routes) if (conditionHolds(r.when, facts)) return { route: r.name, tiers: r.tiers };
  return { route: "default", tiers: ep.defaultTiers };
}
