import { GatewayError } from "../errors/gateway-error.ts";
import { namespacedName } from "./tool-names.ts";
import type { PolicyQuestion, ToolPolicy } from "./tool-policy.ts";

/**
 * The virtual server (`POST /mcp`): what many upstream servers list, merged under namespaced
 * names and filtered by the caller's policy, and where a call by namespaced name goes.
 */

/** A listed tool as an upstream server describes it (other fields pass through untouched). */
export interface ListedTool {
  readonly name: string;
  readonly [field: string]: unknown;
}

/** One server's answer to a list request: its tools, or why there are none. */
export type ServerListing =
  | { readonly server: string; readonly ok: true; readonly tools: readonly ListedTool[] }
  | { readonly server: string; readonly ok: false; readonly reason: string };

/** How the merge treats a server whose list failed (per server, from configuration). */
export type ListFailurePolicy = "open" | "closed";

/** The merged list, and what it leaves out and why (reported to the caller and in the audit). */
export interface MergedList {
  readonly tools: readonly ListedTool[];
  /** Servers whose list failed under `open`: the others are still listed. */
  readonly partial: readonly { readonly server: string; readonly reason: string }[];
  /** Upstream tools left out because their namespaced name would not be a valid tool name. */
  readonly unnamed: readonly { readonly server: string; readonly name: string }[];
}

/**
 * Merges the lists of the servers the caller may use. Each tool is renamed `<server>.<name>` and
 * kept only when the policy lets the caller see it. A failed server does not hide the others:
 * under `open` its absence is reported in `partial`; under `closed` the whole list fails (for a
 * deployment that would rather show nothing than an incomplete set).
 */
export function mergeToolLists(
  listings: readonly ServerListing[],
  failure: (server: string) => ListFailurePolicy,
  caller: Pick<PolicyQuestion, "tenant" | "key">,
  policy: ToolPolicy,
): MergedList {
  const tools: ListedTool[] = [];
  const partial: { server: string; reason: string }[] = [];
  const unnamed: { server: string; name: string }[] = [];
  for (const l of listings) {
    if (!l.ok) {
      if (failure(l.server) === "closed") throw new GatewayError("upstream_error", `The tool list of server ${l.server} could not be read, and it fails closed.`);
      partial.push({ server: l.server, reason: l.reason });
      continue;
    }
    for (const t of l.tools) {
      if (typeof t.name !== "string") continue;
      if (!policy.visible({ ...caller, server: l.server, kind: "tool", name: t.name }).allowed) continue;
      const name = namespacedName(l.server, t.name);
      if (name === undefined) {
        unnamed.push({ server: l.server, name: t.name.slice(0, 128) });
        continue;
      }
      tools.push({ ...t, name });
    }
  }
  return { tools, partial, unnamed };
}
