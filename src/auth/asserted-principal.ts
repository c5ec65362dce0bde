import { echo } from "../errors/echo.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { CompiledPublication } from "../publication/compile-publication.ts";
import type { Principal } from "../publication/principal.ts";

/** Whom an operator asks about (an explain): one of a tenant's API keys by id, or the tenant itself. */
export interface AssertedCaller {
  /** An API key's id (publication.yaml `tenants[].apiKeys[].id`); unique within its tenant. */
  readonly key?: string | undefined;
  readonly tenant?: string | undefined;
}

/** The key id of a principal asserted for a tenant alone: what its records and `principal` signals show. */
export const TENANT_EXPLAIN_KEY = "admin:explain";

/**
 * The authenticate phase of an explain: the principal an operator asserts on the admin API,
 * instead of a presented key. A key id resolves to that key's principal (its tenant and
 * `chargeTo`), and its grants apply; a tenant alone resolves to the tenant, with no key and so no
 * grants to check (`anyEntrypoint`).
 *
 * @throws GatewayError invalid_request naming `key` or `tenant` when neither is given, the tenant
 *   or key does not exist, a key id is ambiguous across tenants, or the key is disabled.
 */
export function assertedPrincipal(publication: CompiledPublication, as: AssertedCaller): { readonly principal: Principal; readonly anyEntrypoint: boolean } {
  const tenants = publication.source.tenants;
  if (as.key === undefined && as.tenant === undefined) throw new GatewayError("invalid_request", "Name the caller to explain for: 'key' (an API key id) or 'tenant'.", { param: "key" });
  if (as.tenant !== undefined && !tenants.some((t) => t.id === as.tenant)) throw new GatewayError("invalid_request", `No tenant '${echo(as.tenant)}' in this publication.`, { param: "tenant" });
  if (as.key === undefined) return { principal: { tenantId: as.tenant!, keyId: TENANT_EXPLAIN_KEY }, anyEntrypoint: true };
  const found = tenants.filter((t) => as.tenant === undefined || t.id === as.tenant).flatMap((t) => t.apiKeys.filter((k) => k.id === as.key).map((k) => ({ tenant: t.id, key: k })));
  if (found.length === 0) throw new GatewayError("invalid_request", `No API key '${echo(as.key)}'${as.tenant === undefined ? "" : ` in tenant '${echo(as.tenant)}'`}.`, { param: "key" });
  if (found.length > 1) throw new GatewayError("invalid_request", `API key id '${echo(as.key)}' exists in tenants ${found.map((f) => f.tenant).join(", ")}: name the tenant too.`, { param: "tenant" });
  const { tenant, key } = found[0]!;
  const entry = publication.keys.get(key.sha256);
  if (key.disabled || entry === undefined) throw new GatewayError("invalid_request", `API key '${echo(as.key)}' of tenant '${tenant}' is disabled: its requests are refused (invalid_api_key).`, { param: "key" });
  return { principal: entry.principal, anyEntrypoint: false };
}
