import { findPii, type PiiDetector } from "../signals/pii.ts";
import type { TextRewrite } from "./text-filter.ts";

/**
 * How much of a streamed answer's tail is held back so a value is seen whole before it is
 * released: longer than the longest formatted card, phone number, IBAN or e-mail address a
 * detector matches in practice. A match still open at the cut (a private-key block) holds the
 * text from its start, up to {@link MAX_HOLD_CHARS}.
 */
const TAIL_CHARS = 96;
/** The most text held for one open match; past it, what is held is released masked as it stands. */
const MAX_HOLD_CHARS = 16_384;

/**
 * Masks PII in the answer: each match becomes its detector's name in brackets (`[EMAIL]`), which
 * a client cannot turn back into the value. `onMasked` counts each match (for the record).
 */
export function maskRewrite(detectors: ReadonlySet<PiiDetector>, onMasked: (detector: PiiDetector) => void): TextRewrite {
  const mask = (text: string, upTo: number, matches: ReturnType<typeof findPii>): string => {
    let out = "";
    let at = 0;
    for (const m of matches) {
      if (m.start >= upTo) break;
      out += text.slice(at, m.start) + `[${m.detector.toUpperCase()}]`;
      onMasked(m.detector);
      at = m.end;
    }
    return out + text.slice(at, upTo);
  };
  return {
    step(text, _channel, final) {
      const matches = findPii(text, detectors);
      let cut = final ? text.length : Math.max(0, text.length - TAIL_CHARS);
      if (!final) {
        // A match that reaches past the cut is released whole later, or masked at the cap.
        for (const m of matches) if (m.start < cut && m.end > cut) cut = m.start;
        if (text.length - cut > MAX_HOLD_CHARS) cut = text.length;
      }
      const kept = matches.filter((m) => m.end <= cut);
      return { out: mask(text, cut, kept), keep: text.slice(cut) };
    },
  };
}
