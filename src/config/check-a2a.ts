import { CONFIG_FILES, duplicates, type ConfigIssue } from "./parse-file.ts";
import type { PublicationConfig } from "./publication-schema.ts";

const file = CONFIG_FILES.publication;

/**
 * The publication's `a2a` section on its own and against the trusted headers: unique rule ids and
 * route names, and every route's `affinityHeader` trusted — a header a client may set freely
 * would let it pick the agent of another caller's session.
 */
export function checkA2aPublication(pub: PublicationConfig, trustedHeaders: ReadonlySet<string>): ConfigIssue[] {
  const a2a = pub.a2a;
  if (a2a === undefined) return [];
  const issues: ConfigIssue[] = [
    ...duplicates(a2a.policy.rules.map((r) => r.id)).map((d) => ({ file, path: "a2a.policy.rules", message: `duplicate rule id "${d}"` })),
    ...duplicates(a2a.prices.map((r) => r.id)).map((d) => ({ file, path: "a2a.prices", message: `duplicate price rule id "${d}"` })),
    ...duplicates(a2a.routes.map((r) => r.name)).map((d) => ({ file, path: "a2a.routes", message: `duplicate route "${d}"` })),
  ];
  a2a.routes.forEach((r, i) => {
    if (r.affinityHeader !== undefined && !trustedHeaders.has(r.affinityHeader)) {
      issues.push({ file, path: `a2a.routes[${i}].affinityHeader`, message: `header "${r.affinityHeader}" is not in gateway.yaml security.trustedHeaders` });
    }
  });
  return issues;
}

/**
 * Every agent the publication's `a2a` section names (policy rules, price rules, routes) must be
 * one gateway.yaml `a2a.agents` declares; `*` names any.
 */
export function checkA2aAgentNames(pub: PublicationConfig, agents: ReadonlySet<string>): ConfigIssue[] {
  const a2a = pub.a2a;
  if (a2a === undefined) return [];
  const issues: ConfigIssue[] = [];
  const check = (names: readonly string[], path: string) =>
    names.forEach((name, j) => {
      if (name !== "*" && !agents.has(name)) issues.push({ file, path: `${path}[${j}]`, message: `unknown agent "${name}" (gateway.yaml a2a.agents)` });
    });
  a2a.policy.rules.forEach((r, i) => check(r.agents, `a2a.policy.rules[${i}].agents`));
  a2a.prices.forEach((r, i) => check(r.agents, `a2a.prices[${i}].agents`));
  a2a.routes.forEach((r, i) => check(r.agents, `a2a.routes[${i}].agents`));
  return issues;
}
