/** Longest piece of client input an error message quotes, in UTF-16 units. */
export const MAX_ECHO_CHARS = 80;

/**
 * Client input as an error message may quote it: at most a short prefix, marked `…` when cut, so
 * a megabyte model name or role cannot make a megabyte error. Every message (and `param`) that
 * quotes a request value goes through this. Never splits a surrogate pair.
 */
export function echo(value: unknown, max: number = MAX_ECHO_CHARS): string {
  let text: string;
  try {
    text = typeof value === "string" ? value : String(value);
  } catch {
    // An object whose toString throws: there is nothing worth quoting.
    text = typeof value;
  }
  if (text.length <= max) return text;
  let cut = max;
  const last = text.charCodeAt(cut - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut--;
  return `${text.slice(0, cut)}…`;
}
