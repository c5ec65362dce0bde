import { duplicates, type ConfigIssue } from "./parse-file.ts";
import type { ScopeLimitsConfig } from "./budget-schema.ts";
import type { GatewayConfig } from "./gateway-schema.ts";
import { splitChargeTo, type PublicationConfig } from "./publication-schema.ts";

const FILE = "publication.yaml";

/**
 * Why a `chargeTo` (`team` or `team/project`) names nothing in a tenant; undefined when its team,
 * and its project when it names one, are the tenant's. For API keys here and OAuth issuers'
 * fixed `chargeTo` (load-config.ts): one check for both kinds of caller.
 */
export function unknownChargeTo(tenant: Pick<PublicationConfig["tenants"][number], "id" | "teams">, chargeTo: string): string | undefined {
  const { team: teamId, project } = splitChargeTo(chargeTo);
  const team = tenant.teams.find((x) => x.id === teamId);
  if (!team) return `tenant "${tenant.id}" has no team "${teamId}"`;
  if (project !== undefined && !team.projects.some((p) => p.id === project)) return `team "${teamId}" has no project "${project}"`;
  return undefined;
}

/**
 * Cross-references of the budget parts of a publication:
 * - `chargeTo` names a team (and project) of the key's own tenant;
 * - the end-user header is a trusted one;
 * - one currency for every money limit, balance and price, because a reservation is priced in the
 *   model's currency and charged against limits in theirs (no exchange rates in a strict ledger);
 * - when any scope has a money limit or a balance, every active model revision has a price, so no
 *   attempt can be admitted against money without a cost;
 * - MCP tool price rules have distinct ids, name configured servers, and share that one currency.
 */
export function checkBudgets(gateway: GatewayConfig, pub: PublicationConfig): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const trusted = new Set(gateway.security.trustedHeaders);
  const currencies = new Map<string, string>();
  let charged = false;
  const limits = (l: ScopeLimitsConfig | undefined, path: string) => {
    if (l?.money) currencies.set(l.money.currency, `${path}.money.currency`);
    if (l?.balance) currencies.set(l.balance.currency, `${path}.balance.currency`);
    if (l?.money || l?.balance) charged = true;
  };
  pub.tenants.forEach((t, ti) => {
    const at = `tenants[${ti}]`;
    limits(t.limits, `${at}.limits`);
    for (const d of duplicates(t.teams.map((x) => x.id))) issues.push({ file: FILE, path: `${at}.teams`, message: `duplicate team id "${d}"` });
    t.teams.forEach((team, i) => {
      limits(team.limits, `${at}.teams[${i}].limits`);
      for (const d of duplicates(team.projects.map((p) => p.id))) issues.push({ file: FILE, path: `${at}.teams[${i}].projects`, message: `duplicate project id "${d}"` });
      team.projects.forEach((p, j) => {
        limits(p.limits, `${at}.teams[${i}].projects[${j}].limits`);
        if (p.taskLimits?.money) limits({ money: { ...p.taskLimits.money, period: 1 } }, `${at}.teams[${i}].projects[${j}].taskLimits`);
      });
    });
    if (t.governance?.taskDefault?.money) limits({ money: { ...t.governance.taskDefault.money, period: 1 } }, `${at}.governance.taskDefault`);
    t.apiKeys.forEach((k, ki) => {
      limits(k.limits, `${at}.apiKeys[${ki}].limits`);
      if (k.requireAttribution?.includes("endUser") && !t.endUsers) {
        issues.push({ file: FILE, path: `${at}.apiKeys[${ki}].requireAttribution`, message: `tenant "${t.id}" has no endUsers header to require` });
      }
      const unknown = k.chargeTo === undefined ? undefined : unknownChargeTo(t, k.chargeTo);
      if (unknown !== undefined) issues.push({ file: FILE, path: `${at}.apiKeys[${ki}].chargeTo`, message: unknown });
    });
    if (t.endUsers) {
      limits(t.endUsers.limits, `${at}.endUsers.limits`);
      if (!trusted.has(t.endUsers.header)) {
        issues.push({ file: FILE, path: `${at}.endUsers.header`, message: `header "${t.endUsers.header}" is not in gateway.yaml security.trustedHeaders` });
      }
    }
  });
  pub.models.forEach((m, mi) =>
    m.revisions.forEach((r, ri) => {
      const path = `models[${mi}].revisions[${ri}]`;
      if (r.price) currencies.set(r.price.currency, `${path}.price.currency`);
      // Only the active revision is ever dispatched, so only it must be priced.
      else if (charged && r.revision === m.activeRevision) issues.push({ file: FILE, path, message: `model ${m.id} revision ${r.revision} needs a price: some scope has a money limit or balance` });
    }),
  );
  const servers = new Set(gateway.mcp.servers.map((m) => m.name));
  const priceRules = pub.mcp?.prices ?? [];
  for (const d of duplicates(priceRules.map((r) => r.id))) issues.push({ file: FILE, path: "mcp.prices", message: `duplicate price rule id "${d}"` });
  priceRules.forEach((r, i) => {
    if (r.price) currencies.set(r.price.currency, `mcp.prices[${i}].price.currency`);
    for (const s of r.servers) if (s !== "*" && !servers.has(s)) issues.push({ file: FILE, path: `mcp.prices[${i}].servers`, message: `gateway.yaml mcp.servers has no server "${s}"` });
  });
  (pub.a2a?.prices ?? []).forEach((r, i) => {
    if (r.price) currencies.set(r.price.currency, `a2a.prices[${i}].price.currency`);
  });
  if (currencies.size > 1) {
    const [, path] = [...currencies.entries()][1]!;
    issues.push({ file: FILE, path, message: `one currency for every budget and price, found ${[...currencies.keys()].join(", ")}` });
  }
  return issues;
}
