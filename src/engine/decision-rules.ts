import type { EntrypointConfig, RouteCondition } from "../config/publication-schema.ts";
import type { RequestFacts } from "./request-facts.ts";

/** A compiled decision rule: a predicate over request facts and the tiers it selects. */
export interface CompiledRoute {
  readonly name: string;
  readonly matches: (facts: RequestFacts) => boolean;
  readonly tiers: readonly (readonly string[])[];
}

const escapeRegex = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** Compiles a rule's conditions once, at config load; every given condition must hold. */
export function compileCondition(when: RouteCondition): (facts: RequestFacts) => boolean {
  const tests: ((f: RequestFacts) => boolean)[] = [];
  if (when.keywords) {
    const re = new RegExp(`(?:^|\\W)(?:${when.keywords.map(escapeRegex).join("|")})(?:$|\\W)`, "iu");
    tests.push((f) => re.test(f.lastUserText));
  }
  if (when.regex) {
    const re = new RegExp(when.regex.pattern, when.regex.flags);
    tests.push((f) => re.test(f.lastUserText));
  }
  if (when.promptTokensAbove !== undefined) {
    const n = when.promptTokensAbove;
    tests.push((f) => f.estimatedPromptTokens > n);
  }
  if (when.promptTokensAtMost !== undefined) {
    const n = when.promptTokensAtMost;
    tests.push((f) => f.estimatedPromptTokens <= n);
  }
  if (when.toolsPresent !== undefined) {
    const want = when.toolsPresent;
    tests.push((f) => f.toolsPresent === want);
  }
  if (when.imagesPresent !== undefined) {
    const want = when.imagesPresent;
    tests.push((f) => f.imagesPresent === want);
  }
  if (when.header) {
    const { name, in: values } = when.header;
    const allowed = new Set(values);
    tests.push((f) => {
      const v = f.trustedHeaders.get(name);
      return v !== undefined && allowed.has(v);
    });
  }
  return (facts) => tests.every((t) => t(facts));
}

export function compileRoutes(ep: EntrypointConfig): CompiledRoute[] {
  return ep.routes.map((r) => ({ name: r.name, matches: compileCondition(r.when), tiers: r.models }));
}

/** First matching rule wins; otherwise the entrypoint's default tiers. */
export function decide(
  routes: readonly CompiledRoute[],
  defaultTiers: readonly (readonly string[])[],
  facts: RequestFacts,
): { route: string; tiers: readonly (readonly string[])[] } {
  for (const r of routes) if (r.matches(facts)) return { route: r.name, tiers: r.tiers };
  return { route: "default", tiers: defaultTiers };
}
