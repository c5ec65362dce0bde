/**
 * How the budget figures an answer carries are spelled, so a reader sees the unit: the ledger
 * counts money in millionths of a currency, and `money:USD=999997531` read as a billion dollars.
 */

/** Digits of a millionth: the ledger's money unit. */
const MICRO_DIGITS = 6;

/**
 * Micro-units as a decimal amount of the currency. `shortest` (headers) drops trailing zeros
 * (`999997531` → `999.997531`, `180000` → `0.18`, `5000000` → `5`); `fixed` (the admin API's
 * `amount`) keeps all six places (`45` → `0.000045`, `0` → `0.000000`). Integer arithmetic
 * throughout, so the digits are exact.
 */
export function microsAsDecimal(micros: number, places: "shortest" | "fixed" = "shortest"): string {
  const n = Math.trunc(micros);
  const sign = n < 0 ? "-" : "";
  const digits = String(Math.abs(n)).padStart(MICRO_DIGITS + 1, "0");
  const whole = digits.slice(0, -MICRO_DIGITS);
  const all = digits.slice(-MICRO_DIGITS);
  const fraction = places === "fixed" ? all : all.replace(/0+$/, "");
  return `${sign}${whole}${fraction === "" ? "" : `.${fraction}`}`;
}

/**
 * One limit's figure as `metric=value`: money and prepaid balances (`money:USD`, `balance:EUR`)
 * as a decimal amount of their currency, tokens and requests as whole numbers.
 */
export function limitFigure(metric: string, value: number): string {
  const money = metric.startsWith("money:") || metric.startsWith("balance:");
  return `${metric}=${money ? microsAsDecimal(value) : String(Math.trunc(value))}`;
}
