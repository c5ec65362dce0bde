/**
 * Which headers a `headers` plugin may set on the request to a backend. Only extension headers
 * (`x-…`) and the providers' feature flags are allowed, minus those that carry credentials, name
 * the client's address, or are the gateway's own: a plugin tags a request, it never
 * authenticates it or speaks for the client's network.
 */

/** Headers that are not `x-` yet only flag provider features. */
const FEATURE_FLAGS = new Set(["anthropic-beta", "openai-beta"]);

/** Why each refused `x-` name is refused; prefixes end with `-`. */
const REFUSED: readonly (readonly [readonly string[], string])[] = [
  [["x-api-key", "x-goog-api-key", "x-goog-user-project", "x-amz-", "x-ms-", "x-auth-", "x-access-token", "x-csrf-token", "x-xsrf-token"], "carries or scopes a credential"],
  [["x-forwarded-", "x-real-ip", "x-client-ip", "x-cluster-client-ip", "x-original-", "x-envoy-"], "speaks for the client's network"],
  [["x-sluice-", "x-request-id", "x-stainless-"], "is set by the gateway or the client library"],
];

/** Why a header may not be set by a plugin; undefined when it may. */
export function upstreamHeaderRefusal(name: string): string | undefined {
  if (!/^[a-z0-9-]+$/.test(name)) return `header "${name}" must be lower-case letters, digits and '-'`;
  if (FEATURE_FLAGS.has(name)) return undefined;
  if (!name.startsWith("x-")) return `header "${name}" is not an extension header ("x-…") or a provider feature flag (${[...FEATURE_FLAGS].join(", ")})`;
  for (const [names, why] of REFUSED) {
    if (names.some((x) => (x.endsWith("-") ? name.startsWith(x) : name === x))) return `header "${name}" ${why} and is never set by a plugin`;
  }
  return undefined;
}
