import type { TokenLogprob } from "../protocol/neutral.ts";

/** The mean log-probability of an answer's tokens (at most 0); undefined without any. */
export function avgLogprob(tokens: readonly TokenLogprob[] | undefined): number | undefined {
  if (tokens === undefined || tokens.length === 0) return undefined;
  let sum = 0;
  for (const t of tokens) sum += t.logprob;
  return sum / tokens.length;
}

/**
 * The mean gap between each token's log-probability and its best alternative's (at least 0): a
 * wide margin means the model hardly hesitated. A token with no alternative listed counts as a
 * gap of 0 (no evidence of confidence); undefined without any token.
 */
export function logprobMargin(tokens: readonly TokenLogprob[] | undefined): number | undefined {
  if (tokens === undefined || tokens.length === 0) return undefined;
  let sum = 0;
  for (const t of tokens) {
    let best: number | undefined;
    for (const a of t.top) if (a.token !== t.token && (best === undefined || a.logprob > best)) best = a.logprob;
    sum += best === undefined ? 0 : Math.max(0, t.logprob - best);
  }
  return sum / tokens.length;
}

/**
 * A verifier's score from its answer: the first JSON object in the text with a numeric `score`
 * between 0 and 1. Anything else is no score (the step is not accepted on it).
 */
export function verifierScore(text: string): number | undefined {
  const start = text.indexOf("{");
  const end = text.lastIndexOf("}");
  if (start < 0 || end <= start) return undefined;
  try {
    const parsed: unknown = JSON.parse(text.slice(start, end + 1));
    if (typeof parsed !== "object" || parsed === null) return undefined;
    const score = (parsed as { score?: unknown }).score;
    return typeof score === "number" && score >= 0 && score <= 1 ? score : undefined;
  } catch {
    return undefined;
  }
}

/** A published prompt with `{{question}}` and `{{answer}}` filled in. */
export function fillPrompt(template: string, values: { readonly question: string; readonly answer: string }): string {
  return template.replaceAll("{{question}}", values.question).replaceAll("{{answer}}", values.answer);
}
