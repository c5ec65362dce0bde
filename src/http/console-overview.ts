/**
 * The console's home page: what the gateway is doing now (this isolate's recent traffic), what
 * it has cost (the ledger's daily rollups), who spends most, which budgets are nearly used up and
 * what waits for a person. Renderers only: src/http/admin-console.ts fetches every figure from the
 * admin API and hands it here, so the page cannot disagree with the API.
 */
import { html, table, type HtmlValue, type SafeHtml } from "./console-html.ts";
import { columnChart, spendSection, type SpendDayView } from "./console-charts.ts";
import { currencyOfMetric, formatCount, formatMoney, timeCell, utilisation } from "./console-format.ts";
import type { BalanceView, TaskRollup } from "./console-pages.ts";
import type { TrafficFigures, TrafficSummary } from "../telemetry/recent-traffic.ts";

/** `GET /admin/traffic`. */
export type TrafficView = TrafficSummary & { readonly minutes: number };

/** One scope of `GET /admin/budgets/:tenant/spend`. */
export interface ScopeSpendView {
  readonly scope: string;
  readonly kind: string;
  readonly requests: number;
  readonly tokens: number;
  readonly cost: readonly { readonly currency: string; readonly micros: number }[];
  readonly models: readonly { readonly model: string; readonly currency: string; readonly requests: number; readonly tokens: number; readonly micros: number }[];
}

/** A limit of one scope and how full it is, for "nearest their limit". */
export interface LimitUse {
  readonly tenant: string;
  readonly scope: string;
  readonly metric: string;
  readonly currency: string | undefined;
  readonly used: number;
  readonly limit: number;
}

/** What waits for a person in one tenant. */
export interface PendingView {
  readonly tenant: string;
  /** Undefined: the tenant's approvals could not be read. */
  readonly approvals: number | undefined;
  /** Undefined: the tenant has no ledger, or it could not be read. */
  readonly reconciliations: number | undefined;
  /** True when the reconciliations counted fill the page read: there may be more. */
  readonly reconciliationsCapped: boolean;
}

const ms = (v: number | undefined) => (v === undefined ? "—" : v >= 10_000 ? `${formatCount(v / 1000)} s` : v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${v} ms`);
const pct = (r: number, requests: number) => (requests === 0 ? "—" : r === 0 ? "0%" : r < 0.001 ? "<0.1%" : `${(r * 100).toFixed(1)}%`);
const q = (o: Record<string, string>) => new URLSearchParams(o).toString();

function figureCells(f: TrafficFigures): HtmlValue[] {
  return [
    formatCount(f.requests),
    formatCount(f.success),
    formatCount(f.errors.client),
    formatCount(f.errors.upstream),
    formatCount(f.errors.gateway),
    formatCount(f.cancelled),
    pct(f.errorRate, f.requests),
    ms(f.latencyMs.p50),
    ms(f.latencyMs.p99),
    ms(f.ttftMs.p50),
    ms(f.ttftMs.p99),
  ];
}

const FIGURE_HEADERS = ["Requests", "OK", "Client errors", "Upstream errors", "Gateway errors", "Cancelled", "Error rate", "p50", "p99", "TTFT p50", "TTFT p99"];

/**
 * This isolate's traffic over its window: requests per minute (errors drawn over them) and, per
 * entrypoint and per backend, counts by outcome and error class with latency and TTFT quantiles.
 */
export function trafficSection(t: TrafficView): SafeHtml {
  const total = t.perMinute.reduce((a, m) => a + m.requests, 0);
  const errors = t.perMinute.reduce((a, m) => a + m.errors, 0);
  const hhmm = (at: number) => new Date(at).toISOString().slice(11, 16);
  const chart = columnChart({
    id: "traffic-per-minute",
    caption: `Requests per minute, last ${t.minutes} minutes (this isolate)`,
    description: `${t.perMinute.length} one-minute columns from ${hhmm(t.perMinute[0]?.at ?? t.from)} to ${hhmm(t.perMinute.at(-1)?.at ?? t.to)} UTC: ${total} requests, ${errors} of them errors (the darker part of each column).`,
    maxLabel: `max ${formatCount(Math.max(0, ...t.perMinute.map((m) => m.requests)))}/min`,
    figcaption: `${formatCount(total)} request${total === 1 ? "" : "s"}, ${formatCount(errors)} error${errors === 1 ? "" : "s"} in ${t.minutes} min`,
    columns: t.perMinute.map((m) => ({ label: hhmm(m.at), value: m.requests, part: m.errors, title: `${hhmm(m.at)} UTC: ${m.requests} requests, ${m.errors} errors, ${m.cancelled} cancelled`, data: { at: m.at, requests: m.requests, errors: m.errors } })),
    labelEvery: 5,
  });
  const perMinute = table(
    ["Minute (UTC)", "Requests", "Errors", "Cancelled"],
    t.perMinute.filter((m) => m.requests > 0).map((m) => [hhmm(m.at), formatCount(m.requests), formatCount(m.errors), formatCount(m.cancelled)]),
    "No requests in the window.",
  );
  return html`<section id="traffic"><h2>Traffic, last ${t.minutes} minutes</h2><p class="note">What this gateway isolate served since ${new Date(t.from).toISOString().slice(11, 16)} UTC: each isolate keeps its own window (the metrics endpoint has every isolate's totals). Latency runs from receipt to the last byte; TTFT to the first content the model produced, successful requests only.</p>${chart}<details><summary>The figures by minute</summary>${perMinute}</details><h3>By entrypoint</h3><div id="traffic-entrypoints">${table(
    ["Entrypoint", ...FIGURE_HEADERS],
    t.entrypoints.map((e) => [e.name, ...figureCells(e)]),
    "No requests in the window.",
  )}</div><h3>By backend</h3><p class="note">Attempts sent to each backend: a retry or a fallback is an attempt of its own.</p><div id="traffic-backends">${table(
    ["Backend", ...FIGURE_HEADERS],
    t.backends.map((b) => [b.name, ...figureCells(b)]),
    "No attempts in the window.",
  )}</div></section>`;
}

function moneyOf(s: ScopeSpendView): string {
  return s.cost.length === 0 ? formatMoney(0, undefined) : s.cost.map((c) => formatMoney(c.micros, c.currency)).join(" + ");
}

/** A scope's own name without its kind (`project:platform/playground` → `platform/playground`). */
const bare = (scope: string) => scope.slice(scope.indexOf(":") + 1);

/**
 * Spend over the last 30 days: every tenant's total, the chosen tenant's spend per day (chart),
 * and its spend by project, model and key, from the ledger's daily rollups.
 */
export function spendOverview(o: {
  readonly tenant: string;
  readonly tenants: readonly { readonly tenant: string; readonly spend: ScopeSpendView | undefined }[];
  readonly days: readonly SpendDayView[] | undefined;
  readonly scopes: readonly ScopeSpendView[] | undefined;
  readonly now: number;
}): SafeHtml {
  const byTenant = table(
    ["Tenant", "Spend", "Requests", "Tokens"],
    o.tenants.map((t) => [html`<a href="/admin/console/overview?${q({ tenant: t.tenant })}">${t.tenant}</a>`, t.spend ? moneyOf(t.spend) : formatMoney(0, undefined), formatCount(t.spend?.requests ?? 0), formatCount(t.spend?.tokens ?? 0)]),
    "No tenant has a budget: spend is kept by the budget ledger.",
  );
  if (o.days === undefined || o.scopes === undefined) return html`<section id="spend"><h2>Spend, last 30 days</h2>${byTenant}</section>`;
  const root = o.scopes.find((s) => s.kind === "tenant");
  const kind = (k: string) => o.scopes!.filter((s) => s.kind === k);
  const scopeRows = (list: readonly ScopeSpendView[]) => list.slice(0, 10).map((s) => [bare(s.scope), moneyOf(s), formatCount(s.requests), formatCount(s.tokens)]);
  const models = table(
    ["Model", "Spend", "Requests", "Tokens"],
    (root?.models ?? []).map((m) => [m.model, formatMoney(m.micros, m.currency), formatCount(m.requests), formatCount(m.tokens)]),
    "No settled spend.",
  );
  return html`<section id="spend"><h2>Spend, last 30 days</h2><p class="note">Settled spend from the budget ledger's daily rollups (whole UTC days, today included); held and pending amounts are on the Budgets page.</p><h3>By tenant</h3><div id="spend-tenants">${byTenant}</div>${spendSection(o.tenant, o.days, o.now, 30, { heading: `${o.tenant}: per day`, foldTable: true })}<div class="cols"><div><h3>By project</h3><div id="spend-projects">${table(["Project", "Spend", "Requests", "Tokens"], scopeRows(kind("project")), "No project spent.")}</div></div><div><h3>By model</h3><div id="spend-models">${models}</div></div><div><h3>Top keys</h3><div id="top-keys">${table(["Key", "Spend", "Requests", "Tokens"], scopeRows(kind("key")), "No key spent.")}</div></div></div></section>`;
}

/** The costliest tasks (the call ledger's rollups). */
export function topTasksSection(tenant: string, tasks: readonly TaskRollup[] | undefined, now: number): SafeHtml {
  const body =
    tasks === undefined
      ? html`<p class="empty">The call ledger could not be read.</p>`
      : table(
          ["Task", "Project", "Cost", "Calls", "Tokens", "Last seen"],
          tasks.map((t) => [
            html`<a href="/admin/console/tasks/${encodeURIComponent(t.taskId)}?${q({ tenant })}">${t.taskId}</a>`,
            t.project ?? "—",
            formatMoney(t.costMicros, t.currency),
            formatCount(t.calls),
            formatCount(t.tokens.input + t.tokens.output),
            timeCell(t.lastSeen, now),
          ]),
          "No tasks yet.",
        );
  return html`<section id="top-tasks"><h2>Top tasks by spend</h2>${body}</section>`;
}

/** Every limited metric of every scope, as used over limit. */
export function limitUses(tenant: string, balances: readonly BalanceView[]): LimitUse[] {
  const out: LimitUse[] = [];
  for (const b of balances) {
    for (const metric of ["money", "tokens", "balance"] as const) {
      const l = b[metric];
      if (!l || !(l.limit > 0)) continue;
      out.push({ tenant, scope: b.scope, metric, currency: "metric" in l ? currencyOfMetric(l.metric) : undefined, used: l.spent + l.held + l.pending, limit: l.limit });
    }
  }
  return out;
}

/** The limits closest to being used up, fullest first. */
export function nearestLimitsSection(uses: readonly LimitUse[], shown = 8): SafeHtml {
  const top = [...uses].sort((a, b) => b.used / b.limit - a.used / a.limit || (a.scope < b.scope ? -1 : 1)).slice(0, shown);
  const f = (u: LimitUse, v: number) => (u.metric === "tokens" ? formatCount(v) : formatMoney(v, u.currency));
  return html`<section id="nearest-limits"><h2>Budgets nearest their limit</h2>${table(
    ["Tenant", "Scope", "Metric", "Used", "Limit", "Full"],
    top.map((u) => [html`<a href="/admin/console/budgets">${u.tenant}</a>`, u.scope, u.metric === "tokens" ? "tokens" : `${u.metric} (${u.currency ?? "—"})`, f(u, u.used), f(u, u.limit), utilisation(u.used, u.limit)]),
    "No budget has a limit.",
  )}<p class="note">Used counts spent, held (reserved by requests in flight) and pending (awaiting reconciliation).</p></section>`;
}

/** Approvals waiting for a decision and attempts waiting for reconciliation, per tenant. */
export function pendingSection(pending: readonly PendingView[]): SafeHtml {
  const count = (n: number | undefined, capped: boolean) => (n === undefined ? "—" : `${formatCount(n)}${capped ? "+" : ""}`);
  return html`<section id="pending"><h2>Waiting for a person</h2>${table(
    ["Tenant", "Pending approvals", "Pending reconciliations"],
    pending.map((p) => [
      p.tenant,
      p.approvals === undefined ? "—" : html`<a href="/admin/console/approvals?${q({ tenant: p.tenant, state: "pending" })}">${count(p.approvals, false)}</a>`,
      count(p.reconciliations, p.reconciliationsCapped),
    ]),
    "No tenants.",
  )}<p class="note">A reconciliation is an attempt whose usage the provider never reported: resolve it with <code>POST /admin/budgets/{tenant}/reconciliations/{attempt}/resolve</code> (docs/budgets.md).</p></section>`;
}
