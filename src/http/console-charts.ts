/**
 * Charts for the admin console, drawn on the server as inline SVG: no script and no external
 * asset, so the console's strict CSP stays as it is. Each chart names its figures in text (an
 * accessible title and description, a tooltip per bar) and comes with the same numbers as a table,
 * so nothing is told by colour or shape alone.
 */
import { html, table, type SafeHtml } from "./console-html.ts";
import { microsAsDecimal } from "./budget-headers.ts";

const DAY_MS = 86_400_000;

/** One day of `GET /admin/budgets/:tenant/usage?by=day`. */
export interface SpendDayView {
  readonly day: string;
  readonly dayStart: number;
  readonly requests: number;
  readonly tokens: number;
  readonly cost: readonly { readonly currency: string; readonly amount: string; readonly micros: number }[];
}

/** What one bar of the chart shows. */
interface Bar {
  readonly day: string;
  readonly micros: number;
  readonly amount: string;
  readonly requests: number;
  readonly tokens: number;
}

const WIDTH = 720;
const HEIGHT = 180;
const LEFT = 8;
const BOTTOM = 20;
const TOP = 16;


/** The last `span` UTC days up to and including the one holding `now`, each with its spend in `currency` (0 where none). */
function barsOf(days: readonly SpendDayView[], currency: string, now: number, span: number): Bar[] {
  const byDay = new Map(days.map((d) => [d.dayStart, d]));
  const today = now - (now % DAY_MS);
  return Array.from({ length: span }, (_, i) => {
    const dayStart = today - (span - 1 - i) * DAY_MS;
    const d = byDay.get(dayStart);
    const c = d?.cost.find((x) => x.currency === currency);
    return { day: new Date(dayStart).toISOString().slice(0, 10), micros: c?.micros ?? 0, amount: c?.amount ?? microsAsDecimal(0, "fixed"), requests: c ? d!.requests : 0, tokens: c ? d!.tokens : 0 };
  });
}

/** One currency's bars as an SVG chart, tallest bar at full height. */
function barChart(id: string, caption: string, currency: string, bars: readonly Bar[]): SafeHtml {
  const max = Math.max(0, ...bars.map((b) => b.micros));
  const slot = (WIDTH - LEFT) / bars.length;
  const plot = HEIGHT - TOP - BOTTOM;
  const total = bars.reduce((a, b) => a + b.micros, 0);
  const rects = bars.map((b, i) => {
    // A day with spend stays visible however small it is beside the largest.
    const h = max === 0 || b.micros === 0 ? 0 : Math.max(1, Math.round((b.micros / max) * plot));
    const x = (LEFT + i * slot + slot * 0.1).toFixed(1);
    return html`<rect class="bar" x="${x}" y="${HEIGHT - BOTTOM - h}" width="${(slot * 0.8).toFixed(1)}" height="${h}" data-day="${b.day}" data-micros="${b.micros}"><title>${b.day}: ${b.amount} ${currency}, ${b.requests} requests</title></rect>`;
  });
  // A date under the first bar, every seventh, and the last; a seventh too near the last is left
  // out, or the two dates would print over each other.
  const last = bars.length - 1;
  const labels = bars.map((b, i) =>
    i === last || (i % 7 === 0 && last - i >= 3) ? html`<text x="${(LEFT + i * slot + slot / 2).toFixed(1)}" y="${HEIGHT - 5}" text-anchor="middle" font-size="10">${b.day.slice(5)}</text>` : html``,
  );
  return html`<figure class="chart"><svg id="${id}" role="img" aria-labelledby="${id}-title ${id}-desc" viewBox="0 0 ${WIDTH} ${HEIGHT}" width="100%" preserveAspectRatio="xMidYMid meet" xmlns="http://www.w3.org/2000/svg"><title id="${id}-title">${caption}</title><desc id="${id}-desc">${bars.length} daily bars from ${bars[0]?.day ?? ""} to ${bars.at(-1)?.day ?? ""}; total ${microsAsDecimal(total, "fixed")} ${currency}, largest day ${microsAsDecimal(max, "fixed")} ${currency}.</desc><line x1="${LEFT}" y1="${HEIGHT - BOTTOM}" x2="${WIDTH}" y2="${HEIGHT - BOTTOM}" stroke="currentColor" stroke-width="1"></line><text x="${LEFT}" y="${TOP - 4}" font-size="10">max ${microsAsDecimal(max, "fixed")} ${currency}/day</text><g fill="currentColor" fill-opacity="0.7">${rects}</g>${labels}</svg><figcaption>${caption}: ${microsAsDecimal(total, "fixed")} ${currency} in ${bars.length} days</figcaption></figure>`;
}

/**
 * A tenant's settled spend over the last `span` UTC days (30 by default): a bar chart per currency
 * and a table of the days with spend, from the daily rollups the admin API serves.
 */
export function spendSection(tenant: string, days: readonly SpendDayView[], now: number, span = 30): SafeHtml {
  const currencies = [...new Set(days.flatMap((d) => d.cost.map((c) => c.currency)))].sort();
  const title = `Spend, last ${span} days`;
  if (currencies.length === 0) return html`<section class="spend" data-spend-tenant="${tenant}"><h3>${title}</h3><p class="empty">No settled spend in the last ${span} days.</p></section>`;
  const charts = currencies.map((cur) => {
    const bars = barsOf(days, cur, now, span);
    const rows = bars.filter((b) => b.micros > 0 || b.requests > 0).map((b) => [b.day, `${b.amount} ${cur}`, b.requests, b.tokens]);
    return html`${barChart(`spend-${tenant}-${cur}`.replace(/[^A-Za-z0-9_-]/g, "_"), `${tenant}: settled spend per UTC day (${cur})`, cur, bars)}${table(["Day (UTC)", "Spend", "Requests", "Tokens"], rows, "No settled spend.")}`;
  });
  return html`<section class="spend" data-spend-tenant="${tenant}"><h3>${title}</h3>${charts}</section>`;
}
