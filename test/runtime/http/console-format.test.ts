import { describe, expect, it } from "vitest";
import { formatCount, formatMoney, relativeTime, timeCell, utilisation } from "../../../src/http/console-format.ts";

describe("console figures", () => {
  it("writes money in its currency: cents from one unit up, every micro-unit below, never $0.00 for a fraction of a cent", () => {
    expect(formatMoney(1_000_000_000, "USD")).toBe("$1,000.00");
    expect(formatMoney(45, "USD")).toBe("$0.000045");
    expect(formatMoney(250_000, "USD")).toBe("$0.25");
    expect(formatMoney(1_234_567, "EUR")).toBe("€1.23");
    expect(formatMoney(0, "USD")).toBe("$0.00");
    expect(formatMoney(-2_500_000, "USD")).toBe("-$2.50");
    // Not an ISO 4217 code: the number, then the code as configured.
    expect(formatMoney(1_500_000, "CREDITS")).toBe("1.50 CREDITS");
    expect(formatMoney(undefined, "USD")).toBe("—");
  });

  it("writes counts with thousands separators", () => {
    expect(formatCount(50_000_000)).toBe("50,000,000");
    expect(formatCount(7)).toBe("7");
    expect(formatCount(undefined)).toBe("—");
  });

  it("writes times relative and absolute, machine-readable in datetime", () => {
    const now = Date.parse("2026-12-07T15:00:00Z");
    expect(relativeTime(now - 3 * 60_000, now)).toBe("3 min ago");
    expect(relativeTime(now + 2 * 3_600_000, now)).toBe("in 2 h");
    expect(relativeTime(now - 200, now)).toBe("just now");
    expect(timeCell(now - 86_400_000 * 2, now).text).toBe('<time datetime="2026-12-05T15:00:00.000Z" title="2026-12-05T15:00:00.000Z">2 d ago <span class="abs">2026-12-05 15:00 UTC</span></time>');
    expect(timeCell(undefined, now).text).toBe("—");
  });

  it("shows how full a limit is as a meter with its percentage in text", () => {
    expect(utilisation(45, 1_000_000_000).text).toContain("&lt;1%");
    expect(utilisation(900, 1000).text).toBe('<meter min="0" max="100" low="75" high="90" optimum="0" value="90.0" aria-label="90% used">90%</meter> <span class="pct">90%</span>');
    expect(utilisation(5, 0).text).toBe("—");
  });
});
