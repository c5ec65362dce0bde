import { html, type SafeHtml } from "./console-html.ts";

/*
 * How the console writes figures for people: money in its currency, counts with separators, times
 * both relative and absolute, limits with how full they are. The admin API keeps its exact
 * integers (micro-units); only the pages round.
 */

const moneyFormats = new Map<string, Intl.NumberFormat | null>();

/** A currency's formatter at a precision; null when the code is not an ISO 4217 currency. */
function moneyFormat(currency: string, fractionDigits: number): Intl.NumberFormat | null {
  const key = `${currency}:${fractionDigits}`;
  let f = moneyFormats.get(key);
  if (f === undefined) {
    try {
      f = new Intl.NumberFormat("en-US", { style: "currency", currency, minimumFractionDigits: 2, maximumFractionDigits: fractionDigits });
    } catch {
      f = null;
    }
    moneyFormats.set(key, f);
  }
  return f;
}

/**
 * Micro-units of a currency as people read them: `$1,000.00`, `$0.25`, `$0.000045`. Amounts of a
 * unit or more show cents; smaller ones keep every micro-unit (up to six decimals), so a
 * fraction of a cent is never shown as `$0.00`. An unknown currency code is written after the number.
 */
export function formatMoney(micros: number | undefined, currency: string | undefined): string {
  if (typeof micros !== "number" || !Number.isFinite(micros)) return "—";
  const amount = micros / 1_000_000;
  const digits = Math.abs(amount) >= 1 || amount === 0 ? 2 : 6;
  const f = currency === undefined ? null : moneyFormat(currency, digits);
  if (f) return f.format(amount);
  return `${amount.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: digits })}${currency ? ` ${currency}` : ""}`;
}

/** The currency of a ledger metric (`money:USD`, `balance:EUR`); undefined for tokens. */
export function currencyOfMetric(metric: string | undefined): string | undefined {
  const cut = metric?.indexOf(":") ?? -1;
  return cut < 0 ? undefined : metric!.slice(cut + 1);
}

const counts = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

/** A count (tokens, requests, calls) with thousands separators; `—` when unknown. */
export function formatCount(n: number | undefined): string {
  return typeof n === "number" && Number.isFinite(n) ? counts.format(n) : "—";
}

const UNITS: readonly [number, string][] = [
  [86_400_000, "d"],
  [3_600_000, "h"],
  [60_000, "min"],
  [1_000, "s"],
];

/** How long ago (or how soon) `t` is from `now`: `3 min ago`, `in 2 h`, `just now`. */
export function relativeTime(t: number, now: number): string {
  const d = now - t;
  const abs = Math.abs(d);
  if (abs < 1_000) return "just now";
  const [size, unit] = UNITS.find(([s]) => abs >= s)!;
  const v = Math.floor(abs / size);
  return d >= 0 ? `${v} ${unit} ago` : `in ${v} ${unit}`;
}

/** A time as both: relative text, the absolute UTC time beside it and in `datetime` (machine-readable). */
export function timeCell(t: number | string | undefined, now: number): SafeHtml {
  if (t === undefined) return html`—`;
  const ms = typeof t === "number" ? t : Date.parse(t);
  if (Number.isNaN(ms)) return html`${String(t)}`;
  const iso = new Date(ms).toISOString();
  return html`<time datetime="${iso}" title="${iso}">${relativeTime(ms, now)} <span class="abs">${iso.slice(0, 16).replace("T", " ")} UTC</span></time>`;
}

/**
 * How full a limit is: a `<meter>` (so assistive technology reads it as a gauge, and colour is
 * never the only cue) with the percentage as text.
 */
export function utilisation(used: number, limit: number): SafeHtml {
  if (!(limit > 0)) return html`—`;
  const pct = Math.min(100, Math.max(0, (used / limit) * 100));
  const shown = pct > 0 && pct < 1 ? "<1" : String(Math.round(pct));
  return html`<meter min="0" max="100" low="75" high="90" optimum="0" value="${pct.toFixed(1)}" aria-label="${shown}% used">${shown}%</meter> <span class="pct">${shown}%</span>`;
}
