import type { Context, Hono } from "hono";
import type { GatewayRuntime } from "../worker/runtime.ts";
import type { A2aAgentStatus } from "../a2a/agent-health.ts";
import { apiFailure, html, notAvailable, page, type NavItem, type SafeHtml } from "./console-html.ts";
import {
  approvalDetail,
  approvalsSection,
  auditSection,
  a2aAgentsSection,
  backendsSection,
  balancesSection,
  keysSection,
  newKeySection,
  mcpServersSection,
  taskDetail,
  tasksSection,
  tenantPicker,
  type Approval,
  type AuditEventView,
  type BackendStatusView,
  type BalanceView,
  type CallRecord,
  type McpServerView,
  type SnapshotBackend,
  type TaskRollup,
} from "./console-pages.ts";
import {
  constantTimeEqual,
  mintSession,
  roleOfToken,
  sameOrigin,
  SESSION_TTL_MS,
  sessionCookieHeader,
  sessionCookieOf,
  verifySession,
  type ConsoleCredentials,
  type ConsoleSession,
} from "./console-session.ts";
import { readBodyText } from "./limits.ts";
import { spendSection, type SpendDayView } from "./console-charts.ts";
import { limitUses, nearestLimitsSection, pendingSection, spendOverview, topTasksSection, trafficSection, type PendingView, type ScopeSpendView, type TrafficView } from "./console-overview.ts";
import { consoleTimeMs, REQUEST_FILTERS, requestDetail, requestFilterForm, requestsSection, type RequestFilters, type RequestLogView } from "./console-requests.ts";
import { recentKey, routesSection, type NamedPart, type RouteTableView } from "./console-routes.ts";
import { callerValue, exampleBody, explainAnswerSection, explainForm, explainRequestOf, type ExplainCaller, type ExplainFormValues } from "./console-explain.ts";
import { PROTOCOL_IDS, type ProtocolId } from "../protocol/codec.ts";
import type { ExplainAnswer } from "../kinds/model/explain-answer.ts";
import { APPROVAL_STATES } from "../approvals/approval-desk.ts";
import type { KeyView } from "../publication-lifecycle/key-operations.ts";

type AdminEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime } };
type Ctx = Context<AdminEnv>;

/** The console's path prefix on the admin listener: its pages authenticate by session cookie, not bearer. */
export const CONSOLE_PREFIX = "/admin/console";

/** True for the console's own URLs, which the admin API's bearer check lets through to the console's. */
export function isConsolePath(path: string): boolean {
  return path === CONSOLE_PREFIX || path.startsWith(`${CONSOLE_PREFIX}/`);
}

const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
  "cache-control": "no-store",
  "x-content-type-options": "nosniff",
  // Not `no-referrer`: under it Chromium sends `Origin: null` on the console's own form posts.
  "referrer-policy": "same-origin",
};

const NAV: readonly NavItem[] = [
  { label: "Overview", path: `${CONSOLE_PREFIX}/overview` },
  { label: "Approvals", path: `${CONSOLE_PREFIX}/approvals` },
  { label: "Requests", path: `${CONSOLE_PREFIX}/requests` },
  { label: "Tasks", path: `${CONSOLE_PREFIX}/tasks` },
  { label: "Budgets", path: `${CONSOLE_PREFIX}/budgets` },
  { label: "Keys", path: `${CONSOLE_PREFIX}/keys` },
  { label: "Backends", path: `${CONSOLE_PREFIX}/backends` },
  { label: "Routes", path: `${CONSOLE_PREFIX}/routes` },
  { label: "Audit", path: `${CONSOLE_PREFIX}/audit` },
];
const APPROVER_NAV: readonly NavItem[] = NAV.filter((n) => n.label === "Approvals");
const MAX_FORM_BYTES = 16 * 1024;

// The approver token's secret is named by `governance.approverTokenSecret`; read loosely so the
// console also runs on a gateway whose config has no governance block (no approver can sign in).
function credentialsOf(c: Ctx): ConsoleCredentials | undefined {
  const rt = c.var.runtime;
  if (rt.adminToken === undefined) return undefined;
  const gov = (rt.config.gateway as { readonly governance?: { readonly approverTokenSecret?: unknown } }).governance;
  const name = gov?.approverTokenSecret;
  const value = typeof name === "string" ? (c.env as unknown as Record<string, unknown>)[name] : undefined;
  return { adminToken: rt.adminToken, approverToken: typeof value === "string" && value !== "" ? value : undefined };
}

/** What the admin API answered an in-process call. */
interface ApiAnswer {
  readonly status: number;
  readonly body: unknown;
  readonly text: string;
}

function apiMessage(a: ApiAnswer): string {
  const m = (a.body as { error?: { message?: unknown } } | null)?.error?.message;
  return typeof m === "string" ? m : a.text.slice(0, 500);
}

function ownOrigin(c: Ctx): string {
  return new URL(c.req.url).origin;
}

function isHttps(c: Ctx): boolean {
  return new URL(c.req.url).protocol === "https:";
}

/** Calls one admin API route as `token` would; what every console page renders. */
type AdminApi = (c: Ctx, token: string, method: "GET" | "POST", path: string, body?: unknown) => Promise<ApiAnswer>;

/**
 * The console: server-rendered pages over the admin API. Every figure comes from calling the admin
 * API's own routes in-process (`app.request`) and rendering their JSON, so the console cannot
 * disagree with the API. Signs in by token into an HttpOnly session cookie; every form carries a
 * per-session CSRF token and must come from the console's own origin.
 */
export function registerConsoleRoutes(app: Hono<AdminEnv>): void {
  const api = inProcessApi(app);
  registerSecurityHeaders(app);
  registerSessionRoutes(app);
  registerOverviewRoutes(app, api);
  registerApprovalRoutes(app, api);
  registerTaskRoutes(app, api);
  registerRequestRoutes(app, api);
  registerBudgetRoutes(app, api);
  registerKeyRoutes(app, api);
  registerBackendRoutes(app, api);
  registerRouteRoutes(app, api);
  registerAuditRoutes(app, api);
}

/** The admin API of `app` called in-process, so the console shows exactly what the API answers. */
function inProcessApi(app: Hono<AdminEnv>): AdminApi {
  return async (c, token, method, path, body) => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await app.request(`/admin${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) }, c.env, c.executionCtx);
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: res.status, body: parsed, text };
  };
}

/** Every console answer, login page and refusals included, carries the browser hardening headers. */
function registerSecurityHeaders(app: Hono<AdminEnv>): void {
  const securityHeaders = async (c: Ctx, next: () => Promise<void>) => {
    await next();
    for (const [k, v] of Object.entries(SECURITY_HEADERS)) c.res.headers.set(k, v);
  };
  app.use("/console", securityHeaders);
  app.use("/console/*", securityHeaders);
}

/** The sign-in form, shown first and again after a refused token. */
function loginPage(c: Ctx, message: string | undefined, status: 200 | 401 | 403): Response {
  return c.html(
    page(
      "Sign in",
      html`${message ? html`<p class="flash-error" id="login-error">${message}</p>` : ""}<form method="post" action="${CONSOLE_PREFIX}/login"><p><label>Admin or approver token <input type="password" name="token" autocomplete="current-password" required autofocus></label></p><p><button type="submit">Sign in</button></p></form>`,
    ),
    status,
  );
}

/** A refusal page: the console answers a browser in HTML, never in the API's JSON. */
function refused(c: Ctx, message: string, status: 401 | 403 | 413): Response {
  return c.html(page("Refused", html`<p class="flash-error" id="refused">${message}</p>`), status);
}

/** The posted form, bounded in size; undefined when it is not a readable urlencoded form. */
async function readForm(c: Ctx, maxBytes: number): Promise<URLSearchParams | undefined> {
  const type = c.req.header("content-type") ?? "";
  if (!/^application\/x-www-form-urlencoded\s*(;|$)/i.test(type)) return undefined;
  try {
    return new URLSearchParams(await readBodyText(c.req.raw, { maxBodyBytes: maxBytes, maxHeaderBytes: 0, maxHeaderCount: 0, maxJsonDepth: 0 }));
  } catch {
    return undefined;
  }
}

/** The session the request's cookie proves, if any: the console's only credential. */
async function sessionOf(c: Ctx): Promise<ConsoleSession | undefined> {
  const creds = credentialsOf(c);
  if (creds === undefined) return undefined;
  return await verifySession(sessionCookieOf(c.req.header("cookie")), creds, c.var.runtime.clock.now());
}

/** A signed-in page: the session, or the login page / a refusal already answered. */
async function guard(c: Ctx, adminOnly: boolean): Promise<ConsoleSession | Response> {
  const s = await sessionOf(c);
  if (s === undefined) return c.redirect(`${CONSOLE_PREFIX}/login`, 303);
  if (adminOnly && s.role !== "admin") return refused(c, "This page needs the admin token; an approver may use the approvals inbox only.", 403);
  return s;
}

/** A state-changing form: same origin, a valid session and its CSRF token, else refused. */
async function guardPost(c: Ctx, maxBytes = MAX_FORM_BYTES): Promise<{ session: ConsoleSession; form: URLSearchParams } | Response> {
  if (!sameOrigin(c.req.raw.headers, ownOrigin(c))) return refused(c, "Cross-origin form submissions are refused.", 403);
  const s = await sessionOf(c);
  if (s === undefined) return refused(c, "Sign in first.", 401);
  const form = await readForm(c, maxBytes);
  if (form === undefined) return refused(c, "The form could not be read.", 413);
  if (!(await constantTimeEqual(form.get("csrf") ?? "", s.csrf))) return refused(c, "The form's CSRF token is missing or wrong; reload the page and try again.", 403);
  return { session: s, form };
}

/** A signed-in page in the console's frame, whose navigation depends on the session's role. */
function render(c: Ctx, s: ConsoleSession, title: string, current: string, body: SafeHtml, status: 200 | 400 | 403 | 404 | 409 | 502 = 200): Response {
  return c.html(page(title, body, { nav: s.role === "admin" ? NAV : APPROVER_NAV, current, csrf: s.csrf, role: s.role }), status);
}

/** The tenant ids the published config names, for the pages' tenant pickers. */
async function tenants(c: Ctx, api: AdminApi): Promise<string[]> {
  const a = await api(c, c.var.runtime.adminToken!, "GET", "/config");
  const list = (a.body as { publication?: { tenants?: { id?: unknown }[] } } | undefined)?.publication?.tenants ?? [];
  return list.map((t) => t.id).filter((id): id is string => typeof id === "string");
}

/** The tenant a page shows (asked for, else the first one) and every tenant to pick from. */
async function tenantOf(c: Ctx, api: AdminApi): Promise<{ tenant: string; all: string[] }> {
  const all = await tenants(c, api);
  const asked = c.req.query("tenant");
  return { tenant: asked !== undefined && asked !== "" ? asked : (all[0] ?? ""), all };
}

/** Where a signed-in role starts: the admin on the overview, an approver in the approvals inbox (all it may see). */
function homeOf(role: ConsoleSession["role"]): string {
  return `${CONSOLE_PREFIX}/${role === "admin" ? "overview" : "approvals"}`;
}

/** Signing in and out: the only console routes reachable without a session. */
function registerSessionRoutes(app: Hono<AdminEnv>): void {
  app.get("/console", async (c) => {
    const s = await sessionOf(c);
    return c.redirect(s === undefined ? `${CONSOLE_PREFIX}/login` : homeOf(s.role), 303);
  });

  app.get("/console/login", async (c) => {
    const s = await sessionOf(c);
    if (s !== undefined) return c.redirect(homeOf(s.role), 303);
    return loginPage(c, undefined, 200);
  });

  app.post("/console/login", async (c) => {
    // Login CSRF: a foreign page must not sign a browser in under its own token.
    if (!sameOrigin(c.req.raw.headers, ownOrigin(c))) return loginPage(c, "Cross-origin sign-in is refused.", 403);
    const creds = credentialsOf(c)!;
    const form = await readForm(c, MAX_FORM_BYTES);
    const role = await roleOfToken(form?.get("token") ?? "", creds);
    if (role === undefined) return loginPage(c, "That token is not valid.", 401);
    c.header("set-cookie", sessionCookieHeader(await mintSession(role, creds, c.var.runtime.clock.now()), isHttps(c), Math.floor(SESSION_TTL_MS / 1000)));
    return c.redirect(homeOf(role), 303);
  });

  app.post("/console/logout", async (c) => {
    const g = await guardPost(c);
    if (g instanceof Response) return g;
    c.header("set-cookie", sessionCookieHeader("", isHttps(c), 0));
    return c.redirect(`${CONSOLE_PREFIX}/login`, 303);
  });
}

/** The approvals inbox and decisions: the one part of the console an approver may use. */
function registerApprovalRoutes(app: Hono<AdminEnv>, api: AdminApi): void {
  app.get("/console/approvals", async (c) => {
    const s = await guard(c, false);
    if (s instanceof Response) return s;
    const { tenant, all } = await tenantOf(c, api);
    const stateQ = c.req.query("state") ?? "pending";
    const state = (APPROVAL_STATES as readonly string[]).includes(stateQ) || stateQ === "all" ? stateQ : "pending";
    const a = await api(c, c.var.runtime.adminToken!, "GET", `/approvals?${new URLSearchParams({ tenant, ...(state === "all" ? {} : { state }) })}`);
    const stateSelect = html` <label>State <select name="state">${["all", ...APPROVAL_STATES].map((v) => html`<option value="${v}"${v === state ? html` selected` : ""}>${v}</option>`)}</select></label>`;
    const picker = tenantPicker(`${CONSOLE_PREFIX}/approvals`, all, tenant, stateSelect);
    const body =
      a.status === 404
        ? notAvailable("Approvals", "GET /admin/approvals")
        : a.status !== 200
          ? apiFailure("Approvals", a.status, apiMessage(a))
          : approvalsSection((a.body as { approvals?: Approval[] }).approvals ?? [], tenant, s.csrf);
    return render(c, s, "Approvals", `${CONSOLE_PREFIX}/approvals`, html`${picker}${flash(c)}${body}`);
  });

  app.get("/console/approvals/:id", async (c) => {
    const s = await guard(c, false);
    if (s instanceof Response) return s;
    const { tenant } = await tenantOf(c, api);
    const id = c.req.param("id");
    const a = await api(c, c.var.runtime.adminToken!, "GET", `/approvals/${encodeURIComponent(id)}?${new URLSearchParams({ tenant })}`);
    const body = a.status !== 200 ? apiFailure(`Approval ${id}`, a.status, apiMessage(a)) : approvalDetail((a.body as { approval: Approval }).approval, tenant, s.csrf);
    return render(c, s, `Approval ${id}`, `${CONSOLE_PREFIX}/approvals`, html`${flash(c)}${body}`, a.status === 200 ? 200 : a.status === 404 ? 404 : 502);
  });

  app.post("/console/approvals/:id/decide", async (c) => {
    const g = await guardPost(c);
    if (g instanceof Response) return g;
    const { session: s, form } = g;
    const id = c.req.param("id");
    const decision = form.get("decision") ?? "";
    const tenant = form.get("tenant") ?? "";
    const reason = (form.get("reason") ?? "").trim();
    const back = `${CONSOLE_PREFIX}/approvals/${encodeURIComponent(id)}?${new URLSearchParams({ tenant })}`;
    if (decision !== "approve" && decision !== "deny" && decision !== "revoke") {
      return render(c, s, "Decision refused", `${CONSOLE_PREFIX}/approvals`, html`<p class="flash-error">Choose approve, deny or revoke.</p><p><a href="${back}">Back</a></p>`, 400);
    }
    if (reason === "") return render(c, s, "Decision refused", `${CONSOLE_PREFIX}/approvals`, html`<p class="flash-error">A reason is required.</p><p><a href="${back}">Back</a></p>`, 400);
    // The decision is made with the signed-in role's own credential, so the API records who decided.
    const creds = credentialsOf(c)!;
    const token = s.role === "admin" ? creds.adminToken : creds.approverToken;
    if (token === undefined) return refused(c, "No approver token is configured any more; sign in again.", 401);
    const a = await api(c, token, "POST", `/approvals/${encodeURIComponent(id)}/${decision}?${new URLSearchParams({ tenant })}`, { reason });
    if (a.status !== 200) {
      return render(c, s, "Decision refused", `${CONSOLE_PREFIX}/approvals`, html`${apiFailure(`${decision} ${id}`, a.status, apiMessage(a))}<p><a href="${back}">Back</a></p>`, a.status === 404 ? 404 : a.status === 409 ? 409 : 400);
    }
    return c.redirect(`${back}&${new URLSearchParams({ done: decision })}`, 303);
  });
}

/** Most tenants the overview reads spend, limits and pending work of (each is a call to its ledgers). */
const OVERVIEW_MAX_TENANTS = 50;

/**
 * The console's home, for the admin: this isolate's recent traffic, spend over 30 days, the
 * costliest tasks and keys, the budgets nearest their limit, and what waits for a person. Every
 * figure is an admin API answer, fetched at once.
 */
function registerOverviewRoutes(app: Hono<AdminEnv>, api: AdminApi): void {
  app.get("/console/overview", async (c) => {
    const s = await guard(c, true);
    if (s instanceof Response) return s;
    const token = c.var.runtime.adminToken!;
    const now = c.var.runtime.clock.now();
    const get = (path: string) => api(c, token, "GET", path);
    const ok = <T>(a: ApiAnswer): T | undefined => (a.status === 200 ? (a.body as T) : undefined);
    const [{ tenant, all }, traffic, budgets] = await Promise.all([tenantOf(c, api), get("/traffic"), get("/budgets")]);
    const budgeted = (ok<{ tenants?: { tenant: string }[] }>(budgets)?.tenants ?? []).map((t) => t.tenant).slice(0, OVERVIEW_MAX_TENANTS);
    const seg = (t: string) => encodeURIComponent(t);
    const chosen = budgeted.includes(tenant) ? tenant : undefined;
    const [tenantSpend, balances, pending, days, scopes, tasks] = await Promise.all([
      Promise.all(budgeted.map(async (t) => ({ tenant: t, spend: ok<{ scopes: ScopeSpendView[] }>(await get(`/budgets/${seg(t)}/spend?kind=tenant`))?.scopes[0] }))),
      Promise.all(budgeted.map(async (t) => limitUses(t, ok<{ balances?: BalanceView[] }>(await get(`/budgets/${seg(t)}/balance`))?.balances ?? []))),
      Promise.all(
        all.slice(0, OVERVIEW_MAX_TENANTS).map(async (t): Promise<PendingView> => {
          const [ap, rec] = await Promise.all([get(`/approvals?${new URLSearchParams({ tenant: t, state: "pending" })}`), budgeted.includes(t) ? get(`/budgets/${seg(t)}/reconciliations?limit=100`) : undefined]);
          const approvals = ok<{ approvals?: unknown[] }>(ap)?.approvals;
          const recs = rec === undefined ? undefined : ok<{ pending?: unknown[] }>(rec)?.pending;
          return { tenant: t, approvals: approvals?.length, reconciliations: recs?.length, reconciliationsCapped: recs?.length === 100 };
        }),
      ),
      chosen === undefined ? undefined : get(`/budgets/${seg(chosen)}/usage?by=day`).then((a) => ok<{ days?: SpendDayView[] }>(a)?.days),
      chosen === undefined ? undefined : get(`/budgets/${seg(chosen)}/spend`).then((a) => ok<{ scopes?: ScopeSpendView[] }>(a)?.scopes),
      tenant === "" ? undefined : get(`/tasks?${new URLSearchParams({ tenant, sort: "spend", limit: "10" })}`).then((a) => ok<{ tasks?: TaskRollup[] }>(a)?.tasks),
    ]);
    const t = ok<TrafficView>(traffic);
    const body = html`${tenantPicker(`${CONSOLE_PREFIX}/overview`, all, tenant)}${t ? trafficSection(t) : apiFailure("Traffic", traffic.status, apiMessage(traffic))}${spendOverview({ tenant, tenants: tenantSpend, days, scopes, now })}${topTasksSection(tenant, tasks, now)}${nearestLimitsSection(balances.flat())}${pendingSection(pending)}`;
    return render(c, s, "Overview", `${CONSOLE_PREFIX}/overview`, body);
  });
}

/** Task rollups and their calls, for the admin. */
function registerTaskRoutes(app: Hono<AdminEnv>, api: AdminApi): void {
  app.get("/console/tasks", async (c) => {
    const s = await guard(c, true);
    if (s instanceof Response) return s;
    const { tenant, all } = await tenantOf(c, api);
    const a = await api(c, c.var.runtime.adminToken!, "GET", `/tasks?${new URLSearchParams({ tenant, limit: "100" })}`);
    const body =
      a.status === 404
        ? notAvailable("Tasks", "GET /admin/tasks")
        : a.status !== 200
          ? apiFailure("Tasks", a.status, apiMessage(a))
          : tasksSection((a.body as { tasks?: TaskRollup[] }).tasks ?? [], tenant);
    return render(c, s, "Tasks", `${CONSOLE_PREFIX}/tasks`, html`${tenantPicker(`${CONSOLE_PREFIX}/tasks`, all, tenant)}${body}`);
  });

  app.get("/console/tasks/:taskId", async (c) => {
    const s = await guard(c, true);
    if (s instanceof Response) return s;
    const { tenant } = await tenantOf(c, api);
    const taskId = c.req.param("taskId");
    const a = await api(c, c.var.runtime.adminToken!, "GET", `/tasks/${encodeURIComponent(taskId)}?${new URLSearchParams({ tenant })}`);
    const ok = a.status === 200;
    const b = a.body as { task: TaskRollup; calls?: CallRecord[] };
    const body = ok ? taskDetail(b.task, b.calls ?? [], tenant) : apiFailure(`Task ${taskId}`, a.status, apiMessage(a));
    return render(c, s, `Task ${taskId}`, `${CONSOLE_PREFIX}/tasks`, body, ok ? 200 : a.status === 404 ? 404 : 502);
  });
}

/** The request log (every call, attributed to a task or not) and one call, for the admin. */
function registerRequestRoutes(app: Hono<AdminEnv>, api: AdminApi): void {
  app.get("/console/requests", async (c) => {
    const s = await guard(c, true);
    if (s instanceof Response) return s;
    const { tenant, all } = await tenantOf(c, api);
    const filters: RequestFilters = {};
    for (const name of REQUEST_FILTERS) {
      const v = c.req.query(name)?.trim();
      if (v) filters[name] = v;
    }
    // The form's times are read as UTC; the API takes epoch milliseconds.
    // A page of 50 unless the URL asks for another size (the API bounds it).
    const limit = c.req.query("limit") || "50";
    const params = new URLSearchParams({ tenant, limit });
    const bad: string[] = [];
    for (const [name, v] of Object.entries(filters)) {
      if (name === "since" || name === "until") {
        const ms = consoleTimeMs(v);
        if (ms === undefined) bad.push(name);
        // An `until` names its whole minute (or second): calls within it are listed.
        else params.set(name, String(name === "until" ? ms + (v.length === 16 ? 59_999 : 999) : ms));
      } else params.set(name, v);
    }
    const cursor = c.req.query("cursor");
    if (cursor) params.set("cursor", cursor);
    const form = requestFilterForm(all, tenant, filters);
    if (bad.length > 0) return render(c, s, "Requests", `${CONSOLE_PREFIX}/requests`, html`${form}<p class="flash-error">${bad.join(" and ")}: give a date and time (UTC).</p>`, 400);
    const a = await api(c, c.var.runtime.adminToken!, "GET", `/calls?${params}`);
    const b = a.body as { calls?: RequestLogView[]; next?: string };
    const next = b?.next === undefined ? undefined : `${CONSOLE_PREFIX}/requests?${new URLSearchParams({ tenant, ...filters, ...(limit === "50" ? {} : { limit }), cursor: b.next })}`;
    const body =
      a.status === 404 ? notAvailable("Requests", "GET /admin/calls") : a.status !== 200 ? apiFailure("Requests", a.status, apiMessage(a)) : requestsSection(b.calls ?? [], tenant, next);
    return render(c, s, "Requests", `${CONSOLE_PREFIX}/requests`, html`${form}${body}`, a.status === 400 ? 400 : 200);
  });

  app.get("/console/requests/:requestId", async (c) => {
    const s = await guard(c, true);
    if (s instanceof Response) return s;
    const { tenant } = await tenantOf(c, api);
    const id = c.req.param("requestId");
    const a = await api(c, c.var.runtime.adminToken!, "GET", `/calls/${encodeURIComponent(id)}?${new URLSearchParams({ tenant })}`);
    const ok = a.status === 200;
    const body = ok ? requestDetail((a.body as { call: RequestLogView }).call, tenant) : apiFailure(`Call ${id}`, a.status, apiMessage(a));
    return render(c, s, `Call ${id}`, `${CONSOLE_PREFIX}/requests`, body, ok ? 200 : a.status === 404 ? 404 : 502);
  });
}

/** Every budgeted tenant's balances on one page, for the admin. */
function registerBudgetRoutes(app: Hono<AdminEnv>, api: AdminApi): void {
  app.get("/console/budgets", async (c) => {
    const s = await guard(c, true);
    if (s instanceof Response) return s;
    const token = c.var.runtime.adminToken!;
    const list = await api(c, token, "GET", "/budgets");
    if (list.status !== 200) return render(c, s, "Budgets", `${CONSOLE_PREFIX}/budgets`, apiFailure("Budgets", list.status, apiMessage(list)));
    const ts = ((list.body as { tenants?: { tenant: string }[] }).tenants ?? []).map((t) => t.tenant);
    const sections = await Promise.all(
      ts.map(async (t) => {
        const [b, u] = await Promise.all([api(c, token, "GET", `/budgets/${encodeURIComponent(t)}/balance`), api(c, token, "GET", `/budgets/${encodeURIComponent(t)}/usage?by=day`)]);
        const balances = b.status === 200 ? balancesSection(t, (b.body as { balances?: BalanceView[] }).balances ?? []) : apiFailure(`Balances of ${t}`, b.status, apiMessage(b));
        const spend = u.status === 200 ? spendSection(t, (u.body as { days?: SpendDayView[] }).days ?? [], c.var.runtime.clock.now()) : apiFailure(`Spend of ${t}`, u.status, apiMessage(u));
        return html`${balances}${spend}`;
      }),
    );
    return render(c, s, "Budgets", `${CONSOLE_PREFIX}/budgets`, ts.length === 0 ? html`<p class="empty">No tenant has a budget.</p>` : html`${sections}`);
  });
}

/** A tenant's API keys: list, create, disable, enable, revoke and rotate, for the admin (through `/admin/keys`). */
function registerKeyRoutes(app: Hono<AdminEnv>, api: AdminApi): void {
  const listPath = (tenant: string) => `${CONSOLE_PREFIX}/keys?${new URLSearchParams({ tenant })}`;
  app.get("/console/keys", async (c) => {
    const s = await guard(c, true);
    if (s instanceof Response) return s;
    const { tenant, all } = await tenantOf(c, api);
    const a = await api(c, c.var.runtime.adminToken!, "GET", `/keys?${new URLSearchParams({ tenant })}`);
    const body = a.status !== 200 ? apiFailure("Keys", a.status, apiMessage(a)) : keysSection((a.body as { keys?: KeyView[] }).keys ?? [], tenant, s.csrf);
    return render(c, s, "API keys", `${CONSOLE_PREFIX}/keys`, html`${tenantPicker(`${CONSOLE_PREFIX}/keys`, all, tenant)}${flash(c)}${body}`);
  });

  app.post("/console/keys", async (c) => {
    const g = await guardPost(c);
    if (g instanceof Response) return g;
    const { session: s, form } = g;
    if (s.role !== "admin") return refused(c, "Keys need the admin token.", 403);
    const tenant = form.get("tenant") ?? "";
    const field = (name: string) => {
      const v = (form.get(name) ?? "").trim();
      return v === "" ? undefined : v;
    };
    const days = field("expiresDays");
    const entrypoints = field("entrypoints")?.split(",").map((e) => e.trim()).filter((e) => e !== "");
    const body = {
      tenant,
      ...(field("id") !== undefined ? { id: field("id") } : {}),
      ...(field("chargeTo") !== undefined ? { chargeTo: field("chargeTo") } : {}),
      ...(entrypoints !== undefined && entrypoints.length > 0 ? { entrypoints } : {}),
      ...(days !== undefined ? { expiresAt: new Date(c.var.runtime.clock.now() + Number(days) * 86_400_000).toISOString() } : {}),
    };
    const a = await api(c, c.var.runtime.adminToken!, "POST", "/keys", body);
    if (a.status !== 201) return render(c, s, "Key not created", `${CONSOLE_PREFIX}/keys`, html`${apiFailure("Create key", a.status, apiMessage(a))}<p><a href="${listPath(tenant)}">Back</a></p>`, a.status === 404 ? 404 : 400);
    const r = a.body as { apiKey: string; revision: number; key: KeyView };
    return render(c, s, "Key created", `${CONSOLE_PREFIX}/keys`, newKeySection(r.apiKey, `Created key ${r.key.tenant}/${r.key.id} in revision ${r.revision}.`, listPath(tenant)));
  });

  app.post("/console/keys/:id", async (c) => {
    const g = await guardPost(c);
    if (g instanceof Response) return g;
    const { session: s, form } = g;
    if (s.role !== "admin") return refused(c, "Keys need the admin token.", 403);
    const id = c.req.param("id");
    const tenant = form.get("tenant") ?? "";
    const action = form.get("action") ?? "";
    const path = `/keys/${encodeURIComponent(id)}/${action}?${new URLSearchParams({ tenant })}`;
    let a: ApiAnswer;
    if (action === "rotate") a = await api(c, c.var.runtime.adminToken!, "POST", path, { graceSeconds: Number(form.get("grace") ?? "0") });
    else if (action === "revoke") {
      const reason = (form.get("reason") ?? "").trim();
      a = await api(c, c.var.runtime.adminToken!, "POST", path, reason === "" ? undefined : { reason });
    } else if (action === "disable" || action === "enable") a = await api(c, c.var.runtime.adminToken!, "POST", path);
    else return render(c, s, "Change refused", `${CONSOLE_PREFIX}/keys`, html`<p class="flash-error">Choose disable, enable, revoke or rotate.</p>`, 400);
    if (a.status !== 200) return render(c, s, "Change refused", `${CONSOLE_PREFIX}/keys`, html`${apiFailure(`${action} ${id}`, a.status, apiMessage(a))}<p><a href="${listPath(tenant)}">Back</a></p>`, a.status === 404 ? 404 : 400);
    if (action === "rotate") {
      const r = a.body as { apiKey: string; revision: number; key: KeyView };
      const until = r.key.previous.at(-1)?.until;
      return render(c, s, "Key rotated", `${CONSOLE_PREFIX}/keys`, newKeySection(r.apiKey, `Rotated key ${r.key.tenant}/${r.key.id} in revision ${r.revision}; ${until === undefined ? "the replaced value no longer works" : `the replaced value works until ${until}`}.`, listPath(tenant)));
    }
    return c.redirect(`${listPath(tenant)}&${new URLSearchParams({ done: action })}`, 303);
  });
}

/** The served snapshot's backends with their breaker and health state, the MCP servers and the A2A agents, for the admin. */
function registerBackendRoutes(app: Hono<AdminEnv>, api: AdminApi): void {
  app.get("/console/backends", async (c) => {
    const s = await guard(c, true);
    if (s instanceof Response) return s;
    const token = c.var.runtime.adminToken!;
    const [snap, status] = await Promise.all([api(c, token, "GET", "/snapshot"), api(c, token, "GET", "/status")]);
    const live = new Map(((status.body as { backends?: BackendStatusView[] } | null)?.backends ?? []).map((b) => [b.name, b]));
    const sb = snap.body as { revision?: number; snapshot?: { backends?: SnapshotBackend[] } } | null;
    const backends =
      snap.status === 200 ? backendsSection(sb?.revision ?? "—", sb?.snapshot?.backends ?? [], live, c.var.runtime.clock.now()) : apiFailure("Backends", snap.status, apiMessage(snap));
    const body = status.body as { mcpServers?: McpServerView[]; a2aAgents?: A2aAgentStatus[] } | null;
    const mcp = status.status === 200 ? mcpServersSection(body?.mcpServers ?? []) : apiFailure("MCP servers", status.status, apiMessage(status));
    const agents = status.status === 200 ? a2aAgentsSection(body?.a2aAgents ?? [], c.var.runtime.clock.now()) : apiFailure("A2A agents", status.status, apiMessage(status));
    return render(c, s, "Backends", `${CONSOLE_PREFIX}/backends`, html`${backends}<h2>MCP servers</h2>${mcp}<h2>A2A agents</h2>${agents}`);
  });
}

/** Recent audit events, filtered by type and task, for the admin. */
function registerAuditRoutes(app: Hono<AdminEnv>, api: AdminApi): void {
  app.get("/console/audit", async (c) => {
    const s = await guard(c, true);
    if (s instanceof Response) return s;
    const { tenant, all } = await tenantOf(c, api);
    const params = new URLSearchParams({ tenant, limit: "100" });
    const type = c.req.query("type");
    const taskId = c.req.query("taskId");
    if (type) params.set("type", type);
    if (taskId) params.set("taskId", taskId);
    const a = await api(c, c.var.runtime.adminToken!, "GET", `/audit?${params}`);
    const body =
      a.status === 404
        ? notAvailable("Audit events", "GET /admin/audit")
        : a.status !== 200
          ? apiFailure("Audit events", a.status, apiMessage(a))
          : auditSection((a.body as { events?: AuditEventView[] }).events ?? []);
    const filters = html` <label>Type <input type="text" name="type" value="${type ?? ""}"></label> <label>Task <input type="text" name="taskId" value="${taskId ?? ""}"></label>`;
    return render(c, s, "Recent audit events", `${CONSOLE_PREFIX}/audit`, html`${tenantPicker(`${CONSOLE_PREFIX}/audit`, all, tenant, filters)}${body}`);
  });
}

function flash(c: Ctx): SafeHtml {
  const done = c.req.query("done");
  const said: Record<string, string> = { approve: "Approved.", deny: "Denied.", revoke: "Revoked.", disable: "Disabled.", enable: "Enabled." };
  return done !== undefined && said[done] !== undefined ? html`<p class="flash" id="flash">${said[done]}</p>` : html``;
}

/** The decisions of every entrypoint and the explain form, for the admin. */
function registerRouteRoutes(app: Hono<AdminEnv>, api: AdminApi): void {
  app.get("/console/routes", async (c) => {
    const s = await guard(c, true);
    if (s instanceof Response) return s;
    const token = c.var.runtime.adminToken!;
    const [routes, config, traffic] = await Promise.all([api(c, token, "GET", "/routes"), api(c, token, "GET", "/config"), api(c, token, "GET", "/traffic")]);
    if (routes.status !== 200) return render(c, s, "Routes", `${CONSOLE_PREFIX}/routes`, apiFailure("Routes", routes.status, apiMessage(routes)), 502);
    const pub = (config.body as { publication?: { signals?: NamedPart[]; plugins?: NamedPart[] } } | undefined)?.publication;
    // Each decision's requests in this isolate's traffic window; no column at all when the window cannot be read.
    const recent = traffic.status === 200 ? new Map((traffic.body as TrafficView).routes.map((r) => [recentKey(r.entrypoint, r.route), r.requests])) : undefined;
    return render(c, s, "Routes", `${CONSOLE_PREFIX}/routes`, routesSection(routes.body as RouteTableView, pub?.signals ?? [], pub?.plugins ?? [], recent));
  });

  app.get("/console/explain", async (c) => {
    const s = await guard(c, true);
    if (s instanceof Response) return s;
    const ex = await explainContext(c, api);
    const askedProtocol = c.req.query("protocol") ?? "";
    const protocol: ProtocolId = (PROTOCOL_IDS as readonly string[]).includes(askedProtocol) ? (askedProtocol as ProtocolId) : "openai-chat";
    const entrypoint = c.req.query("entrypoint") || ex.entrypoints[0] || "";
    // The caller the URL names (`tenant/key`, `tenant/`), else the first usable key.
    const asked = ex.callers.find((k) => callerValue(k) === c.req.query("caller"));
    const first = asked ?? ex.callers.find((k) => k.key !== undefined && k.note === undefined) ?? ex.callers[0];
    const values: ExplainFormValues = { caller: first === undefined ? "" : callerValue(first), protocol, headers: "", body: exampleBody(entrypoint, protocol) };
    return render(c, s, "Explain a request", `${CONSOLE_PREFIX}/routes`, html`${explainIntro}${explainForm(values, ex.callers, ex.trusted, s.csrf)}`);
  });

  // A body the gateway would accept must fit through the form: urlencoding writes a byte as at
  // most three, and the other fields are small.
  const explainFormBytes = (c: Ctx) => 3 * c.var.runtime.config.gateway.limits.maxBodyBytes + MAX_FORM_BYTES;
  app.post("/console/explain", async (c) => {
    const g = await guardPost(c, explainFormBytes(c));
    if (g instanceof Response) return g;
    const { session: s, form } = g;
    if (s.role !== "admin") return refused(c, "Explain needs the admin token.", 403);
    const values: ExplainFormValues = { caller: form.get("caller") ?? "", protocol: form.get("protocol") ?? "", headers: form.get("headers") ?? "", body: form.get("body") ?? "" };
    const ex = await explainContext(c, api);
    const shown = (above: SafeHtml, below: SafeHtml, status: 200 | 400 | 502) =>
      render(c, s, "Explain a request", `${CONSOLE_PREFIX}/routes`, html`${explainIntro}${above}${explainForm(values, ex.callers, ex.trusted, s.csrf)}${below}`, status);
    const asked = explainRequestOf(values);
    if ("problem" in asked) return shown(html`<p class="flash-error" id="explain-error">${asked.problem}</p>`, html``, 400);
    const a = await api(c, c.var.runtime.adminToken!, "POST", "/explain", asked);
    if (a.status !== 200) return shown(html`<div id="explain-error">${apiFailure("Explain", a.status, apiMessage(a))}</div>`, html``, a.status < 500 ? 400 : 502);
    return shown(html``, explainAnswerSection(a.body as ExplainAnswer), 200);
  });
}

const explainIntro = html`<p>Paste a request as a client would send it and see how the gateway would decide it: the signals, the decision, the plan and what the plugins would do (<code>POST /admin/explain</code>). <a href="${CONSOLE_PREFIX}/routes">All routes</a></p>`;

/** What the explain form offers: every tenant and its keys, the trusted header names, and the chat entrypoints (for the example body). */
async function explainContext(c: Ctx, api: AdminApi): Promise<{ callers: ExplainCaller[]; trusted: string[]; entrypoints: string[] }> {
  const token = c.var.runtime.adminToken!;
  const [config, routes] = await Promise.all([api(c, token, "GET", "/config"), api(c, token, "GET", "/routes")]);
  const ts = ((config.body as { publication?: { tenants?: { id?: unknown }[] } } | undefined)?.publication?.tenants ?? []).map((t) => t.id).filter((id): id is string => typeof id === "string");
  const keyLists = await Promise.all(ts.map(async (t) => ({ t, a: await api(c, token, "GET", `/keys?${new URLSearchParams({ tenant: t })}`) })));
  const callers = keyLists.flatMap(({ t, a }) => [
    { tenant: t },
    ...(a.status === 200 ? ((a.body as { keys?: KeyView[] }).keys ?? []) : []).map((k) => ({ tenant: t, key: k.id, note: k.state === "active" ? undefined : k.state })),
  ]);
  const trusted = (config.body as { gateway?: { security?: { trustedHeaders?: unknown } } } | undefined)?.gateway?.security?.trustedHeaders;
  const eps = ((routes.body as { entrypoints?: { name: string; operation?: string }[] } | undefined)?.entrypoints ?? []).filter((e) => (e.operation ?? "chat") === "chat").map((e) => e.name);
  return { callers, trusted: Array.isArray(trusted) ? trusted.filter((h): h is string => typeof h === "string") : [], entrypoints: eps };
}
