import type { ConditionConfig } from "../signals/conditions.ts";
import { formatCount } from "./console-format.ts";
import { html, table, type HtmlValue, type SafeHtml } from "./console-html.ts";

/** One logical model of a tier as `GET /admin/routes` describes it (fields an older gateway lacks are optional). */
export interface RouteModelView {
  readonly model: string;
  readonly revision: number | null;
  readonly pool: string | null;
  readonly selector?: string | null;
  readonly backends?: readonly { readonly name: string; readonly protocol: string; readonly model: string; readonly weight?: number }[];
  readonly resolvable?: boolean;
}

/** Tiers of models: the first model of the first tier is tried first. */
export type TiersView = readonly (readonly RouteModelView[])[];

/** A route (the first-match form of decisions) as `GET /admin/routes` describes it. */
export interface RouteView {
  readonly name: string;
  readonly when: Readonly<Record<string, unknown>>;
  readonly tiers: TiersView;
}

/** A decision as `GET /admin/routes` describes it; `tiers` null: the entrypoint's default tiers serve it. */
export interface DecisionView {
  readonly name: string;
  readonly description?: string | null;
  readonly priority: number;
  readonly when: ConditionConfig;
  readonly onUnknown: string;
  readonly tiers: TiersView | null;
  readonly plugins: readonly string[];
  readonly algorithm: { readonly kind: string; readonly [k: string]: unknown } | null;
}

/** An entrypoint as `GET /admin/routes` describes it. */
export interface EntrypointRoutesView {
  readonly name: string;
  readonly description?: string | null;
  readonly operation?: string;
  readonly plugins?: readonly string[];
  readonly routes: readonly RouteView[];
  readonly decisions?: readonly DecisionView[];
  readonly default: TiersView;
  readonly maxAttempts: number;
  readonly affinityHeader: string | null;
}

/** `GET /admin/routes`, as the Routes page reads it. */
export interface RouteTableView {
  readonly snapshotRevision: number;
  readonly publicationRevision: string;
  readonly entrypoints: readonly EntrypointRoutesView[];
}

/** A named plugin or signal of the publication, as `GET /admin/config` shows it: what the Routes page says of a name. */
export interface NamedPart {
  readonly name: string;
  readonly kind: string;
  readonly [k: string]: unknown;
}

/** The key of a decision's figure in the Routes page's `recent` map. */
export function recentKey(entrypoint: string, decision: string): string {
  return `${entrypoint}\u0000${decision}`;
}

const CONSOLE = "/admin/console";

function literal(v: unknown): string {
  return typeof v === "string" ? JSON.stringify(v) : String(v);
}

/**
 * A decision's condition as a person reads it: `topic is "code"`, `prompt-tokens above 4000`,
 * `jailbreak` (a test without an operator asks whether the value is "on"), `all of (…; …)`.
 */
export function describeCondition(c: ConditionConfig): string {
  if ("all" in c) return `all of (${c.all.map(describeCondition).join("; ")})`;
  if ("any" in c) return `any of (${c.any.map(describeCondition).join("; ")})`;
  if ("not" in c) return `not (${describeCondition(c.not)})`;
  const subject = c.key === undefined ? c.signal : `${c.signal}.${c.key}`;
  if (c.is !== undefined) return `${subject} is ${literal(c.is)}`;
  if (c.in !== undefined) return `${subject} in [${c.in.map(literal).join(", ")}]`;
  if (c.above !== undefined) return `${subject} above ${c.above}`;
  if (c.atMost !== undefined) return `${subject} at most ${c.atMost}`;
  if (c.contains !== undefined) return `${subject} contains ${literal(c.contains)}`;
  return `${subject} is on`;
}

/** A route's `when` (every given test must hold) as a person reads it. */
export function describeRouteWhen(w: Readonly<Record<string, unknown>>): string {
  const parts: string[] = [];
  const words = w.keywords;
  if (Array.isArray(words)) parts.push(`the last user message has any of the words ${words.map(literal).join(", ")}`);
  const rx = w.regex as { pattern?: unknown; flags?: unknown } | undefined;
  if (rx !== undefined) parts.push(`the last user message matches /${String(rx.pattern)}/${typeof rx.flags === "string" ? rx.flags : ""}`);
  if (typeof w.promptTokensAbove === "number") parts.push(`prompt tokens above ${w.promptTokensAbove}`);
  if (typeof w.promptTokensAtMost === "number") parts.push(`prompt tokens at most ${w.promptTokensAtMost}`);
  if (typeof w.toolsPresent === "boolean") parts.push(w.toolsPresent ? "the request has tools" : "the request has no tools");
  if (typeof w.imagesPresent === "boolean") parts.push(w.imagesPresent ? "the request has images" : "the request has no images");
  const h = w.header as { name?: unknown; in?: unknown } | undefined;
  if (h !== undefined) parts.push(`header ${String(h.name)} in [${Array.isArray(h.in) ? h.in.map(literal).join(", ") : ""}]`);
  return parts.length === 0 ? "—" : parts.join(" and ");
}

/** Tiers as a list: one line per tier, each model with its backends (`chat-large → sim-local (openai-chat, sim-large)`). */
export function tiersCell(tiers: TiersView): SafeHtml {
  return html`<ol class="tiers">${tiers.map(
    (tier) =>
      html`<li>${tier.map((m, i) => {
        const backends = m.backends ?? [];
        const where =
          backends.length === 0
            ? html` <span class="flash-error">no backend</span>`
            : html` → ${backends.map((b, j) => html`${j > 0 ? ", " : ""}${b.name} <small>(${b.protocol}, ${b.model})</small>`)}`;
        return html`${i > 0 ? " | " : ""}<strong>${m.model}</strong>${m.revision === null ? "" : html` <small>r${m.revision}</small>`}${where}`;
      })}</li>`,
  )}</ol>`;
}

function pluginList(names: readonly string[], plugins: ReadonlyMap<string, NamedPart>): HtmlValue {
  if (names.length === 0) return "—";
  return names.map((n, i) => {
    const p = plugins.get(n);
    const detail = p === undefined ? "" : typeof p.action === "string" ? `${p.kind}, ${p.action}` : p.kind;
    return html`${i > 0 ? ", " : ""}${n}${detail === "" ? "" : html` <small>(${detail})</small>`}`;
  });
}

function algorithmText(a: DecisionView["algorithm"]): string {
  if (a === null) return "—";
  const rest = Object.entries(a).filter(([k, v]) => k !== "kind" && k !== "bounds" && k !== "perModelCall" && (typeof v === "string" || typeof v === "number"));
  return rest.length === 0 ? a.kind : `${a.kind} (${rest.map(([k, v]) => `${k} ${String(v)}`).join(", ")})`;
}

/**
 * One entrypoint's decisions in the order they are tried, then its default, each with what it
 * matches and its plan. The "Recent requests" column is there only when `recent` is given: no
 * figure is shown that nothing counted.
 */
export function entrypointSection(ep: EntrypointRoutesView, plugins: ReadonlyMap<string, NamedPart>, recent?: ReadonlyMap<string, number>): SafeHtml {
  const decisions = ep.decisions ?? [];
  const withRecent = recent !== undefined;
  const figure = (name: string) => formatCount(recent?.get(recentKey(ep.name, name)) ?? 0);
  const headers = ["Decision", "Priority", "When", "Plan (tiers in order)", "Algorithm", "Plugins", "If a signal is unknown", ...(withRecent ? ["Requests, last 15 min"] : [])];
  const rows: HtmlValue[][] = [
    ...decisions.map((d) => [
      d.description ? html`<strong>${d.name}</strong><br><small>${d.description}</small>` : html`<strong>${d.name}</strong>`,
      String(d.priority),
      describeCondition(d.when),
      d.tiers === null ? html`<em>the default tiers</em>` : tiersCell(d.tiers),
      algorithmText(d.algorithm),
      pluginList(d.plugins, plugins),
      d.onUnknown === "refuse" ? "refuse (503 signal_unavailable)" : "skip to the next decision",
      ...(withRecent ? [figure(d.name)] : []),
    ]),
    ...ep.routes.map((r) => [html`<strong>${r.name}</strong>`, "0", describeRouteWhen(r.when), tiersCell(r.tiers), "—", "—", "—", ...(withRecent ? [figure(r.name)] : [])]),
    [html`<strong>default</strong>`, "—", "no decision holds", tiersCell(ep.default), "—", "—", "—", ...(withRecent ? [figure("default")] : [])],
  ];
  const facts = [
    ep.operation && ep.operation !== "chat" ? `serves ${ep.operation}` : undefined,
    `up to ${ep.maxAttempts} upstream attempt${ep.maxAttempts === 1 ? "" : "s"}`,
    ep.affinityHeader ? `sticky by the ${ep.affinityHeader} header` : undefined,
  ].filter((f): f is string => f !== undefined);
  const explain =
    ep.operation === undefined || ep.operation === "chat" ? html` · <a href="${CONSOLE}/explain?${String(new URLSearchParams({ entrypoint: ep.name }))}">Explain a request to ${ep.name}</a>` : "";
  return html`<section class="entrypoint" data-entrypoint="${ep.name}"><h2>${ep.name}</h2>${ep.description ? html`<p>${ep.description}</p>` : ""}<p>${facts.join(" · ")}${
    (ep.plugins ?? []).length > 0 ? html` · every request runs ${pluginList(ep.plugins ?? [], plugins)} first` : ""
  }${explain}</p>${table(headers, rows)}</section>`;
}

/** The Routes page: every entrypoint's decisions, and the signals they test. */
export function routesSection(view: RouteTableView, signals: readonly NamedPart[], plugins: readonly NamedPart[], recent?: ReadonlyMap<string, number>): SafeHtml {
  const byName = new Map(plugins.map((p) => [p.name, p]));
  const signalRows = signals.map((s) => [html`<code>${s.name}</code>`, s.kind, signalSummary(s)]);
  return html`<p>Publication <code>${view.publicationRevision}</code>, backend snapshot ${view.snapshotRevision}. Decisions are tried top to bottom; the first whose condition holds wins, else the default serves. <a href="${CONSOLE}/explain">Explain a request</a></p>${view.entrypoints.map(
    (ep) => entrypointSection(ep, byName, recent),
  )}<section id="signals"><h2>Signals</h2>${table(["Signal", "Kind", "Reads"], signalRows, "The publication declares no signals (routes test the request directly).")}</section>`;
}

/** What a signal looks at, in a few words (a similarity signal's categories, not its utterances). */
function signalSummary(s: NamedPart): string {
  const parts: string[] = [];
  if (typeof s.model === "string") parts.push(`model ${s.model}`);
  if (Array.isArray(s.categories)) parts.push(`categories ${s.categories.map((c) => String((c as { name?: unknown }).name)).join(", ")}`);
  if (typeof s.threshold === "number") parts.push(`threshold ${s.threshold}`);
  if (typeof s.margin === "number") parts.push(`margin ${s.margin}`);
  if (typeof s.header === "string") parts.push(`header ${s.header}`);
  if (Array.isArray(s.words)) parts.push(`words ${s.words.join(", ")}`);
  if (typeof s.pattern === "string") parts.push(`pattern /${s.pattern}/`);
  if (typeof s.in === "string") parts.push(`in ${s.in}`);
  return parts.length === 0 ? "—" : parts.join("; ");
}
