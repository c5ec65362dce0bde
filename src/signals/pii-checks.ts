/**
 * The checks that turn a PII detector's candidate into a match: check digits, issuer tables and
 * address grammars. Each takes the candidate's own text and is linear in it.
 */

/** Luhn (mod 10) over a string of ASCII digits. */
export function luhnValid(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

/** An issuer's number range: the first `digits` digits in [from, to], and the lengths it issues. */
interface CardRange {
  readonly from: number;
  readonly to: number;
  readonly digits: number;
  readonly lengths: readonly number[];
}

const r = (from: number, to: number, lengths: readonly number[]): CardRange => ({ from, to, digits: String(from).length, lengths });
const L16_19 = [16, 17, 18, 19];

/**
 * The major networks' published IIN ranges and lengths. A 13–19 digit number that passes Luhn but
 * starts outside these (an order number, a timestamp, a tracking number) is not a card.
 */
const CARD_RANGES: readonly CardRange[] = [
  r(4, 4, [13, 16, 19]), // Visa
  r(51, 55, [16]), // Mastercard
  r(2221, 2720, [16]), // Mastercard 2-series
  r(34, 34, [15]), // American Express
  r(37, 37, [15]),
  r(6011, 6011, L16_19), // Discover
  r(644, 649, L16_19),
  r(65, 65, L16_19),
  r(3528, 3589, L16_19), // JCB
  r(300, 305, [14, 15, 16, 17, 18, 19]), // Diners Club
  r(3095, 3095, [14, 15, 16, 17, 18, 19]),
  r(36, 36, [14, 15, 16, 17, 18, 19]),
  r(38, 39, [14, 15, 16, 17, 18, 19]),
  r(62, 62, L16_19), // UnionPay
  r(2200, 2204, L16_19), // Mir
  r(5018, 5018, [13, 14, 15, 16, 17, 18, 19]), // Maestro
  r(5020, 5020, [13, 14, 15, 16, 17, 18, 19]),
  r(5038, 5038, [13, 14, 15, 16, 17, 18, 19]),
  r(5893, 5893, [13, 14, 15, 16, 17, 18, 19]),
  r(6304, 6304, [13, 14, 15, 16, 17, 18, 19]),
  r(6759, 6759, [13, 14, 15, 16, 17, 18, 19]),
  r(6761, 6763, [13, 14, 15, 16, 17, 18, 19]),
];

/** A payment card number (digits only): a known issuer's prefix and length, and Luhn. */
export function cardValid(digits: string): boolean {
  if (digits.length < 13 || digits.length > 19) return false;
  const issued = CARD_RANGES.some((c) => {
    const prefix = Number(digits.slice(0, c.digits));
    return prefix >= c.from && prefix <= c.to && c.lengths.includes(digits.length);
  });
  return issued && luhnValid(digits);
}

/** IBAN length per country (ISO 13616 registry). */
export const IBAN_LENGTHS: Readonly<Record<string, number>> = {
  AD: 24, AE: 23, AL: 28, AT: 20, AZ: 28, BA: 20, BE: 16, BG: 22, BH: 22, BI: 27, BR: 29, BY: 28,
  CH: 21, CR: 22, CY: 28, CZ: 24, DE: 22, DJ: 27, DK: 18, DO: 28, EE: 20, EG: 29, ES: 24, FI: 18,
  FK: 18, FO: 18, FR: 27, GB: 22, GE: 22, GI: 23, GL: 18, GR: 27, GT: 28, HR: 21, HU: 28, IE: 22,
  IL: 23, IQ: 23, IS: 26, IT: 27, JO: 30, KW: 30, KZ: 20, LB: 28, LC: 32, LI: 21, LT: 20, LU: 20,
  LV: 21, LY: 25, MC: 27, MD: 24, ME: 22, MK: 19, MN: 20, MR: 27, MT: 31, MU: 30, NI: 28, NL: 18,
  NO: 15, OM: 23, PK: 24, PL: 28, PS: 29, PT: 25, QA: 29, RO: 24, RS: 22, RU: 33, SA: 24, SC: 31,
  SD: 18, SE: 24, SI: 19, SK: 24, SM: 27, SO: 23, ST: 25, SV: 28, TL: 23, TN: 24, TR: 26, UA: 29,
  VA: 22, VG: 24, XK: 20,
};

/** An IBAN in electronic form (no spaces, upper case): the country's length and ISO 7064 mod 97-10. */
export function ibanValid(iban: string): boolean {
  if (IBAN_LENGTHS[iban.slice(0, 2)] !== iban.length) return false;
  const rearranged = iban.slice(4) + iban.slice(0, 4);
  let rest = 0;
  for (let i = 0; i < rearranged.length; i++) {
    const c = rearranged.charCodeAt(i);
    // Digits count as themselves, letters as 10–35 (two digits), folded in one digit at a time.
    if (c >= 48 && c <= 57) rest = (rest * 10 + (c - 48)) % 97;
    else if (c >= 65 && c <= 90) rest = (rest * 100 + (c - 55)) % 97;
    else return false;
  }
  return rest === 1;
}

/** A dotted-quad IPv4 address: four decimal octets of at most 255, without leading zeros. */
export function ipv4Valid(text: string): boolean {
  const parts = text.split(".");
  return parts.length === 4 && parts.every((p) => /^(?:0|[1-9]\d{0,2})$/.test(p) && Number(p) <= 255);
}

const HEX_GROUP = /^[0-9A-Fa-f]{1,4}$/;

/**
 * An IPv6 address in RFC 4291 text form: eight groups of 1–4 hex digits, or fewer around one
 * `::`; the last 32 bits may be written as an IPv4 address. Zone ids are not part of it.
 */
export function ipv6Valid(text: string): boolean {
  const halves = text.split("::");
  if (halves.length > 2) return false;
  const head = groupCount(halves[0]!, halves.length === 1);
  if (halves.length === 1) return head === 8;
  const tail = groupCount(halves[1]!, true);
  return head >= 0 && tail >= 0 && head + tail <= 7;
}

/** The 16-bit groups a colon-separated run stands for; -1 if it is not one. An embedded IPv4 address may end only the last run. */
function groupCount(run: string, last: boolean): number {
  if (run === "") return 0;
  const parts = run.split(":");
  let count = 0;
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]!;
    if (HEX_GROUP.test(p)) count += 1;
    else if (last && i === parts.length - 1 && ipv4Valid(p)) count += 2;
    else return -1;
  }
  return count;
}

/** A US Social Security number's parts: no 000, 666 or 9xx area, no 00 group, no 0000 serial. */
export function ssnValid(area: string, group: string, serial: string): boolean {
  return area !== "000" && area !== "666" && area[0] !== "9" && group !== "00" && serial !== "0000";
}
