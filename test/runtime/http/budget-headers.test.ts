import { describe, expect, it } from "vitest";
import { limitFigure, microsAsDecimal } from "../../../src/http/budget-headers.ts";

describe("budget header figures", () => {
  it("spells micro-units as an exact decimal amount of the currency", () => {
    expect(microsAsDecimal(999_997_531)).toBe("999.997531");
    expect(microsAsDecimal(180_000)).toBe("0.18");
    expect(microsAsDecimal(45, "fixed")).toBe("0.000045");
    expect(microsAsDecimal(1_500_000, "fixed")).toBe("1.500000");
    expect(microsAsDecimal(45)).toBe("0.000045");
    expect(microsAsDecimal(5_000_000)).toBe("5");
    expect(microsAsDecimal(0)).toBe("0");
    expect(microsAsDecimal(-2_500_000)).toBe("-2.5");
    // Past 2^53 / 10^6 a float division would lose digits; the integer spelling does not.
    expect(microsAsDecimal(9_007_199_254_740_991)).toBe("9007199254.740991");
  });

  it("says the unit by the metric: money and balances in their currency, tokens and requests as counts", () => {
    expect(limitFigure("money:USD", 999_997_531)).toBe("money:USD=999.997531");
    expect(limitFigure("balance:EUR", 1_250_000)).toBe("balance:EUR=1.25");
    expect(limitFigure("tokens", 49_990_000)).toBe("tokens=49990000");
    expect(limitFigure("requests", 7)).toBe("requests=7");
  });
});
