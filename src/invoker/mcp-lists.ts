/**
 * The invoke phase of MCP lists: every page of each server the endpoint reaches, asked in the
 * caller's own upstream sessions, and — on the virtual server — merged under namespaced names and
 * filtered by what the policy lets the caller see (a server that fails is reported, or fails the
 * list when it fails closed). One server's endpoint reads one page under its own cursor.
 */

import type { PolicyCaller } from "../auth/mcp-authorize.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import { withTaskSupport } from "../mcp/task-support.ts";
import type { ToolPolicy } from "../mcp/tool-policy.ts";
import { upstreamRefusal } from "../mcp/upstream-errors.ts";
import { CATALOG_LISTS, mergeCatalog, type CatalogItem, type CatalogList } from "../mcp/virtual-catalog.ts";
import { mergeToolLists, type ListedTool } from "../mcp/virtual-server.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import { invokeUpstream, listAll, listTools, type McpExchange } from "./mcp-exchange.ts";

/** A list as the endpoint answers it: the items, and what the virtual server could not include. */
export interface EndpointList<T> {
  readonly items: readonly T[];
  /** Servers whose list failed under `open` (virtual server only). */
  readonly partial: readonly { readonly server: string; readonly reason: string }[];
  /** Tools left out because their namespaced name would not be a valid tool name (virtual server only). */
  readonly unnamed: readonly { readonly server: string; readonly name: string }[];
  /** One server's next page (its own cursor), when it has more. */
  readonly nextCursor?: string | undefined;
}

/** What a list is filtered by: the policy, who asks, and at which endpoint (undefined: the virtual server). */
export interface ListScope {
  readonly policy: ToolPolicy;
  readonly caller: PolicyCaller;
  readonly endpoint: string | undefined;
  readonly names: readonly string[];
}

/**
 * `tools/list`: each tool as the caller may see it, with the gateway's own task support in place
 * of the servers' (`tasks`: this client is served tasks; the gateway does not relay servers' tasks).
 */
export async function listEndpointTools(x: McpExchange, scope: ListScope, tasks: boolean): Promise<EndpointList<ListedTool>> {
  const { policy, caller, endpoint } = scope;
  const listings = (await Promise.all(scope.names.map((n) => listTools(x, n, endpoint === undefined)))).map((l) =>
    l.ok ? { ...l, tools: l.tools.map((t) => withTaskSupport(t, tasks && policy.mayNeedApproval({ ...caller, server: l.server, kind: "tool", name: t.name }))) } : l,
  );
  if (endpoint === undefined) {
    const merged = mergeToolLists(listings, (n) => x.servers.get(n)?.listFailure ?? "open", caller, policy);
    return { items: merged.tools, partial: merged.partial, unnamed: merged.unnamed };
  }
  const only = listings[0]!;
  if (!only.ok) throw new GatewayError("upstream_error", `The tool list of MCP server ${endpoint} could not be read.`, { cause: only.reason });
  return { items: only.tools.filter((t) => policy.visible({ ...caller, server: endpoint, kind: "tool", name: t.name }).allowed), partial: [], unnamed: [] };
}

/** `prompts/list`, `resources/list`, `resources/templates/list`: one server's page, or every server's whole list merged. */
export async function listEndpointCatalog(x: McpExchange, scope: ListScope, method: CatalogList, cursor: unknown): Promise<EndpointList<CatalogItem>> {
  const { policy, caller, endpoint } = scope;
  const { field } = CATALOG_LISTS[method];
  if (endpoint !== undefined) {
    // One server's page, under its own names and cursor.
    const answer = await invokeUpstream(x, endpoint, method, typeof cursor === "string" ? { cursor } : {});
    if (!answer.ok) throw upstreamRefusal(endpoint, answer.error);
    const result = isRecord(answer.result) ? answer.result : {};
    const items = Array.isArray(result[field]) ? (result[field] as unknown[]).filter(isRecord) : [];
    const merged = mergeCatalog(method, [{ server: endpoint, ok: true, items }], () => "closed", caller, policy, false);
    return { items: merged.items, partial: [], unnamed: [], nextCursor: typeof result.nextCursor === "string" ? result.nextCursor : undefined };
  }
  const listings = await Promise.all(scope.names.map((n) => listAll(x, n, method, field, true)));
  const merged = mergeCatalog(method, listings, (n) => x.servers.get(n)?.listFailure ?? "open", caller, policy, true);
  return { items: merged.items, partial: merged.partial, unnamed: [] };
}
