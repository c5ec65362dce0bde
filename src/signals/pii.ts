import { fromBase64url } from "../digest/base64url.ts";
import { cardValid, IBAN_LENGTHS, ibanValid, ipv4Valid, ipv6Valid, ssnValid } from "./pii-checks.ts";

/**
 * The named PII detectors. Each finds candidates of one shape and keeps only those that pass its
 * validation (check digits, issuer tables, grammars), so a number that merely looks like a card
 * is not one. The order is the tie-break when two detectors claim exactly the same span: the
 * more specific first.
 */
export const PII_DETECTORS = ["private_key", "jwt", "api_key", "email", "payment_card", "iban", "us_ssn", "ip_address", "phone"] as const;

/** One of {@link PII_DETECTORS}. */
export type PiiDetector = (typeof PII_DETECTORS)[number];

/** A validated match: `start` and `end` are UTF-16 offsets into the text, as `String.prototype.slice` takes them. */
export interface PiiMatch {
  readonly detector: PiiDetector;
  readonly start: number;
  readonly end: number;
}

type Push = (start: number, end: number) => void;

/**
 * Every validated match of the given detectors in `text`, in text order, never overlapping. Of
 * two matches that overlap the one that starts earlier wins; at the same start the longer; on
 * the same span the detector listed first in {@link PII_DETECTORS}.
 *
 * Linear in the length of the text: every detector either walks the text once or runs regular
 * expressions whose work per starting position is bounded (and greedy runs with nothing after
 * them to fail), so no prompt can make it backtrack without bound.
 */
export function findPii(text: string, detectors: ReadonlySet<PiiDetector>): PiiMatch[] {
  const found: PiiMatch[] = [];
  for (const detector of PII_DETECTORS) {
    if (!detectors.has(detector)) continue;
    SCANNERS[detector](text, (start, end) => found.push({ detector, start, end }));
  }
  const rank = (d: PiiDetector) => PII_DETECTORS.indexOf(d);
  found.sort((a, b) => a.start - b.start || b.end - a.end || rank(a.detector) - rank(b.detector));
  const kept: PiiMatch[] = [];
  let reached = 0;
  for (const m of found) {
    if (m.start < reached) continue;
    kept.push(m);
    reached = m.end;
  }
  return kept;
}

/**
 * How many matches each of the given detectors has in `text` (zero included), counted as
 * {@link findPii} counts them. What a signal reports: never the matched text.
 */
export function countPii(text: string, detectors: ReadonlySet<PiiDetector>): Readonly<Partial<Record<PiiDetector, number>>> {
  const counts: Partial<Record<PiiDetector, number>> = {};
  for (const d of PII_DETECTORS) if (detectors.has(d)) counts[d] = 0;
  for (const m of findPii(text, detectors)) counts[m.detector] = (counts[m.detector] ?? 0) + 1;
  return counts;
}

const SCANNERS: Readonly<Record<PiiDetector, (text: string, push: Push) => void>> = {
  private_key: scanPrivateKeys,
  jwt: scanJwts,
  api_key: scanApiKeys,
  email: scanEmails,
  payment_card: scanCards,
  iban: scanIbans,
  us_ssn: scanSsns,
  ip_address: scanIps,
  phone: scanPhones,
};

const isDigit = (c: number) => c >= 48 && c <= 57;
const isUpper = (c: number) => c >= 65 && c <= 90;
const isLower = (c: number) => c >= 97 && c <= 122;
const isAlnum = (c: number) => isDigit(c) || isUpper(c) || isLower(c);
const isBase64url = (c: number) => isAlnum(c) || c === 45 /* - */ || c === 95; /* _ */
const isBase64 = (c: number) => isAlnum(c) || c === 43 /* + */ || c === 47 /* / */ || c === 61; /* = */

// ---------------------------------------------------------------------------------------------
// private_key

const PEM_BEGIN = /-----BEGIN (?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)?-----/y;
const PEM_END = /-----END (?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)?-----/y;
const PEM_HEADER = /[A-Za-z][A-Za-z0-9-]*: [^\r\n\\]*/y;

/**
 * A PEM (or PGP armored) private key from its BEGIN line through its END line. A block cut before
 * its END line runs through the last line of key material after it, so what is left of the key is
 * covered too. Line breaks may be real or written as `\n` inside a JSON string (a service account
 * file pasted into a prompt).
 */
function scanPrivateKeys(text: string, push: Push): void {
  let from = 0;
  for (;;) {
    const begin = text.indexOf("-----BEGIN ", from);
    if (begin === -1) return;
    PEM_BEGIN.lastIndex = begin;
    if (!PEM_BEGIN.test(text)) {
      from = begin + 11;
      continue;
    }
    const end = pemBodyEnd(text, PEM_BEGIN.lastIndex);
    push(begin, end);
    from = end;
  }
}

/** Where a PEM body that starts at `p` ends: after its END line, or after its last line of key material. */
function pemBodyEnd(text: string, p: number): number {
  let end = p;
  let headers = true;
  for (;;) {
    let q = p;
    let lineBreak = false;
    for (;;) {
      const c = text.charCodeAt(q);
      if (c === 32 || c === 9) {
        q++;
      } else if (c === 10 || c === 13) {
        q++;
        lineBreak = true;
      } else if (c === 92 /* \ */ && (text[q + 1] === "n" || text[q + 1] === "r")) {
        q += 2;
        lineBreak = true;
      } else {
        break;
      }
    }
    if (text.startsWith("-----END ", q)) {
      PEM_END.lastIndex = q;
      return PEM_END.test(text) ? PEM_END.lastIndex : end;
    }
    if (headers && lineBreak) {
      PEM_HEADER.lastIndex = q;
      if (PEM_HEADER.test(text)) {
        p = end = PEM_HEADER.lastIndex;
        continue;
      }
    }
    let r = q;
    while (r < text.length && isBase64(text.charCodeAt(r))) r++;
    // A short run of plain letters after a cut block is the prose that follows it, not key material.
    if (r === q || (r - q < 16 && !/[0-9+/=]/.test(text.slice(q, r)))) return end;
    headers = false;
    p = end = r;
  }
}

// ---------------------------------------------------------------------------------------------
// jwt

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

/**
 * A JWS (three base64url parts, the signature empty for alg "none") or JWE (five) whose first part
 * decodes to a JSON object with `alg`.
 */
function scanJwts(text: string, push: Push): void {
  let from = 0;
  for (;;) {
    const start = text.indexOf("eyJ", from);
    if (start === -1) return;
    const headerEnd = runEnd(text, start, isBase64url);
    // No later "eyJ" inside this run can start a token (it follows a base64url character).
    from = headerEnd;
    if (start > 0 && isBase64url(text.charCodeAt(start - 1))) continue;
    const ends = [headerEnd];
    while (ends.length < 5 && text.charCodeAt(ends[ends.length - 1]!) === 46 /* . */) ends.push(runEnd(text, ends[ends.length - 1]! + 1, isBase64url));
    const empty = (i: number) => ends[i]! === ends[i - 1]! + 1;
    let end: number;
    if (ends.length === 5 && !empty(3)) end = ends[4]!;
    else if (ends.length >= 3 && !empty(1)) end = ends[2]!;
    else continue;
    if (headerHasAlg(text.slice(start, headerEnd))) {
      push(start, end);
      from = end;
    }
  }
}

function headerHasAlg(part: string): boolean {
  // `{"alg":""}` is the shortest header there is: 14 characters of base64url.
  if (part.length < 14 || part.length > 4096) return false;
  const bytes = fromBase64url(part);
  if (!bytes) return false;
  try {
    const json = utf8.decode(bytes);
    // Saves a parse (and its throw) per candidate on text full of "eyJ…" runs.
    if (!json.includes('"alg"')) return false;
    const header: unknown = JSON.parse(json);
    return typeof header === "object" && header !== null && !Array.isArray(header) && typeof (header as { alg?: unknown }).alg === "string";
  } catch {
    return false;
  }
}

function runEnd(text: string, p: number, inRun: (c: number) => boolean): number {
  while (p < text.length && inRun(text.charCodeAt(p))) p++;
  return p;
}

// ---------------------------------------------------------------------------------------------
// api_key

interface KeyShape {
  /** Finds the whole token from its prefix; greedy runs with nothing after them, so it never backtracks. */
  readonly pattern: RegExp;
  readonly minLength: number;
  readonly maxLength: number;
  readonly check?: (token: string) => boolean;
}

const SK_PREFIX = /^sk-(?:proj-|svcacct-|admin-|ant-(?:api|admin)\d\d-|ant-)?/;

/**
 * A random key body mixes upper case, lower case and digits, and is long; `sk-` followed by
 * words (`sk-learn`, `sk-the-quick-brown-fox`) is not a key.
 */
function randomBody(token: string): boolean {
  const body = token.replace(SK_PREFIX, "");
  return body.length >= 20 && /[A-Z]/.test(body) && /[a-z]/.test(body) && /\d/.test(body);
}

/**
 * Provider key shapes: `sk-` for OpenAI (`sk-…`, `sk-proj-…`, `sk-svcacct-…`, `sk-admin-…`) and
 * Anthropic (`sk-ant-…`); AWS access key ids (`AKIA` long-term, `ASIA` temporary); GitHub tokens
 * (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`); Slack tokens (`xoxa-`, `xoxb-`, `xoxp-`,
 * `xoxr-`, `xoxs-`); Google API keys (`AIza`); Stripe secret and restricted keys (`sk_live_`,
 * `rk_live_`, and their `_test_` twins).
 */
const KEY_SHAPES: readonly KeyShape[] = [
  { pattern: /(?<![\w-])sk-[A-Za-z0-9_-]+/g, minLength: 23, maxLength: 300, check: randomBody },
  { pattern: /(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]+/g, minLength: 20, maxLength: 20 },
  { pattern: /(?<![\w-])gh[pousr]_[A-Za-z0-9]+/g, minLength: 40, maxLength: 255 },
  { pattern: /(?<![\w-])github_pat_[A-Za-z0-9_]+/g, minLength: 60, maxLength: 255 },
  { pattern: /(?<![\w-])xox[abprs]-[A-Za-z0-9-]+/g, minLength: 15, maxLength: 255, check: (t) => /\d/.test(t) },
  { pattern: /(?<![\w-])AIza[A-Za-z0-9_-]+/g, minLength: 39, maxLength: 39 },
  { pattern: /(?<![\w-])[rs]k_(?:live|test)_[A-Za-z0-9]+/g, minLength: 24, maxLength: 255 },
];

function scanApiKeys(text: string, push: Push): void {
  for (const shape of KEY_SHAPES) {
    for (const m of text.matchAll(shape.pattern)) {
      const token = m[0];
      if (token.length < shape.minLength || token.length > shape.maxLength) continue;
      if (shape.check && !shape.check(token)) continue;
      push(m.index, m.index + token.length);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// email

// The practical subset of RFC 5322: a dot-atom local part of letters, digits and `. _ % + -`
// (the other atext characters are rare in real addresses and common around them in code and
// prose), no quoted local parts or address literals; an ASCII (or punycode) domain name of two
// or more labels whose top-level label is alphabetic.
const isLocalChar = (c: number) => isAlnum(c) || c === 46 || c === 95 || c === 37 || c === 43 || c === 45;
const isDomainChar = (c: number) => isAlnum(c) || c === 46 || c === 45;
const LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
const TLD = /^(?:[A-Za-z]{2,63}|xn--[A-Za-z0-9-]{1,59})$/;

/** Found from each `@`: a bounded walk left over the local part and right over the domain. */
function scanEmails(text: string, push: Push): void {
  for (let at = text.indexOf("@"); at !== -1; at = text.indexOf("@", at + 1)) {
    let start = at;
    while (start > 0 && at - start <= 64 && isLocalChar(text.charCodeAt(start - 1))) start--;
    if (at - start > 64) continue;
    while (text.charCodeAt(start) === 46) start++;
    const local = text.slice(start, at);
    if (local === "" || local.endsWith(".") || local.includes("..")) continue;
    let end = at + 1;
    while (end < text.length && end - at <= 254 && isDomainChar(text.charCodeAt(end))) end++;
    if (end - at > 254) continue;
    while (end > at + 1 && text.charCodeAt(end - 1) === 46) end--;
    const labels = text.slice(at + 1, end).split(".");
    if (labels.length < 2 || !labels.every((l) => LABEL.test(l)) || !TLD.test(labels[labels.length - 1]!)) continue;
    push(start, end);
  }
}

// ---------------------------------------------------------------------------------------------
// payment_card

/** Runs of digits with at most one space or hyphen between two digits. */
const DIGIT_RUN = /(?<![\w.])\d(?:[ -]?\d)*/g;

/**
 * 13–19 digits, written together or in groups (a first group of four, then groups of three to
 * six, with one kind of separator), with a known issuer's prefix and length, passing Luhn. A run
 * of grouped digits may hold a card among other numbers; a run of digits written together is a
 * card whole or not at all.
 */
function scanCards(text: string, push: Push): void {
  for (const m of text.matchAll(DIGIT_RUN)) {
    const run = m[0];
    const after = text.charCodeAt(m.index + run.length);
    if (isLower(after) || isUpper(after) || after === 95) continue;
    if (run.length < 13) continue;
    const groups = [...run.matchAll(/\d+/g)];
    if (groups.length === 1) {
      if (cardValid(run)) push(m.index, m.index + run.length);
      continue;
    }
    for (let i = 0; i < groups.length; i++) {
      if (groups[i]![0].length !== 4) continue;
      let best = -1;
      let digits = "";
      for (let j = i; j < groups.length && digits.length < 19; j++) {
        const g = groups[j]![0];
        if (j > i && (g.length < 3 || g.length > 6 || run[groups[j]!.index - 1] !== run[groups[i + 1]!.index - 1])) break;
        digits += g;
        if (digits.length >= 13 && cardValid(digits)) best = j;
      }
      if (best === -1) continue;
      const last = groups[best]!;
      push(m.index + groups[i]!.index, m.index + last.index + last[0].length);
      i = best;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// iban

const IBAN_START = /(?<![A-Za-z0-9])[A-Z]{2}\d{2}/g;

/**
 * An IBAN in electronic form (`DE89370400440532013000`) or print form (groups of four separated by
 * single spaces), upper case, of exactly its country's length, passing mod 97.
 */
function scanIbans(text: string, push: Push): void {
  for (const m of text.matchAll(IBAN_START)) {
    const length = IBAN_LENGTHS[m[0].slice(0, 2)];
    if (length === undefined) continue;
    let iban = m[0];
    let p = m.index + 4;
    while (iban.length < length) {
      let c = text.charCodeAt(p);
      if (c === 32 && iban.length % 4 === 0) c = text.charCodeAt(++p);
      if (!(isDigit(c) || isUpper(c))) break;
      iban += text[p];
      p++;
    }
    if (iban.length !== length || isAlnum(text.charCodeAt(p))) continue;
    if (ibanValid(iban)) push(m.index, p);
  }
}

// ---------------------------------------------------------------------------------------------
// us_ssn

const SSN = /(?<![\w-])(\d{3})([- ]?)(\d{2})\2(\d{4})(?![\w-])/g;
const SSN_CONTEXT = /\b(?:ssn|ss#|social security)\b/i;

/**
 * `AAA-GG-SSSS` (or with spaces) with a valid area, group and serial. Nine digits written together
 * are a thousand other things (order numbers, ids), so they count only after "SSN" or "social
 * security" within the 32 characters before them.
 */
function scanSsns(text: string, push: Push): void {
  for (const m of text.matchAll(SSN)) {
    if (!ssnValid(m[1]!, m[3]!, m[4]!)) continue;
    if (m[2] === "" && !SSN_CONTEXT.test(text.slice(Math.max(0, m.index - 32), m.index))) continue;
    push(m.index, m.index + m[0].length);
  }
}

// ---------------------------------------------------------------------------------------------
// ip_address

const IPV4 = /(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?!\w|\.\d)/g;
const IPV6 = /(?<![\w:.])(?:[0-9A-Fa-f]{1,4})?:[0-9A-Fa-f:.]*/g;

/**
 * IPv4 dotted quads with octets of at most 255, and IPv6 addresses in full, compressed (`::`) and
 * IPv4-embedding forms. A four-part version number (`1.2.3.4`) cannot be told from an address and
 * counts as one; one written with a `v` or inside a longer dotted number (`v1.2.3.4`,
 * `1.2.3.4.5`) does not, and neither do three-part versions. An IPv6 candidate needs two colons
 * and a digit, which keeps times (`10:30:00`), MAC addresses and `Foo::bar` out (see also
 * {@link plausibleIpv6}).
 */
function scanIps(text: string, push: Push): void {
  for (const m of text.matchAll(IPV4)) if (ipv4Valid(m[0])) push(m.index, m.index + m[0].length);
  for (const m of text.matchAll(IPV6)) {
    let candidate = m[0];
    if (candidate.length > 45 + 2) continue;
    const after = text.charCodeAt(m.index + candidate.length);
    if (isLower(after) || isUpper(after) || after === 95) continue;
    // A sentence's full stop, or a colon after the address ("listening on fe80::1: ready").
    if (candidate.endsWith(".")) candidate = candidate.slice(0, -1);
    if (candidate.endsWith(":") && !candidate.endsWith("::")) candidate = candidate.slice(0, -1);
    if (!/\d/.test(candidate) || candidate.indexOf(":") === candidate.lastIndexOf(":")) continue;
    if (!ipv6Valid(candidate) || !plausibleIpv6(candidate)) continue;
    push(m.index, m.index + candidate.length);
  }
}

/**
 * A compressed address of one or two short groups is a Python slice more often than an address
 * (`a[1::2]`, `x[::2]`): with fewer than three groups, one must have three hex digits or more.
 * `::1`, the loopback, is the exception.
 */
function plausibleIpv6(candidate: string): boolean {
  if (!candidate.includes("::") || candidate === "::1") return true;
  const groups = candidate.split(/:+/).filter((g) => g !== "");
  return groups.length >= 3 || groups.some((g) => g.length >= 3);
}

// ---------------------------------------------------------------------------------------------
// phone

const INTERNATIONAL = /(?<![\w+])\+\d[\d ().-]*/g;
const NANP = /(?<![\w+().-]|\d[ .-])(?:1[ .-]?)?(?:\(\d{3}\) ?|\d{3}[ .-])\d{3}[ .-]\d{4}(?!\w|[.-]\d)/g;
const TRUNK = /(?<![\w+().-]|\d[ .-])(?:\(0\d{1,4}\) ?|0\d{1,4}[ .-])\d{2,8}(?:[ .-]\d{2,8}){0,3}(?!\w|[.-]\d)/g;

/**
 * Phone numbers in three shapes, each with a plausible count of digits:
 * - international, `+` and a country code: 8–15 digits in all (E.164); after `+1` a valid North
 *   American number, after `+7` ten more digits;
 * - North American national, `(415) 555-2671`, `415-555-2671`, `1 415 555 2671`: a valid area
 *   code and exchange (first digit 2–9, not N11);
 * - national with a trunk 0 (`020 7946 0958`, `030 901820`, `(02) 9876 5432`, `06 12 34 56 78`):
 *   9–12 digits in groups with one kind of separator, not starting `00`.
 * Digits written together without `+` are ids, counts and timestamps far more often than phone
 * numbers, so a national number needs its separators; and one that continues a longer run of
 * digit groups (a table, an account number) is not taken from its middle.
 */
function scanPhones(text: string, push: Push): void {
  for (const m of text.matchAll(INTERNATIONAL)) {
    const end = internationalEnd(m[0]);
    if (end > 0) push(m.index, m.index + end);
  }
  for (const m of text.matchAll(NANP)) {
    const digits = m[0].replace(/\D/g, "");
    const national = digits.length === 11 ? digits.slice(1) : digits;
    if (!nanpValid(national)) continue;
    const seps = m[0].replace(/^1[ .-]?/, "").replace(/\d/g, "");
    if (!seps.startsWith("(") && seps[0] !== seps[1]) continue;
    push(m.index, m.index + m[0].length);
  }
  for (const m of text.matchAll(TRUNK)) {
    const end = trunkEnd(m[0]);
    if (end > 0) push(m.index, m.index + end);
  }
}

/** A North American number's ten digits: area code and exchange start 2–9 and are not N11. */
function nanpValid(d: string): boolean {
  return d.length === 10 && d[0]! >= "2" && d[3]! >= "2" && !(d[1] === "1" && d[2] === "1") && !(d[4] === "1" && d[5] === "1");
}

const INTERNATIONAL_SHAPE = /^\+\d{1,3}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]?\d+(?:[ .-]\d+)*)?$/;

/**
 * How much of an international candidate is a phone number, dropping trailing groups that prose
 * glued on ("+44 20 7946 0958 2026"); 0 for none. Looks at most at 40 characters: E.164 has 15
 * digits.
 */
function internationalEnd(candidate: string): number {
  let body = candidate;
  if (body.length > 40) {
    body = body.slice(0, 40);
    // A group cut in two is dropped whole.
    if (/\d/.test(candidate[40]!)) body = body.replace(/\d+$/, "");
  }
  body = body.replace(/\D+$/, "");
  for (;;) {
    if (!INTERNATIONAL_SHAPE.test(body)) return 0;
    const digits = body.replace(/\D/g, "");
    if (digits.length <= 15 && internationalValid(digits)) return body.length;
    const cut = body.search(/[ .-]\d+$/);
    if (cut <= 0) return 0;
    body = body.slice(0, cut);
  }
}

function internationalValid(digits: string): boolean {
  if (digits[0] === "0" || digits.length < 8) return false;
  if (digits[0] === "1") return nanpValid(digits.slice(1));
  if (digits[0] === "7") return digits.length === 11;
  return true;
}

/** How much of a trunk-0 candidate is a phone number: its groups up to the first change of separator, 9–12 digits; 0 for none. */
function trunkEnd(candidate: string): number {
  if (candidate.startsWith("00") || candidate.startsWith("(00")) return 0;
  const groups = [...candidate.matchAll(/\d+/g)];
  let separator: string | undefined;
  let digits = 0;
  let end = 0;
  for (let i = 0; i < groups.length; i++) {
    const g = groups[i]!;
    if (i > 0) {
      const prev = groups[i - 1]!;
      const between = candidate.slice(prev.index + prev[0].length, g.index);
      if (!between.startsWith(")")) {
        if (separator !== undefined && between !== separator) break;
        separator = between;
      }
    }
    digits += g[0].length;
    if (digits > 12) break;
    if (digits >= 9) end = g.index + g[0].length;
  }
  return end;
}
