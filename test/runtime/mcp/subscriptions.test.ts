import { describe, expect, it } from "vitest";
import { EVERYTHING, filterFor, parseFilter, relayedNotification } from "../../../src/mcp/subscriptions.ts";
import { refusalCode } from "../support/refusal.ts";

describe("subscriptions through the gateway", () => {
  it("reads a listen filter strictly", () => {
    expect(parseFilter({ toolsListChanged: true })).toEqual({ toolsListChanged: true, promptsListChanged: false, resourcesListChanged: false, resourceSubscriptions: [] });
    expect(refusalCode(() => parseFilter(undefined))).toBe("invalid_request");
    expect(refusalCode(() => parseFilter({ toolsListChanged: "yes" }))).toBe("invalid_request");
    expect(refusalCode(() => parseFilter({ resourceSubscriptions: [3] }))).toBe("invalid_request");
    expect(refusalCode(() => parseFilter({ resourceSubscriptions: Array.from({ length: 257 }, (_, i) => `r${i}`) }))).toBe("invalid_request");
  });

  it("sends each server only its own resources, under its own URIs", () => {
    const filter = parseFilter({ resourcesListChanged: true, resourceSubscriptions: ["a+file:///x", "b+file:///y", "nonsense"] });
    expect(filterFor("a", filter, true)).toEqual({ toolsListChanged: false, promptsListChanged: false, resourcesListChanged: true, resourceSubscriptions: ["file:///x"] });
    expect(filterFor("c", filter, true).resourceSubscriptions).toEqual([]);
    expect(filterFor("a", filter, false).resourceSubscriptions).toEqual(["a+file:///x", "b+file:///y", "nonsense"]);
  });

  it("relays only what the client asked for, renamed, without the server's own _meta", () => {
    const filter = parseFilter({ toolsListChanged: true, resourceSubscriptions: ["a+file:///x"] });
    expect(relayedNotification("a", { method: "notifications/tools/list_changed", params: { _meta: { "io.modelcontextprotocol/subscriptionId": 9 } } }, filter, true)).toEqual({ method: "notifications/tools/list_changed", params: {} });
    expect(relayedNotification("a", { method: "notifications/prompts/list_changed" }, filter, true)).toBeUndefined();
    expect(relayedNotification("a", { method: "notifications/resources/updated", params: { uri: "file:///x" } }, filter, true)).toEqual({ method: "notifications/resources/updated", params: { uri: "a+file:///x" } });
    expect(relayedNotification("a", { method: "notifications/resources/updated", params: { uri: "file:///other" } }, filter, true)).toBeUndefined();
    expect(relayedNotification("b", { method: "notifications/resources/updated", params: { uri: "file:///x" } }, filter, true)).toBeUndefined();
    // The server's acknowledgement is its own; the gateway sends the client its own.
    expect(relayedNotification("a", { method: "notifications/subscriptions/acknowledged", params: {} }, filter, true)).toBeUndefined();
    // A stateful-era GET stream carries every update of the session's own subscriptions.
    expect(relayedNotification("a", { method: "notifications/resources/updated", params: { uri: "file:///z" } }, EVERYTHING, false)).toEqual({ method: "notifications/resources/updated", params: { uri: "file:///z" } });
  });
});
