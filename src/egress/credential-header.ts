/**
 * The header that carries a configured secret to an upstream: `Authorization: Bearer <value>` for
 * the `bearer` scheme, else the header the scheme names (`x-api-key`, `api-key`, …). One place, so
 * every upstream (backends, MCP servers, agents, probes, card fetches) sends a credential alike.
 */
export function credentialHeader(scheme: string, value: string): Record<string, string> {
  return scheme === "bearer" ? { authorization: `Bearer ${value}` } : { [scheme]: value };
}
