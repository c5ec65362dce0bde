import { sha256Hex } from "../digest/canonical-digest.ts";

/** Compares digests, not the token text, so timing does not reveal a matching prefix. */
export async function tokenMatches(presented: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([sha256Hex(presented), sha256Hex(expected)]);
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/** The token of an `Authorization: Bearer` header, if any. */
export function bearerOf(header: string | undefined): string | undefined {
  return /^Bearer\s+(.+)$/i.exec(header?.trim() ?? "")?.[1];
}
