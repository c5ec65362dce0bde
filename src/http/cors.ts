/**
 * CORS for the public listener. Closed unless gateway.yaml `security.cors.allowOrigins` lists
 * origins: then a listed origin's preflight gets a grant and its responses carry the headers a
 * browser needs to read them. An origin not listed gets no `Access-Control-*` header at all, so
 * the browser refuses it. Credentials (cookies) are never allowed: callers authenticate with a
 * key in a header, which needs no credentialed CORS.
 */

/** The methods the public API answers. */
const ALLOWED_METHODS = new Set(["GET", "POST"]);
/** How long a browser may cache a preflight grant. */
const PREFLIGHT_MAX_AGE_SECONDS = 600;
/** Response headers any page may read without being told (the CORS-safelisted ones). */
const SAFELISTED = new Set(["cache-control", "content-language", "content-length", "content-type", "expires", "last-modified", "pragma"]);
/** An HTTP token: what a header name may be. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** More requested headers than this in one preflight is not a client worth granting. */
const MAX_REQUESTED_HEADERS = 64;

/**
 * The answer to a CORS preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`)
 * from a listed origin asking for a method the API answers: 204 with the grant. The requested
 * headers are granted as asked: the gateway reads only its own and the trusted ones whatever a
 * browser sends, so granting more changes nothing. Undefined for anything else, which then takes
 * its ordinary route and gets no CORS header.
 */
export function corsPreflight(request: Request, allowOrigins: readonly string[]): Response | undefined {
  if (request.method !== "OPTIONS" || allowOrigins.length === 0) return undefined;
  const origin = request.headers.get("origin");
  const method = request.headers.get("access-control-request-method");
  if (origin === null || method === null || !allowOrigins.includes(origin) || !ALLOWED_METHODS.has(method)) return undefined;
  const asked = (request.headers.get("access-control-request-headers") ?? "")
    .split(",")
    .map((h) => h.trim().toLowerCase())
    .filter((h) => h !== "");
  if (asked.length > MAX_REQUESTED_HEADERS || asked.some((h) => !TOKEN.test(h))) return undefined;
  const headers = new Headers({
    "access-control-allow-origin": origin,
    "access-control-allow-methods": [...ALLOWED_METHODS].join(", "),
    "access-control-max-age": String(PREFLIGHT_MAX_AGE_SECONDS),
    vary: "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
  });
  if (asked.length > 0) headers.set("access-control-allow-headers", [...new Set(asked)].join(", "));
  return new Response(null, { status: 204, headers });
}

/**
 * The CORS headers for a response to `request`: none unless CORS is configured and the request
 * carries an `Origin`. A listed origin gets `Access-Control-Allow-Origin` and every header the
 * response carries beyond the safelisted ones exposed (the request id, the `x-sluice-*` facts,
 * `retry-after`); any origin gets `Vary: Origin`, so a cache never serves one origin's answer to
 * another. A preflight {@link corsPreflight} did not grant gets no grant here either.
 */
export function corsResponseHeaders(request: Request, allowOrigins: readonly string[], response: Headers): Readonly<Record<string, string>> | undefined {
  const origin = request.headers.get("origin");
  if (origin === null || allowOrigins.length === 0) return undefined;
  if (!allowOrigins.includes(origin) || request.method === "OPTIONS") return { vary: "Origin" };
  const expose = [...response.keys()].filter((h) => !SAFELISTED.has(h) && !h.startsWith("access-control-") && h !== "vary");
  return {
    "access-control-allow-origin": origin,
    ...(expose.length > 0 ? { "access-control-expose-headers": expose.join(", ") } : {}),
    vary: "Origin",
  };
}
