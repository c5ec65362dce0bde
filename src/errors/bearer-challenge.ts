import type { BearerChallenge } from "./gateway-error.ts";

/** A quoted-string (RFC 9110): the values are the gateway's own, but a quote or backslash is escaped all the same. */
const quoted = (v: string) => `"${v.replace(/[\\"]/g, "\\$&")}"`;

/**
 * The `WWW-Authenticate` value of a Bearer challenge, for example
 * `Bearer error="insufficient_scope", scope="mcp:tools", resource_metadata="https://…"`.
 */
export function renderBearerChallenge(c: BearerChallenge): string {
  const params: string[] = [];
  if (c.error !== undefined) params.push(`error=${quoted(c.error)}`);
  if (c.errorDescription !== undefined) params.push(`error_description=${quoted(c.errorDescription)}`);
  if (c.scope !== undefined && c.scope !== "") params.push(`scope=${quoted(c.scope)}`);
  if (c.resourceMetadata !== undefined) params.push(`resource_metadata=${quoted(c.resourceMetadata)}`);
  return params.length === 0 ? "Bearer" : `Bearer ${params.join(", ")}`;
}
