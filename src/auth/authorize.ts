import { echo } from "../errors/echo.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { CompiledEntrypoint, CompiledPublication, ModelOperation } from "../publication/compile-publication.ts";
import type { Principal } from "../publication/principal.ts";

/**
 * The authorize phase of a model request: the public model the client named must exist, serve
 * the operation asked for (chat, embeddings, moderations), and the caller's key (or token's scopes) must grant it.
 * Decided on the decoded request, never on a header. `internal`: the gateway's own call for the
 * request (a signal's embedding or moderation), whose model the publication chose, so the key
 * needs no grant of it.
 *
 * @throws GatewayError model_not_found / model_not_allowed / invalid_request (the wrong operation).
 */
export function authorize(publication: CompiledPublication, principal: Principal, model: string, operation: ModelOperation, internal = false): CompiledEntrypoint {
  const ep = publication.entrypoints.get(model);
  if (!ep) throw new GatewayError("model_not_found", `The model '${echo(model)}' does not exist.`, { param: "model" });
  if (!internal && !publication.mayUse(principal, ep.name)) {
    const who = principal.entrypoints === undefined ? "This API key may not use" : "The access token's scopes do not grant";
    throw new GatewayError("model_not_allowed", `${who} the model '${ep.name}'.`, { param: "model" });
  }
  if (ep.operation !== operation) {
    // An input-only operation's public route is named after it (POST /v1/embeddings, /v1/moderations).
    const message = ep.operation === "chat" ? `The model '${ep.name}' does not serve ${operation}.` : `The model '${ep.name}' serves ${ep.operation} only: call POST /v1/${ep.operation}.`;
    throw new GatewayError("invalid_request", message, { param: "model" });
  }
  return ep;
}

/** The entrypoints a principal may call, for model listings (the compiled publication's, per grant, not a scan of every entrypoint). */
export function grantedEntrypoints(publication: CompiledPublication, principal: Principal): readonly CompiledEntrypoint[] {
  return publication.grantedEntrypoints(principal);
}
