/**
 * Which provider response headers may reach a client. None do unless a backend lists them
 * (backends.yaml `responseHeaders`), and some never do, listed or not: the gateway re-encodes the
 * body and owns the connection, its cookies, its caching and its own headers.
 */

/** Hop-by-hop headers (RFC 9110 §7.6.1 and the legacy ones): they describe one connection. */
const HOP_BY_HOP = ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authenticate", "proxy-authorization"];

/** Why each refused name is refused; prefixes end with `-`. */
const REFUSED: readonly (readonly [readonly string[], string])[] = [
  [HOP_BY_HOP, "is hop-by-hop"],
  [["set-cookie", "set-cookie2", "cookie"], "sets or carries cookies"],
  [["server", "x-powered-by", "via", "x-aspnet-version", "x-aspnetmvc-version"], "names the provider's server software"],
  [["content-"], "describes the provider's body, which the gateway re-encodes"],
  [["x-sluice-", "access-control-", "retry-after", "cache-control", "vary", "date", "location", "www-authenticate", "alt-svc", "strict-transport-security", "age", "expires", "cf-"], "is the gateway's own to set"],
];

/** Why a provider response header may never be passed to a client; undefined when it may be listed. */
export function responseHeaderRefusal(name: string): string | undefined {
  const n = name.toLowerCase();
  for (const [names, why] of REFUSED) {
    if (names.some((x) => (x.endsWith("-") ? n.startsWith(x) : n === x))) return `header "${n}" ${why} and is never passed to clients`;
  }
  return undefined;
}

/**
 * The listed headers the provider sent, refused names left out (a stored snapshot may predate a
 * refusal), and any value that contains a secret the gateway holds (`held`, read only when a value
 * would pass): a provider that echoes a key back must not hand it to the client. Lower-case names;
 * an empty object when nothing is listed or sent.
 */
export function passedResponseHeaders(headers: Headers, names: readonly string[] | undefined, held: () => readonly string[] = NOTHING_HELD): Readonly<Record<string, string>> {
  if (names === undefined || names.length === 0) return EMPTY;
  const out: Record<string, string> = {};
  for (const name of names) {
    const value = headers.get(name);
    if (value === null || responseHeaderRefusal(name) !== undefined) continue;
    if (held().some((secret) => value.includes(secret))) continue;
    out[name.toLowerCase()] = value;
  }
  return out;
}

const EMPTY: Readonly<Record<string, string>> = Object.freeze({});
const NOTHING_HELD = (): readonly string[] => [];
