const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** What {@link scanLiteral} last read: the string's decoded length and whether it had escapes. */
let lastChars = 0;
let lastEscaped = false;

/**
 * The index of the closing quote of the JSON string literal whose opening quote is at `open`, or
 * -1 when it is not a well-formed literal. Counting, not decoding: its decoded length (UTF-16
 * units, as `String.length` counts) and whether it had escapes are left for {@link literalChars}
 * and {@link DeltaShapes.matchedString}.
 */
function scanLiteral(s: string, open: number): number {
  let n = 0;
  let escaped = false;
  let i = open + 1;
  for (;;) {
    const c = s.charCodeAt(i);
    if (Number.isNaN(c) || c < 0x20) return -1;
    if (c === QUOTE) {
      lastChars = n;
      lastEscaped = escaped;
      return i;
    }
    if (c === BACKSLASH) {
      escaped = true;
      const e = s.charCodeAt(i + 1);
      if (e === 0x75 /* u */) {
        if (!/^[0-9a-fA-F]{4}$/.test(s.slice(i + 2, i + 6))) return -1;
        i += 6;
      } else if (e === QUOTE || e === BACKSLASH || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) i += 2;
      else return -1;
    } else i++;
    n++;
  }
}

/** The decoded length of the string the last match read. */
export function literalChars(): number {
  return lastChars;
}

/**
 * A plain delta's shape, learnt from one chunk that was parsed and checked: the provider's event
 * around its one string (`inPrefix` ends with the string's opening quote, `inSuffix` starts with
 * its closing one), and, for a pass-through, the client's event around it (the gateway's stamp in
 * place). An event with exactly this prefix and suffix and a well-formed string literal between
 * them is the same JSON with another string: it passes every check the learnt one passed and
 * carries nothing else, so it need not be parsed. Streams repeat one shape for almost every delta
 * (the provider writes them from one template), which is what makes this pay.
 */
export interface DeltaTemplate {
  readonly inPrefix: string;
  readonly inSuffix: string;
  readonly outPrefix: string;
  readonly outSuffix: string;
}

/** Where `key`'s string value opens in `s`, when `key` occurs exactly once and its value is `value`; else -1. */
function openOf(s: string, key: string, value: string): number {
  const at = s.indexOf(key);
  if (at < 0 || s.indexOf(key, at + key.length) >= 0) return -1;
  const open = at + key.length;
  if (s.charCodeAt(open) !== QUOTE) return -1;
  const close = scanLiteral(s, open);
  if (close < 0 || JSON.parse(s.slice(open, close + 1)) !== value) return -1;
  return open;
}

/**
 * The shape of a checked event `data` whose one string under `key` (e.g. `"content":`) is
 * `value`, and of its client text `out` (the same string under the same key) when there is one;
 * undefined when the key is not there exactly once as that string.
 */
export function templateOf(data: string, key: string, value: string, out?: string): DeltaTemplate | undefined {
  const inOpen = openOf(data, key, value);
  if (inOpen < 0) return undefined;
  const inClose = scanLiteral(data, inOpen);
  if (out === undefined) return { inPrefix: data.slice(0, inOpen + 1), inSuffix: data.slice(inClose), outPrefix: "", outSuffix: "" };
  const outOpen = openOf(out, key, value);
  if (outOpen < 0) return undefined;
  const outClose = scanLiteral(out, outOpen);
  return { inPrefix: data.slice(0, inOpen + 1), inSuffix: data.slice(inClose), outPrefix: out.slice(0, outOpen + 1), outSuffix: out.slice(outClose) };
}

/** The index of the closing quote of `data`'s string when `data` has the template's shape, else -1 (see {@link literalChars}). */
export function matchDelta(data: string, t: DeltaTemplate): number {
  const open = t.inPrefix.length;
  const close = data.length - t.inSuffix.length;
  // Slices compared whole: a flat compare, where startsWith and endsWith went char by char.
  if (close < open || data.slice(0, open) !== t.inPrefix || data.slice(close) !== t.inSuffix) return -1;
  return scanLiteral(data, open - 1) === close ? close : -1;
}

/**
 * One stream's learnt shapes: one for text deltas and one for reasoning deltas, each set by the
 * protocol's decoder from the last delta of its kind that it parsed and checked.
 */
export class DeltaShapes {
  text: DeltaTemplate | undefined = undefined;
  reasoning: DeltaTemplate | undefined = undefined;
  /** The shape the last successful {@link match} found. */
  matched: DeltaTemplate | undefined = undefined;
  /** What the string of the last successful {@link match} is. */
  kind: "text" | "reasoning" = "text";

  /**
   * The index of `data`'s string's closing quote when `data` has a learnt shape (then
   * {@link matched}, {@link kind} and {@link literalChars} describe it), else -1.
   */
  match(data: string): number {
    const close = this.#matchOne(data, this.text, "text");
    return close >= 0 ? close : this.#matchOne(data, this.reasoning, "reasoning");
  }

  /** The string of the event the last {@link match} found (whose string closes at `close`), decoded. */
  matchedString(data: string, close: number): string {
    const open = this.matched!.inPrefix.length;
    return lastEscaped ? (JSON.parse(data.slice(open - 1, close + 1)) as string) : data.slice(open, close);
  }

  #matchOne(data: string, t: DeltaTemplate | undefined, kind: "text" | "reasoning"): number {
    if (t === undefined) return -1;
    const close = matchDelta(data, t);
    if (close >= 0) {
      this.matched = t;
      this.kind = kind;
    }
    return close;
  }
}
