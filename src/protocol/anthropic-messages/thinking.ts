/**
 * The neutral model has one reasoning part, `{text, signature}`. An Anthropic `redacted_thinking`
 * block has no text, only opaque `data`, and a `thinking` block may legitimately have empty text
 * with a signature (thinking display "omitted"), so emptiness cannot tell them apart. A redacted
 * block therefore travels as a reasoning part with empty text whose signature is this prefix plus
 * the block's data. The prefix contains ':', which no base64 signature can, so it never collides;
 * only this codec reads it (other protocols drop or ignore reasoning signatures).
 */
export const REDACTED_SIGNATURE_PREFIX = "anthropic-redacted-thinking:";

export function redactedSignature(data: string): string {
  return REDACTED_SIGNATURE_PREFIX + data;
}

/** The redacted block's data when `signature` carries one, else undefined. */
export function redactedData(signature: string): string | undefined {
  return signature.startsWith(REDACTED_SIGNATURE_PREFIX) ? signature.slice(REDACTED_SIGNATURE_PREFIX.length) : undefined;
}
