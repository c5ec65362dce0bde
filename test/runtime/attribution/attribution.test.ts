import { describe, expect, it } from "vitest";
import { attributionOf, isUnattributed, readAttribution } from "../../../src/attribution/attribution.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";

describe("attribution", () => {
  it("reads the ids from headers, or from an MCP request's _meta, as sent", () => {
    const h = new Headers({ "x-sluice-task-id": "task-1", "x-sluice-turn-id": "t:3" });
    expect(readAttribution(h)).toEqual({ taskId: "task-1", turnId: "t:3" });
    expect(readAttribution(new Headers(), { "sluice.dev/taskId": "task-2", "sluice.dev/parentTaskId": "task-1" })).toEqual({ taskId: "task-2", parentTaskId: "task-1" });
    // Sent both ways, they must agree.
    expect(readAttribution(h, { "sluice.dev/taskId": "task-1" })).toEqual({ taskId: "task-1", turnId: "t:3" });
    expect(() => readAttribution(h, { "sluice.dev/taskId": "task-9" })).toThrow(GatewayError);
  });

  it("never invents: no ids is unattributed", () => {
    expect(isUnattributed(readAttribution(new Headers()))).toBe(true);
    expect(isUnattributed({ sessionId: "s" })).toBe(false);
  });

  it("refuses a malformed id instead of dropping it", () => {
    for (const bad of ["", " task", "a/b", "x".repeat(129), "-lead", "tab\there"]) {
      const got = attributionOf({ get: (n: string) => (n === "x-sluice-session-id" ? bad : null) });
      expect(got, JSON.stringify(bad)).toMatchObject({ error: { code: "invalid_request" } });
    }
    expect(() => readAttribution(new Headers(), { "sluice.dev/taskId": 7 })).toThrow(GatewayError);
  });
});
