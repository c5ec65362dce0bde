import type { RequestContent } from "./request-record.ts";

/** Sampled text as the content line (and the request log) keep it. */
export interface ClippedText {
  readonly text: string;
  readonly truncated: boolean;
}

/** A sampled request's prompt and completion exactly as its content line writes them. */
export function clippedContent(content: RequestContent): { readonly prompt: ClippedText; readonly completion: ClippedText } {
  return { prompt: clip(content.prompt, content), completion: clip(content.completion, content) };
}

/**
 * Content as the content log writes it: every redaction pattern applied, then cut to the
 * policy's length (the cut is marked). Redacting before cutting means a secret that straddles
 * the cut is still found whole.
 */
function clip(text: string, policy: RequestContent): ClippedText {
  let t = text;
  for (const re of policy.redact) t = t.replace(re, "[redacted]");
  const truncated = text.length > policy.maxChars || t.length > policy.maxChars;
  return { text: truncated ? t.slice(0, policy.maxChars) : t, truncated };
}
