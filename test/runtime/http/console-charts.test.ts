import { describe, expect, it } from "vitest";
import { spendSection, type SpendDayView } from "../../../src/http/console-charts.ts";

const DAY = 86_400_000;
const NOW = Date.UTC(2026, 11, 7, 15, 0);
const TODAY = NOW - (NOW % DAY);
const dayOf = (t: number) => new Date(t).toISOString().slice(0, 10);
const spend = (dayStart: number, micros: number, requests: number, currency = "USD"): SpendDayView => ({
  day: dayOf(dayStart),
  dayStart,
  requests,
  tokens: requests * 100,
  cost: [{ currency, amount: `${Math.floor(micros / 1e6)}.${String(micros % 1e6).padStart(6, "0")}`, micros }],
});
const bars = (text: string) => [...text.matchAll(/<rect class="bar" x="[^"]+" y="(\d+)" width="[^"]+" height="(\d+)" data-day="([^"]+)" data-micros="(\d+)">/g)].map((m) => ({ y: Number(m[1]), h: Number(m[2]), day: m[3]!, micros: Number(m[4]) }));

describe("console charts: spend per day", () => {
  it("draws one bar per day of the last 30 (empty days at zero), heights proportional, with the numbers in text and in a table", () => {
    const days = [spend(TODAY - 29 * DAY, 500_000, 5), spend(TODAY - 3 * DAY, 45, 1), spend(TODAY, 2_000_000, 20)];
    const { text } = spendSection("acme", days, NOW);
    const drawn = bars(text);
    expect(drawn).toHaveLength(30);
    expect(drawn[0]).toMatchObject({ day: dayOf(TODAY - 29 * DAY), micros: 500_000 });
    expect(drawn.at(-1)).toMatchObject({ day: dayOf(TODAY), micros: 2_000_000 });
    expect(drawn.filter((b) => b.micros === 0).every((b) => b.h === 0)).toBe(true);
    // The largest day fills the plot; the others scale to it; a tiny one stays visible.
    const full = drawn.at(-1)!.h;
    expect(drawn[0]!.h).toBe(Math.round(full / 4));
    expect(drawn[26]).toMatchObject({ micros: 45, h: 1 });
    expect(drawn.every((b) => b.y + b.h === drawn[0]!.y + drawn[0]!.h)).toBe(true);
    // Readable without the picture: a description with the total, a tooltip per bar, and the table.
    expect(text).toContain("total 2.500045 USD, largest day 2.000000 USD");
    expect(text).toContain(`<title>${dayOf(TODAY)}: 2.000000 USD, 20 requests</title>`);
    const rows = [...text.matchAll(/<tr><td>(\d{4}-\d\d-\d\d)<\/td><td>([^<]+)<\/td><td>(\d+)<\/td><td>(\d+)<\/td><\/tr>/g)].map((m) => m.slice(1));
    expect(rows).toEqual(days.map((d) => [d.day, `${d.cost[0]!.amount} USD`, String(d.requests), String(d.tokens)]));
    // Nothing a strict CSP would block, and nothing fetched.
    expect(text).not.toMatch(/<script|style=|href=|xlink|url\(/);
    expect(text).toMatch(/<svg id="spend-acme-USD" role="img" aria-labelledby="spend-acme-USD-title spend-acme-USD-desc"/);
    // Dates under the first bar, every seventh and the last, never two printed over each other.
    const labelled = [...text.matchAll(/<text x="[^"]+" y="[^"]+" text-anchor="middle" font-size="10">(\d\d-\d\d)<\/text>/g)].map((m) => drawn.findIndex((b) => b.day.slice(5) === m[1]));
    expect(labelled).toEqual([0, 7, 14, 21, 29]);
  });

  it("leaves out days older than the span, draws one chart per currency, escapes names, and says when there is nothing", () => {
    const { text } = spendSection('t<"x>', [spend(TODAY - 30 * DAY, 9, 1), spend(TODAY - DAY, 7, 1, "EUR"), spend(TODAY, 3, 1)], NOW);
    expect(text).not.toContain('t<"x>');
    expect(text).toContain("t&lt;&quot;x&gt;");
    const drawn = bars(text);
    expect(drawn).toHaveLength(60);
    expect(drawn.slice(0, 30).map((b) => b.micros).filter((m) => m > 0)).toEqual([7]);
    expect(drawn.slice(30).map((b) => b.micros).filter((m) => m > 0)).toEqual([3]);
    expect(spendSection("acme", [], NOW).text).toContain("No settled spend in the last 30 days.");
  });
});
