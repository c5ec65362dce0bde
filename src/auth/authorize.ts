import { echo } from "../errors/echo.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { CompiledEntrypoint, CompiledPublication } from "../publication/compile-publication.ts";
import type { Principal } from "../publication/principal.ts";

/**
 * The authorize phase: the public model the client named must exist, and the caller's key must be
 * granted it. Decided on the decoded request, never on a header.
 *
 * @throws GatewayError model_not_found / model_not_allowed.
 */
export function authorize(publication: CompiledPublication, principal: Principal, model: string): CompiledEntrypoint {
  const ep = publication.entrypoints.get(model);
  if (!ep) throw new GatewayError("model_not_found", `The model '${echo(model)}' does not exist.`, { param: "model" });
  if (!publication.mayUse(principal, ep.name)) throw new GatewayError("model_not_allowed", `This API key may not use the model '${ep.name}'.`, { param: "model" });
  return ep;
}

/** The entrypoints a principal may call, for model listings. */
export function grantedEntrypoints(publication: CompiledPublication, principal: Principal): CompiledEntrypoint[] {
  return [...publication.entrypoints.values()].filter((ep) => publication.mayUse(principal, ep.name));
}
