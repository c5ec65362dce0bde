/**
 * HTML for the admin console: a tagged template that escapes every interpolated value unless it is
 * already markup built by this module, so a value from the API (a tool name, a reason, an audit
 * subject) can never become markup.
 */

const SAFE = Symbol("safe-html");

/** Markup this module built (escaped already): interpolating it does not escape it again. */
export interface SafeHtml {
  readonly [SAFE]: true;
  readonly text: string;
}

function safe(text: string): SafeHtml {
  return { [SAFE]: true, text };
}

function isSafe(v: unknown): v is SafeHtml {
  return typeof v === "object" && v !== null && SAFE in v;
}

const ENTITIES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;", "`": "&#96;" };

/** Text as HTML text or a quoted attribute value. */
export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"'`]/g, (ch) => ENTITIES[ch]!);
}

/** A value an HTML template interpolates: text (escaped), markup, nothing, or a list of either. */
export type HtmlValue = SafeHtml | string | number | boolean | null | undefined | readonly HtmlValue[];

function render(v: HtmlValue): string {
  if (v === null || v === undefined || v === false) return "";
  if (Array.isArray(v)) return v.map(render).join("");
  if (isSafe(v)) return v.text;
  return escapeHtml(v);
}

/** `html\`<td>${value}</td>\``: every interpolation escaped unless it is {@link SafeHtml}. */
export function html(strings: TemplateStringsArray, ...values: readonly HtmlValue[]): SafeHtml {
  let out = strings[0] ?? "";
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + (strings[i + 1] ?? "");
  return safe(out);
}

/**
 * Text a narrow cell may wrap inside: a break opportunity after each `/`, `.`, `_`, `@` and `:`
 * of a long name (`notifications/initialized`, `chat-small@1`), so a column need not be as wide as
 * its longest name, and a short word is never split mid-letter.
 */
function breakable(v: HtmlValue): HtmlValue {
  if (typeof v !== "string" || v.length <= 12) return v;
  return safe(escapeHtml(v).replace(/([/._@:])(?=[^\s])/g, "$1<wbr>"));
}

/** A table of rows; an empty list says so instead of showing an empty table. */
export function table(headers: readonly string[], rows: readonly (readonly HtmlValue[])[], empty = "Nothing to show."): SafeHtml {
  if (rows.length === 0) return html`<p class="empty">${empty}</p>`;
  return html`<table><thead><tr>${headers.map((h) => html`<th scope="col">${h}</th>`)}</tr></thead><tbody>${rows.map(
    (r) => html`<tr>${r.map((c) => html`<td>${breakable(c)}</td>`)}</tr>`,
  )}</tbody></table>`;
}

/** A section for an admin endpoint this gateway does not serve (yet): said plainly, not an error page. */
export function notAvailable(what: string, path: string): SafeHtml {
  return html`<section class="na"><h2>${what}: not available</h2><p>This gateway does not serve <code>${path}</code>.</p></section>`;
}

/** A failed admin call, with the API's own message. */
export function apiFailure(what: string, status: number, message: string): SafeHtml {
  return html`<section class="error"><h2>${what}: the admin API answered ${status}</h2><p>${message}</p></section>`;
}

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1b1f24;background:#f6f7f9}
header{background:#1b1f24;color:#fff;padding:.5rem 1rem;display:flex;gap:1rem;align-items:center;flex-wrap:wrap}
header nav{display:flex;gap:1rem;flex-wrap:wrap}
header a{color:#fff;text-decoration:none}header a.on{text-decoration:underline}
header form{margin-left:auto}
main{padding:1rem}
table{border-collapse:collapse;background:#fff;margin:.5rem 0 1rem;max-width:100%}
th,td{border:1px solid #d0d4da;padding:.25rem .5rem;text-align:left;vertical-align:top;overflow-wrap:break-word}
td code{overflow-wrap:anywhere}
time .abs{color:#555;font-size:12px;display:block}
meter{width:5rem;vertical-align:middle}
th{background:#eef0f3;overflow-wrap:normal}
code{font-size:12px}
.empty{color:#667}
.na{border-left:4px solid #c9a200;padding:.25rem 1rem;background:#fffbe6}
.error,.flash-error{border-left:4px solid #c0392b;padding:.25rem 1rem;background:#fdecea}
.flash{border-left:4px solid #2e7d32;padding:.25rem 1rem;background:#e8f5e9}
form.inline{display:inline-flex;gap:.25rem;align-items:center}
input[type=text],input[type=password]{padding:.2rem .4rem}
button{padding:.2rem .6rem;white-space:nowrap}
dl.fields{display:grid;grid-template-columns:max-content 1fr;gap:.1rem .75rem;margin:0}
dl.fields dt{font-weight:600}dl.fields dd{margin:0;overflow-wrap:anywhere}
.entrypoint th{overflow-wrap:normal}.entrypoint td strong{white-space:nowrap}
.tiers{margin:0;padding-left:1.25rem}
`;

/** One navigation entry: its label and path under the console. */
export interface NavItem {
  readonly label: string;
  readonly path: string;
}

/** A whole page: inline style only, no script, the navigation and a logout form when signed in. */
export function page(title: string, body: SafeHtml, chrome?: { readonly nav: readonly NavItem[]; readonly current: string; readonly csrf: string; readonly role: string }): string {
  const header = chrome
    ? html`<header><strong>Sluice console</strong><nav aria-label="Console pages">${chrome.nav.map(
        // The current page is said to assistive technology too, not only underlined.
        (n) => html`<a href="${n.path}"${n.path === chrome.current ? html` class="on" aria-current="page"` : ""}>${n.label}</a>`,
      )}</nav><span>signed in as ${chrome.role}</span><form method="post" action="/admin/console/logout"><input type="hidden" name="csrf" value="${chrome.csrf}"><button type="submit">Log out</button></form></header>`
    : html`<header><strong>Sluice console</strong></header>`;
  return `<!doctype html>${html`<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${title} · Sluice console</title><style>${safe(STYLE)}</style></head><body>${header}<main><h1>${title}</h1>${body}</main></body></html>`.text}`;
}
