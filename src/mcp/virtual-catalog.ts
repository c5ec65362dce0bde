import { GatewayError } from "../errors/gateway-error.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import { SERVER_NAME, splitNamespaced } from "./tool-names.ts";
import type { PolicyQuestion, ToolPolicy } from "./tool-policy.ts";
import type { ListFailurePolicy } from "./virtual-server.ts";

/**
 * Prompts, resources and resource templates on the virtual server (`POST /mcp`), beside its tools
 * (src/mcp/virtual-server.ts), by the same rule: every item is named by its server, so two
 * servers' items never collide and a name reaches only the server it names.
 *
 * - A prompt is `<server>.<name>`, split at the first dot as a tool name is.
 * - A resource URI (and a resource template) is `<server>+<uri>`. A server name never holds a
 *   `+`, so the first `+` is always the separator, whatever the URI holds, and the result is still
 *   a URI (`+` is allowed in a scheme) or a URI template. The URIs in a read's contents are
 *   renamed the same way, so a client can read what it was given.
 *
 * The policy always decides on the server's own name or URI.
 */

/** The list methods of the catalog, and where each keeps its items. */
export const CATALOG_LISTS = {
  "prompts/list": { field: "prompts", key: "name", kind: "prompt" },
  "resources/list": { field: "resources", key: "uri", kind: "resource" },
  "resources/templates/list": { field: "resourceTemplates", key: "uriTemplate", kind: "resource" },
} as const;

/** One of {@link CATALOG_LISTS}' methods. */
export type CatalogList = keyof typeof CATALOG_LISTS;

/** A listed item as its server describes it (other fields pass through untouched). */
export type CatalogItem = Readonly<Record<string, unknown>>;

/** One server's items for a list method, or why there are none. */
export type CatalogListing =
  | { readonly server: string; readonly ok: true; readonly items: readonly CatalogItem[] }
  | { readonly server: string; readonly ok: false; readonly reason: string };

/** The virtual server's URI for `uri` of `server`. */
export function namespacedUri(server: string, uri: string): string {
  return `${server}+${uri}`;
}

/** The server and its own URI a namespaced URI stands for; undefined when it is not one. */
export function splitNamespacedUri(full: string): { readonly server: string; readonly uri: string } | undefined {
  const plus = full.indexOf("+");
  if (plus <= 0 || plus === full.length - 1) return undefined;
  const server = full.slice(0, plus);
  return SERVER_NAME.test(server) ? { server, uri: full.slice(plus + 1) } : undefined;
}

/**
 * The items of `method` the caller may see: one server's under their own names (`virtual`
 * false), or every server's renamed by server. A failed server fails the list under `closed`, and
 * is reported in `partial` under `open`.
 */
export function mergeCatalog(
  method: CatalogList,
  listings: readonly CatalogListing[],
  failure: (server: string) => ListFailurePolicy,
  caller: Pick<PolicyQuestion, "tenant" | "key">,
  policy: ToolPolicy,
  virtual: boolean,
): { readonly items: readonly CatalogItem[]; readonly partial: readonly { readonly server: string; readonly reason: string }[] } {
  const { key, kind } = CATALOG_LISTS[method];
  const items: CatalogItem[] = [];
  const partial: { server: string; reason: string }[] = [];
  for (const l of listings) {
    if (!l.ok) {
      if (failure(l.server) === "closed" || !virtual) throw new GatewayError("upstream_error", `The ${method} of MCP server ${l.server} could not be read${virtual ? ", and it fails closed" : ""}.`, { cause: l.reason });
      partial.push({ server: l.server, reason: l.reason });
      continue;
    }
    for (const item of l.items) {
      const own = item[key];
      if (typeof own !== "string" || !policy.visible({ ...caller, server: l.server, kind, name: own }).allowed) continue;
      items.push(virtual ? { ...item, [key]: kind === "prompt" ? `${l.server}.${own}` : namespacedUri(l.server, own) } : item);
    }
  }
  return { items, partial };
}

/** Where a `prompts/get` or `resources/read` on the virtual server goes, by the name or URI it names. */
export function routeCatalogRead(method: "prompts/get" | "resources/read", target: string, servers: { has(name: string): boolean }): { readonly server: string; readonly name: string } {
  const split = method === "prompts/get" ? splitNamespaced(target) : (() => {
    const s = splitNamespacedUri(target);
    return s && { server: s.server, name: s.uri };
  })();
  if (split === undefined || !servers.has(split.server)) {
    const rule = method === "prompts/get" ? "<server>.<prompt>" : "<server>+<uri>";
    throw new GatewayError("invalid_request", `Unknown ${method === "prompts/get" ? "prompt" : "resource"}: the virtual server names them ${rule}.`, { param: method === "prompts/get" ? "params.name" : "params.uri" });
  }
  return split;
}

/** A read's result with its contents' URIs renamed as the virtual server lists them. */
export function renameContents(server: string, result: Readonly<Record<string, unknown>>): Record<string, unknown> {
  if (!Array.isArray(result.contents)) return { ...result };
  return { ...result, contents: result.contents.map((c) => (isRecord(c) && typeof c.uri === "string" ? { ...c, uri: namespacedUri(server, c.uri) } : c)) };
}
