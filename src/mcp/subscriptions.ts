import { GatewayError } from "../errors/gateway-error.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import { namespacedUri, splitNamespacedUri } from "./virtual-catalog.ts";

/**
 * Subscriptions through the gateway: a 2026-07-28 client's `subscriptions/listen` (a filter of
 * the notification types it opts in to) and a stateful-era client's GET stream, fanned in from
 * each server the client reaches there. A notification reaches the client only when its filter
 * asked for it, with its resource URI renamed as the endpoint names resources.
 */

/** What a client opts in to (the revision's `SubscriptionFilter`). */
export interface SubscriptionFilter {
  readonly toolsListChanged?: boolean;
  readonly promptsListChanged?: boolean;
  readonly resourcesListChanged?: boolean;
  /** Resource URIs as the client names them (`<server>+<uri>` on the virtual server). */
  readonly resourceSubscriptions?: readonly string[];
}

/** Everything a stateful-era client's GET stream carries: the era had no filter. */
export const EVERYTHING: SubscriptionFilter = { toolsListChanged: true, promptsListChanged: true, resourcesListChanged: true };

/** Reads `params.notifications` of a `subscriptions/listen` request. */
export function parseFilter(raw: unknown): SubscriptionFilter {
  if (!isRecord(raw)) throw new GatewayError("invalid_request", "subscriptions/listen needs params.notifications: the notification types to receive.", { param: "params.notifications" });
  const flag = (k: string) => {
    const v = raw[k];
    if (v !== undefined && typeof v !== "boolean") throw new GatewayError("invalid_request", `params.notifications.${k} must be a boolean.`, { param: `params.notifications.${k}` });
    return v === true;
  };
  const subs = raw.resourceSubscriptions;
  if (subs !== undefined && (!Array.isArray(subs) || subs.length > 256 || !subs.every((u) => typeof u === "string" && u.length <= 2048))) {
    throw new GatewayError("invalid_request", "params.notifications.resourceSubscriptions must be at most 256 resource URIs.", { param: "params.notifications.resourceSubscriptions" });
  }
  return {
    toolsListChanged: flag("toolsListChanged"),
    promptsListChanged: flag("promptsListChanged"),
    resourcesListChanged: flag("resourcesListChanged"),
    resourceSubscriptions: (subs as string[] | undefined) ?? [],
  };
}

/**
 * The filter to send one server: the client's flags, and the resources of that server under the
 * server's own URIs (on the virtual server, only those named `<server>+…`).
 */
export function filterFor(server: string, filter: SubscriptionFilter, virtual: boolean): SubscriptionFilter & { readonly resourceSubscriptions: readonly string[] } {
  const uris = (filter.resourceSubscriptions ?? []).flatMap((u) => {
    if (!virtual) return [u];
    const split = splitNamespacedUri(u);
    return split && split.server === server ? [split.uri] : [];
  });
  return { toolsListChanged: filter.toolsListChanged === true, promptsListChanged: filter.promptsListChanged === true, resourcesListChanged: filter.resourcesListChanged === true, resourceSubscriptions: uris };
}

/**
 * The notification a server sent, as the client may receive it, or undefined when the client did
 * not ask for it (or it is the server's own acknowledgement, which the gateway answers itself).
 */
export function relayedNotification(
  server: string,
  n: { readonly method: string; readonly params?: unknown },
  filter: SubscriptionFilter,
  virtual: boolean,
): { readonly method: string; readonly params: Record<string, unknown> } | undefined {
  const params = isRecord(n.params) ? n.params : {};
  // The server's own _meta (its subscription id) is not the client's.
  const { _meta: _own, ...rest } = params;
  switch (n.method) {
    case "notifications/tools/list_changed":
      return filter.toolsListChanged ? { method: n.method, params: rest } : undefined;
    case "notifications/prompts/list_changed":
      return filter.promptsListChanged ? { method: n.method, params: rest } : undefined;
    case "notifications/resources/list_changed":
      return filter.resourcesListChanged ? { method: n.method, params: rest } : undefined;
    case "notifications/resources/updated": {
      if (typeof rest.uri !== "string") return undefined;
      const uri = virtual ? namespacedUri(server, rest.uri) : rest.uri;
      // A stateful-era client's GET stream carries the updates it subscribed to in its session.
      if (filter !== EVERYTHING && !(filter.resourceSubscriptions ?? []).includes(uri)) return undefined;
      return { method: n.method, params: { ...rest, uri } };
    }
    default:
      return undefined;
  }
}
