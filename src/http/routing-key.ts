import { presentedKey } from "./generation.ts";

/**
 * The key a request's canary bucket is chosen by: who is calling, as cheaply as that can be read
 * from the headers. An API key (`Authorization: Bearer` or `x-api-key`) is its own text. A bearer
 * that looks like a JWT is its unverified `iss` and `sub`, so a caller whose token is refreshed
 * keeps its bucket (and its revision); verifying it is the authenticator's job, and a forged claim
 * can only choose which of two published revisions refuses it. No credential: undefined, and the
 * request is served the stable revision.
 */
export function routingKeyOf(headers: Headers): string | undefined {
  const credential = presentedKey(headers);
  if (credential === undefined || credential === "") return undefined;
  return jwtSubject(credential) ?? credential;
}

/** `iss` and `sub` of a JWT-shaped token (three base64url parts, a JSON payload naming a subject); undefined otherwise. */
function jwtSubject(token: string): string | undefined {
  const first = token.indexOf(".");
  const second = first < 0 ? -1 : token.indexOf(".", first + 1);
  if (second < 0 || token.indexOf(".", second + 1) >= 0) return undefined;
  try {
    const payload = token.slice(first + 1, second).replaceAll("-", "+").replaceAll("_", "/");
    const claims = JSON.parse(atob(payload.padEnd(payload.length + ((4 - (payload.length % 4)) % 4), "="))) as unknown;
    if (typeof claims !== "object" || claims === null) return undefined;
    const { iss, sub } = claims as { iss?: unknown; sub?: unknown };
    return typeof sub === "string" ? `jwt\n${typeof iss === "string" ? iss : ""}\n${sub}` : undefined;
  } catch {
    return undefined;
  }
}
