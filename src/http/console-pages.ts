import type { A2aAgentStatus } from "../a2a/agent-health.ts";
import type { KeyView } from "../publication-lifecycle/key-operations.ts";
import { currencyOfMetric, formatCount, formatMoney, relativeTime, timeCell, utilisation } from "./console-format.ts";
import { html, table, type HtmlValue, type SafeHtml } from "./console-html.ts";

// The shapes the admin API answers (docs/governance.md). The console renders them as they come; a
// field an older gateway lacks renders as a dash rather than failing the page.

/** A task's rollup, as `GET /admin/tasks` answers it. */
export interface TaskRollup {
  readonly taskId: string;
  readonly tenant: string;
  readonly project?: string;
  readonly parentTaskId?: string;
  readonly children?: readonly string[];
  readonly firstSeen: number;
  readonly lastSeen: number;
  readonly calls: number;
  readonly attempts: number;
  readonly retries: number;
  readonly fallbacks: number;
  readonly unknownUsageAttempts: number;
  readonly costMicros: number;
  readonly currency: string;
  readonly tokens: { readonly input: number; readonly output: number };
  readonly byModel?: Readonly<Record<string, { readonly calls: number; readonly costMicros: number; readonly tokens: { readonly input: number; readonly output: number } }>>;
  readonly toolCalls?: Readonly<Record<string, number>>;
  readonly approvals?: { readonly requested: number; readonly granted: number; readonly denied: number; readonly expired: number; readonly waitedMs: number };
  readonly sessions: number;
  readonly turns: number;
  readonly outcome?: { readonly status: string; readonly evidence: string; readonly at: number; readonly verifier: string };
}

/** One call of a task, as `GET /admin/tasks/:taskId` answers it. */
export interface CallRecord {
  readonly callId: string;
  readonly at: number;
  readonly endedAt: number;
  readonly kind: string;
  readonly key: string;
  /** The team or `team/project` the call was charged to. */
  readonly chargeTo?: string;
  readonly sessionId?: string;
  readonly turnId?: string;
  readonly target: string;
  readonly outcome: string;
  readonly errorCode?: string;
  readonly costMicros: number;
  readonly attempts?: readonly { readonly attemptId: string; readonly backend?: string; readonly outcome: string; readonly usage: string; readonly costMicros: number }[];
}

/** A pending or decided approval, as `GET /admin/approvals` answers it. */
export interface Approval {
  readonly id: string;
  readonly tenant: string;
  readonly state: string;
  readonly principal?: { readonly tenant: string; readonly key: string };
  readonly taskId?: string;
  /** `agent`: a message to an A2A agent (server: the agent, tool: the skill); absent: an MCP tool call. */
  readonly kind?: string;
  readonly server: string;
  readonly tool: string;
  readonly toolDigest: string;
  readonly argumentsDigest: string;
  readonly policyRevision: string;
  readonly createdAt: number | string;
  readonly expiresAt: number | string;
  readonly decidedAt?: number | string;
  readonly decidedBy?: string;
  readonly reason?: string;
  readonly statusUrl?: string;
}

/** An audit event: only the fields the console shows are named; the rest is shown field by field. */
export interface AuditEventView {
  readonly type: string;
  readonly at?: number | string;
  readonly [field: string]: unknown;
}

/** A timestamp (ms since the epoch or an ISO string): how long ago, and the UTC time. */
export function when(t: number | string | undefined): SafeHtml {
  return timeCell(t, Date.now());
}

/** Micro-units of a currency as people read money (`$1,000.00`, `$0.000045`). */
export function money(micros: number | undefined, currency: string | undefined): string {
  return formatMoney(micros, currency);
}

function n(v: number | undefined): HtmlValue {
  return formatCount(v);
}

function q(params: Record<string, string>): string {
  return new URLSearchParams(params).toString();
}

/** The tenant picker: a plain GET form, no script. */
export function tenantPicker(action: string, tenants: readonly string[], current: string, extra: SafeHtml = html``): SafeHtml {
  return html`<form method="get" action="${action}" class="inline"><label>Tenant <select name="tenant">${tenants.map(
    (t) => html`<option value="${t}"${t === current ? html` selected` : ""}>${t}</option>`,
  )}</select></label>${extra}<button type="submit">Show</button></form>`;
}

/** The approvals inbox: each pending approval with approve and deny forms that take a reason. */
export function approvalsSection(approvals: readonly Approval[], tenant: string, csrf: string): SafeHtml {
  return table(
    ["Approval", "State", "Principal", "Task", "Server", "Tool", "Arguments digest", "Created", "Expires", "Decided", "Decision"],
    approvals.map((a) => [
      html`<a href="/admin/console/approvals/${encodeURIComponent(a.id)}?${q({ tenant })}"><code>${a.id}</code></a>`,
      html`<span class="state" data-state="${a.state}">${a.state}</span>`,
      a.principal ? `${a.principal.tenant} / ${a.principal.key}` : "—",
      a.taskId ? html`<a href="/admin/console/tasks/${encodeURIComponent(a.taskId)}?${q({ tenant })}">${a.taskId}</a>` : "—",
      a.kind === "agent" ? `${a.server} (agent)` : a.server,
      a.kind === "agent" ? `${a.tool} (skill)` : a.tool,
      html`<code>${a.argumentsDigest}</code>`,
      when(a.createdAt),
      when(a.expiresAt),
      a.decidedAt === undefined ? "—" : html`${when(a.decidedAt)} by ${a.decidedBy ?? "—"}${a.reason ? html`: ${a.reason}` : ""}`,
      a.state === "pending" ? decisionForms(a.id, tenant, csrf) : "—",
    ]),
    "No approvals in this state.",
  );
}

function decisionForms(id: string, tenant: string, csrf: string): SafeHtml {
  const action = `/admin/console/approvals/${encodeURIComponent(id)}/decide`;
  return html`<form method="post" action="${action}" class="inline decide"><input type="hidden" name="csrf" value="${csrf}"><input type="hidden" name="tenant" value="${tenant}"><input type="text" name="reason" placeholder="reason" required maxlength="1024" aria-label="reason for ${id}"><button type="submit" name="decision" value="approve">Approve</button><button type="submit" name="decision" value="deny">Deny</button></form>`;
}

/** One approval in full, with the decision forms while it is pending (and revoke once approved). */
export function approvalDetail(a: Approval, tenant: string, csrf: string): SafeHtml {
  const rows: [string, HtmlValue][] = [
    ["Id", html`<code>${a.id}</code>`],
    ["State", html`<span class="state" data-state="${a.state}">${a.state}</span>`],
    ["Tenant", a.tenant],
    ["Principal", a.principal ? `${a.principal.tenant} / ${a.principal.key}` : "—"],
    ["Task", a.taskId ?? "—"],
    ["Server", a.kind === "agent" ? `${a.server} (agent)` : a.server],
    ["Tool", a.kind === "agent" ? `${a.tool} (skill)` : a.tool],
    ["Tool digest", html`<code>${a.toolDigest}</code>`],
    ["Arguments digest", html`<code>${a.argumentsDigest}</code>`],
    ["Policy revision", a.policyRevision],
    ["Created", when(a.createdAt)],
    ["Expires", when(a.expiresAt)],
    ["Decided", when(a.decidedAt)],
    ["Decided by", a.decidedBy ?? "—"],
    ["Reason", a.reason ?? "—"],
  ];
  const revoke =
    a.state === "approved"
      ? html`<form method="post" action="/admin/console/approvals/${encodeURIComponent(a.id)}/decide" class="inline"><input type="hidden" name="csrf" value="${csrf}"><input type="hidden" name="tenant" value="${tenant}"><input type="text" name="reason" placeholder="reason" required maxlength="1024"><button type="submit" name="decision" value="revoke">Revoke</button></form>`
      : "";
  return html`${table(["Field", "Value"], rows)}${a.state === "pending" ? decisionForms(a.id, tenant, csrf) : revoke}`;
}

/** The tasks list with their rollups. */
/**
 * The tasks list with their rollups: what fits a 1280-px window (the parent, first-seen time and
 * unknown-usage count are on the task's own page).
 */
export function tasksSection(tasks: readonly TaskRollup[], tenant: string): SafeHtml {
  return table(
    ["Task", "Project", "Last seen", "Sessions", "Turns", "Calls", "Attempts", "Retries", "Fallbacks", "Cost", "Tokens in", "Tokens out", "Outcome"],
    tasks.map((t) => [
      html`<a href="/admin/console/tasks/${encodeURIComponent(t.taskId)}?${q({ tenant })}">${t.taskId}</a>`,
      t.project ?? "—",
      when(t.lastSeen),
      n(t.sessions),
      n(t.turns),
      n(t.calls),
      n(t.attempts),
      n(t.retries),
      n(t.fallbacks),
      money(t.costMicros, t.currency),
      n(t.tokens?.input),
      n(t.tokens?.output),
      t.outcome ? `${t.outcome.status} (${t.outcome.verifier})` : "—",
    ]),
    "No tasks recorded for this tenant.",
  );
}

/** One task: its rollup field by field, by model and tool, and every call with its attempts. */
export function taskDetail(t: TaskRollup, calls: readonly CallRecord[], tenant: string): SafeHtml {
  const link = (id: string) => html`<a href="/admin/console/tasks/${encodeURIComponent(id)}?${q({ tenant })}">${id}</a>`;
  const rollup: [string, HtmlValue][] = [
    ["Task", t.taskId],
    ["Tenant", t.tenant],
    ["Project", t.project ?? "—"],
    ["Parent", t.parentTaskId ? link(t.parentTaskId) : "—"],
    ["Children", (t.children ?? []).length === 0 ? "—" : (t.children ?? []).map((c) => html`${link(c)} `)],
    ["First seen", when(t.firstSeen)],
    ["Last seen", when(t.lastSeen)],
    ["Sessions", n(t.sessions)],
    ["Turns", n(t.turns)],
    ["Calls", n(t.calls)],
    ["Attempts", n(t.attempts)],
    ["Retries", n(t.retries)],
    ["Fallbacks", n(t.fallbacks)],
    ["Unknown-usage attempts", n(t.unknownUsageAttempts)],
    ["Cost", money(t.costMicros, t.currency)],
    ["Cost (micros)", n(t.costMicros)],
    ["Tokens in", n(t.tokens?.input)],
    ["Tokens out", n(t.tokens?.output)],
    ["Approvals", t.approvals ? `requested ${t.approvals.requested}, granted ${t.approvals.granted}, denied ${t.approvals.denied}, expired ${t.approvals.expired}, waited ${t.approvals.waitedMs} ms` : "—"],
    ["Outcome", t.outcome ? html`${t.outcome.status}: ${t.outcome.evidence} (by ${t.outcome.verifier}, ${when(t.outcome.at)})` : "—"],
  ];
  const byModel = Object.entries(t.byModel ?? {}).map(([m, v]) => [m, n(v.calls), money(v.costMicros, t.currency), n(v.tokens?.input), n(v.tokens?.output)]);
  const tools = Object.entries(t.toolCalls ?? {}).map(([tool, count]) => [tool, n(count)]);
  const callRows = calls.map((c) => [
    html`<code>${c.callId}</code>`,
    when(c.at),
    c.kind,
    c.chargeTo ? `${c.key} (${c.chargeTo})` : c.key,
    c.sessionId ?? "—",
    c.turnId ?? "—",
    c.target,
    c.errorCode ? `${c.outcome} (${c.errorCode})` : c.outcome,
    n(c.costMicros),
    table(
      ["Attempt", "Backend", "Outcome", "Usage", "Cost (micros)"],
      (c.attempts ?? []).map((a) => [html`<code>${a.attemptId}</code>`, a.backend ?? "—", a.outcome, a.usage, n(a.costMicros)]),
      "No attempts.",
    ),
  ]);
  return html`<section id="rollup"><h2>Rollup</h2>${table(["Field", "Value"], rollup)}</section><section id="by-model"><h2>By model</h2>${table(["Model", "Calls", "Cost", "Tokens in", "Tokens out"], byModel, "No model calls.")}</section><section id="tool-calls"><h2>Tool calls</h2>${table(["Tool", "Calls"], tools, "No tool calls.")}</section><section id="calls"><h2>Calls</h2>${table(["Call", "At", "Kind", "Key (charged to)", "Session", "Turn", "Target", "Outcome", "Cost (micros)", "Attempts"], callRows, "No calls.")}</section>`;
}

/** The newest audit events, one row each, with the fields beyond type and time as a list of fields. */
export function auditSection(events: readonly AuditEventView[]): SafeHtml {
  return table(
    ["At", "Type", "Details"],
    events.map((e) => {
      const { type, at, ...rest } = e;
      // The call an event belongs to opens in the request log.
      const call = typeof e.callId === "string" && typeof e.tenant === "string" ? html`<a href="/admin/console/requests/${encodeURIComponent(e.callId)}?${q({ tenant: e.tenant })}">${e.callId}</a>` : undefined;
      const entries = Object.entries(rest).filter(([, v]) => v !== undefined);
      return [when(at), type, entries.length === 0 ? "—" : definitions(entries.map(([k, v]) => [k, k === "callId" && call ? call : fieldsOf(v)] as const))];
    }),
    "No audit events.",
  );
}

/** Field names and values as a definition list. */
export function definitions(fields: readonly (readonly [string, HtmlValue])[]): SafeHtml {
  return html`<dl class="fields">${fields.map(([k, v]) => html`<dt>${k}</dt><dd>${v}</dd>`)}</dl>`;
}

/**
 * A JSON value as fields a person reads: an object's fields as a definition list (nested ones
 * nested), a list as its items joined, text and numbers as they are; absent fields left out.
 */
export function fieldsOf(value: unknown): HtmlValue {
  if (value === null || value === undefined) return "—";
  if (Array.isArray(value)) return value.length === 0 ? "—" : value.every((v) => typeof v !== "object" || v === null) ? value.join(", ") : value.map((v) => fieldsOf(v));
  if (typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    return entries.length === 0 ? "—" : definitions(entries.map(([k, v]) => [k, fieldsOf(v)] as const));
  }
  return String(value);
}

interface LimitView {
  readonly limit: number;
  readonly spent: number;
  readonly held: number;
  readonly pending: number;
  readonly remaining: number;
}
/** One scope's balance, as `GET /admin/budgets/:tenant/balance` answers it. */
export interface BalanceView {
  readonly scope: string;
  readonly money?: LimitView & { readonly metric?: string };
  readonly tokens?: LimitView;
  readonly balance?: LimitView & { readonly metric?: string };
  readonly requests?: { readonly perMinute: number; readonly burst: number; readonly available: number };
}

/** A tenant's balances: one row per scope and limited metric, money in its currency, with how full each limit is. */
export function balancesSection(tenant: string, balances: readonly BalanceView[]): SafeHtml {
  const rows: HtmlValue[][] = [];
  for (const b of balances) {
    for (const metric of ["money", "tokens", "balance"] as const) {
      const l = b[metric];
      if (!l) continue;
      const currency = "metric" in l ? currencyOfMetric(l.metric) : undefined;
      // Money and prepaid balances are micro-units of their currency; tokens are counts.
      const f = (v: number) => (metric === "tokens" ? formatCount(v) : formatMoney(v, currency));
      const label = metric === "tokens" ? "tokens" : `${metric}${currency ? ` (${currency})` : ""}`;
      rows.push([b.scope, label, f(l.limit), f(l.spent), f(l.held), f(l.pending), f(l.remaining), utilisation(l.spent + l.held + l.pending, l.limit)]);
    }
    if (b.requests) rows.push([b.scope, "requests", `${formatCount(b.requests.perMinute)}/min, burst ${formatCount(b.requests.burst)}`, "—", "—", "—", formatCount(b.requests.available), "—"]);
    if (!b.money && !b.tokens && !b.balance && !b.requests) rows.push([b.scope, "—", "no limit", "—", "—", "—", "—", "—"]);
  }
  return html`<section class="tenant-balances" data-tenant="${tenant}"><h2>${tenant}</h2>${table(["Scope", "Metric", "Limit", "Spent", "Held", "Pending", "Remaining", "Used"], rows, "No budget scopes.")}</section>`;
}

/** A backend of the active snapshot. */
export interface SnapshotBackend {
  readonly id: string;
  readonly name: string;
  readonly protocol: string;
  readonly baseUrl?: string;
  /** The Worker binding a binding-protocol backend (Workers AI) is reached through, instead of a URL. */
  readonly binding?: string;
}

/** An MCP server's health, as `GET /admin/status` answers it. */
export interface McpServerView {
  readonly name: string;
  readonly kind: string;
  readonly probed: boolean;
  readonly status: string;
  readonly lastReason: string | null;
  readonly lastProbeAt?: string | null;
  readonly consecutiveFailures: number;
}

/** A backend as `GET /admin/status` lists it: this isolate's live view. */
export interface BackendStatusView {
  readonly name: string;
  readonly credential: string;
  readonly status?: number;
  readonly inFlight: number;
  readonly latencyMs: number | null;
  readonly latencyAt: string | null;
  readonly breaker: { readonly state: string; readonly failures: number; readonly samples: number; readonly openUntil: string | null; readonly changedAt: string | null } | null;
  readonly health: { readonly status: string; readonly watching: boolean; readonly lastProbeAt: string | null; readonly lastOk: boolean | null; readonly lastReason: string | null; readonly lastLatencyMs: number | null; readonly nextProbeAt: string | null } | null;
}

/** The breaker's recent errors (its window) and its state, with when an open breaker lets a probe through. */
function breakerCells(b: BackendStatusView["breaker"], now: number): [HtmlValue, HtmlValue] {
  if (b === null) return ["—", html`<span class="breaker">off</span>`];
  const errors = b.samples === 0 ? "no recent attempts" : `${Math.round((b.failures / b.samples) * 100)}% of ${formatCount(b.samples)}`;
  const until = b.state === "open" && b.openUntil !== null ? html` <span class="next">probes ${relativeTime(Date.parse(b.openUntil), now)}</span>` : "";
  return [errors, html`<span class="breaker">${b.state}</span>${until}`];
}

/** Health with its last probe, or why there is none: `unknown` after traffic is explained, not left bare. */
function healthCell(h: BackendStatusView["health"], now: number): SafeHtml {
  if (h === null) return html`<span class="health">unknown</span> <span class="why">not probed: active health checks are off, or this backend has no probe and no request has read it yet</span>`;
  const last =
    h.lastProbeAt === null
      ? html`<span class="why">${h.watching ? `first probe ${h.nextProbeAt ? relativeTime(Date.parse(h.nextProbeAt), now) : "pending"}` : "not probed"}</span>`
      : html`last probe ${timeCell(h.lastProbeAt, now)} ${h.lastOk ? "ok" : `failed${h.lastReason ? `: ${h.lastReason}` : ""}`}${h.lastLatencyMs !== null ? ` (${formatCount(h.lastLatencyMs)} ms)` : ""}`;
  return html`<span class="health">${h.status}</span> ${last}`;
}

/**
 * The backends as this gateway instance sees them now: attempts in flight and latency (what its
 * selectors use), recent errors and the breaker, the last health probe, and whether the provider
 * took the gateway's credential. Health comes from active probes only; real traffic shows in the
 * errors and breaker columns.
 */
export function backendsSection(revision: HtmlValue, backends: readonly SnapshotBackend[], live: ReadonlyMap<string, BackendStatusView>, now: number): SafeHtml {
  return html`<p>Snapshot revision ${revision}. Figures are this gateway instance's; health comes from active probes only, so traffic shows in the errors and breaker columns.</p>${table(
    ["Backend", "Protocol", "Address", "In flight", "Latency", "Recent errors", "Breaker", "Health", "Credential"],
    backends.map((b) => {
      const v = live.get(b.name);
      const [errors, breaker] = breakerCells(v?.breaker ?? null, now);
      return [
        html`<span class="backend-name" title="${b.id}">${b.name}</span>`,
        b.protocol,
        b.baseUrl ?? (b.binding === undefined ? "—" : html`binding <code>${b.binding}</code>`),
        formatCount(v?.inFlight),
        v?.latencyMs == null ? "—" : html`${formatCount(v.latencyMs)} ms${v.latencyAt === null ? "" : html` <span class="why">last ${relativeTime(Date.parse(v.latencyAt), now)}</span>`}`,
        errors,
        breaker,
        healthCell(v?.health ?? null, now),
        v === undefined ? "—" : v.credential === "credential_rejected" ? html`<strong>rejected</strong> (${v.status ?? "?"})` : v.credential.replace("_", " "),
      ];
    }),
    "The active snapshot has no backends.",
  )}`;
}

/** The MCP servers with their probes' verdicts. */
export function mcpServersSection(servers: readonly McpServerView[]): SafeHtml {
  return table(
    ["MCP server", "Kind", "Probed", "Status", "Last reason", "Last probe", "Consecutive failures"],
    servers.map((s) => [s.name, s.kind, s.probed ? "yes" : "no", s.status, s.lastReason ?? "—", s.lastProbeAt ?? "—", n(s.consecutiveFailures)]),
    "No MCP servers are configured.",
  );
}

/** The A2A agents: their probes' verdicts and where their cards stand (the registry's last fetch and failure). */
export function a2aAgentsSection(agents: readonly A2aAgentStatus[], now: number): SafeHtml {
  const card = (c: A2aAgentStatus["card"]): HtmlValue => {
    if (c.source === "inline") return "inline";
    if (c.error !== undefined) return html`<strong>${c.error}</strong>`;
    const fetched = c.fetchedAt === null ? html`<strong>not fetched yet</strong>` : html`fetched ${relativeTime(Date.parse(c.fetchedAt), now)}`;
    return c.lastFailure === null ? fetched : html`${fetched}; <span class="why">last failure ${relativeTime(Date.parse(c.lastFailure.at), now)}: ${c.lastFailure.reasons.join("; ")}</span>`;
  };
  return table(
    ["Agent", "Card", "Probed", "Status", "Last reason", "Last probe", "Consecutive failures"],
    agents.map((a) => [html`<code>${a.name}</code>`, card(a.card), a.probed ? "yes" : "no", a.status, a.lastReason ?? "—", a.lastProbeAt ?? "—", n(a.consecutiveFailures)]),
    "No A2A agents are configured.",
  );
}

const GRACES: readonly [string, string][] = [
  ["0", "none"],
  ["3600", "1 hour"],
  ["86400", "24 hours"],
  ["604800", "7 days"],
];

/** A tenant's keys, each with the forms that change it, and the form that creates one. */
export function keysSection(keys: readonly KeyView[], tenant: string, csrf: string): SafeHtml {
  const hidden = html`<input type="hidden" name="csrf" value="${csrf}"><input type="hidden" name="tenant" value="${tenant}">`;
  const actions = (id: string, state: string): SafeHtml => {
    if (state === "revoked") return html`—`;
    const action = `/admin/console/keys/${encodeURIComponent(id)}`;
    const toggle = state === "disabled" ? html`<button type="submit" name="action" value="enable">Enable</button>` : html`<button type="submit" name="action" value="disable">Disable</button>`;
    return html`<form method="post" action="${action}" class="inline">${hidden}${toggle}</form> <form method="post" action="${action}" class="inline">${hidden}<input type="text" name="reason" placeholder="reason" maxlength="1024" aria-label="reason to revoke ${id}"><button type="submit" name="action" value="revoke">Revoke</button></form> <form method="post" action="${action}" class="inline">${hidden}<label>grace <select name="grace">${GRACES.map(([v, label]) => html`<option value="${v}"${v === "86400" ? html` selected` : ""}>${label}</option>`)}</select></label><button type="submit" name="action" value="rotate">Rotate</button></form>`;
  };
  const list = table(
    ["Key", "State", "Digest", "Charge to", "Entrypoints", "Created", "Expires", "Replaced values in grace until", "Change"],
    keys.map((k) => [
      html`<code>${k.id}</code>`,
      html`<span class="state" data-state="${k.state}">${k.state}</span>`,
      html`<code>${k.digestPrefix}…</code>`,
      k.chargeTo ?? "—",
      k.entrypoints.join(", "),
      k.createdAt ?? "—",
      k.expiresAt ?? (k.revokedAt !== undefined ? `revoked ${k.revokedAt}` : "never"),
      k.previous.length === 0 ? "—" : k.previous.map((p) => p.until).join(", "),
      actions(k.id, k.state),
    ]),
    "This tenant has no keys.",
  );
  const create = html`<h2>New key</h2><form method="post" action="/admin/console/keys" id="create-key">${hidden}<p><label>Id <input type="text" name="id" placeholder="generated" pattern="[a-z0-9][a-z0-9._-]{0,63}"></label> <label>Charge to <input type="text" name="chargeTo" placeholder="team or team/project"></label> <label>Entrypoints <input type="text" name="entrypoints" placeholder="*"></label> <label>Expires in days <input type="number" name="expiresDays" min="1" max="3660"></label> <button type="submit">Create</button></p></form>`;
  return html`${list}${create}`;
}

/** A new key's only showing: after create or rotate. */
export function newKeySection(apiKey: string, what: string, back: string): SafeHtml {
  return html`<p class="flash">${what}</p><p>The key is shown this once; only its digest is stored. Copy it now.</p><p><code id="new-key">${apiKey}</code></p><p><a href="${back}">Back to the keys</a></p>`;
}
