import { formatCount } from "./console-format.ts";
import { html, table, type HtmlValue, type SafeHtml } from "./console-html.ts";
import { definitions, money, when } from "./console-pages.ts";

/** One call of the request log, as `GET /admin/calls` answers it (a field an older gateway lacks renders as a dash). */
export interface RequestLogView {
  readonly requestId: string;
  readonly at: number;
  readonly endedAt?: number;
  readonly tenant?: string;
  readonly key?: string;
  readonly project?: string;
  readonly entrypoint?: string;
  readonly protocol?: string;
  readonly stream?: boolean;
  readonly kind?: string;
  readonly decision?: string;
  readonly model?: string;
  readonly backend?: string;
  readonly attempts?: number;
  readonly outcome?: string;
  readonly errorCode?: string;
  readonly latencyMs?: number;
  readonly ttftMs?: number;
  readonly tokens?: { readonly input: number; readonly output: number };
  readonly costMicros?: number;
  readonly currency?: string;
  readonly taskId?: string;
  readonly sessionId?: string;
  readonly parentRequestId?: string;
  readonly cache?: string;
  readonly content?: { readonly prompt?: { readonly text: string; readonly truncated: boolean }; readonly completion?: { readonly text: string; readonly truncated: boolean } };
}

/** The request log's filters as the console's form and URL carry them (times as `YYYY-MM-DDTHH:MM`, UTC). */
export const REQUEST_FILTERS = ["key", "project", "entrypoint", "model", "decision", "outcome", "code", "task", "since", "until"] as const;
/** The filters a console URL carries, by name, as typed. */
export type RequestFilters = Partial<Record<(typeof REQUEST_FILTERS)[number], string>>;

const CONSOLE = "/admin/console";

/** A console time field (`2026-12-07T15:04`, seconds optional, read as UTC) as epoch ms; undefined when it is not one. */
export function consoleTimeMs(text: string): number | undefined {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(text)) return undefined;
  const ms = Date.parse(`${text}Z`);
  return Number.isNaN(ms) ? undefined : ms;
}

function ms(v: number | undefined): string {
  return typeof v === "number" ? `${v} ms` : "—";
}

function count(v: number | undefined): string {
  return formatCount(v);
}

/** Time without the milliseconds and zone, to keep the table narrow (the detail page has the full time). */
function shortTime(t: number): string {
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? String(t) : d.toISOString().slice(0, 19).replace("T", " ");
}

function detailHref(tenant: string, requestId: string): string {
  return `${CONSOLE}/requests/${encodeURIComponent(requestId)}?${String(new URLSearchParams({ tenant }))}`;
}

function outcomeText(c: RequestLogView): string {
  return c.errorCode ? `${c.outcome ?? "—"} (${c.errorCode})` : (c.outcome ?? "—");
}

/** The filter form: a plain GET form, so every view of the log is a link. */
export function requestFilterForm(tenants: readonly string[], tenant: string, f: RequestFilters): SafeHtml {
  const text = (name: (typeof REQUEST_FILTERS)[number], label: string, size = 10) => html`<label>${label} <input type="text" name="${name}" value="${f[name] ?? ""}" size="${size}"></label> `;
  const time = (name: "since" | "until", label: string) => html`<label>${label} <input type="datetime-local" name="${name}" value="${f[name] ?? ""}" step="1"></label> `;
  const outcomes = ["", "success", "error", "cancelled"];
  return html`<form method="get" action="${CONSOLE}/requests" id="request-filters"><p><label>Tenant <select name="tenant">${tenants.map(
    (t) => html`<option value="${t}"${t === tenant ? html` selected` : ""}>${t}</option>`,
  )}</select></label> ${text("key", "Key")}${text("project", "Project", 14)}${text("entrypoint", "Entrypoint")}${text("model", "Model")}${text("decision", "Decision")}</p><p><label>Outcome <select name="outcome">${outcomes.map(
    (o) => html`<option value="${o}"${o === (f.outcome ?? "") ? html` selected` : ""}>${o === "" ? "any" : o}</option>`,
  )}</select></label> ${text("code", "Error code", 16)}${text("task", "Task", 14)}${time("since", "Since (UTC)")}${time("until", "Until (UTC)")}<button type="submit">Show</button></p></form>`;
}

/** The log's page: one row per call, newest first, each linking to its detail; a link to the next page when there is one. */
export function requestsSection(calls: readonly RequestLogView[], tenant: string, nextHref: string | undefined): SafeHtml {
  const rows: HtmlValue[][] = calls.map((c) => [
    html`<a href="${detailHref(tenant, c.requestId)}" title="${c.requestId}">${shortTime(c.at)}</a>`,
    c.project ? html`${c.key ?? "—"}<br><small>${c.project}</small>` : (c.key ?? "—"),
    c.entrypoint ?? "—",
    c.decision ?? "—",
    c.model ?? "—",
    c.backend ?? "—",
    count(c.attempts),
    outcomeText(c),
    ms(c.latencyMs),
    ms(c.ttftMs),
    c.tokens ? `${c.tokens.input} / ${c.tokens.output}` : "—",
    money(c.costMicros, c.currency),
    c.taskId ? html`<a href="${CONSOLE}/tasks/${encodeURIComponent(c.taskId)}?${String(new URLSearchParams({ tenant }))}">${c.taskId}</a>` : "—",
  ]);
  const next = nextHref === undefined ? html`` : html`<p><a href="${nextHref}" id="next-page" rel="next">Next page (older calls)</a></p>`;
  return html`<section id="requests">${table(["Time (UTC)", "Key", "Entrypoint", "Decision", "Model", "Backend", "Attempts", "Outcome", "Latency", "TTFT", "Tokens in / out", "Cost", "Task"], rows, "No calls match.")}${next}</section>`;
}

/** One call, field by field, with its prompt and completion when its content policy kept them. */
export function requestDetail(c: RequestLogView, tenant: string): SafeHtml {
  const fields: [string, HtmlValue][] = [
    ["Request", html`<code>${c.requestId}</code>`],
    ["Received", when(c.at)],
    ["Ended", when(c.endedAt)],
    ["Tenant", c.tenant ?? tenant],
    ["Key", c.key ?? "—"],
    ["Charged to", c.project ?? "—"],
    ["Entrypoint", c.entrypoint ?? "—"],
    ["Protocol", c.protocol ?? "—"],
    ["Streamed", c.stream === undefined ? "—" : c.stream ? "yes" : "no"],
    ["Kind", c.kind ?? "—"],
    ["Decision", c.decision ?? "—"],
    ["Model", c.model ?? "—"],
    ["Backend", c.backend ?? "—"],
    ["Attempts", count(c.attempts)],
    ["Outcome", outcomeText(c)],
    ["Latency", ms(c.latencyMs)],
    ["Time to first token", ms(c.ttftMs)],
    ["Tokens in", count(c.tokens?.input)],
    ["Tokens out", count(c.tokens?.output)],
    ["Cost", money(c.costMicros, c.currency)],
    ["Response cache", c.cache ?? "—"],
    ["Task", c.taskId ? html`<a href="${CONSOLE}/tasks/${encodeURIComponent(c.taskId)}?${String(new URLSearchParams({ tenant }))}">${c.taskId}</a>` : "—"],
    ["Session", c.sessionId ?? "—"],
    ["Made inside", c.parentRequestId ? html`<a href="${detailHref(tenant, c.parentRequestId)}">${c.parentRequestId}</a>` : "—"],
  ];
  const text = (t: { readonly text: string; readonly truncated: boolean } | undefined) => (t === undefined ? "—" : html`<pre>${t.text}</pre>${t.truncated ? html`<small>(cut)</small>` : ""}`);
  const content = c.content
    ? html`<section id="content"><h2>Content (sampled by the entrypoint's content policy)</h2><h3>Prompt</h3>${text(c.content.prompt)}<h3>Completion</h3>${text(c.content.completion)}</section>`
    : html`<p class="empty">No content: the entrypoint's content policy did not sample this call.</p>`;
  return html`<section id="call">${definitions(fields)}</section>${content}<p><a href="${CONSOLE}/requests?${String(new URLSearchParams({ tenant }))}">All calls</a></p>`;
}
