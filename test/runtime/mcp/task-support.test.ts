import { describe, expect, it } from "vitest";
import { withTaskSupport } from "../../../src/mcp/task-support.ts";

describe("tools' task support as the gateway lists it", () => {
  it("says optional of a tool that may wait for approval, keeping the other execution fields", () => {
    expect(withTaskSupport({ name: "deploy", inputSchema: { type: "object" } }, true)).toEqual({ name: "deploy", inputSchema: { type: "object" }, execution: { taskSupport: "optional" } });
    expect(withTaskSupport({ name: "deploy", execution: { taskSupport: "forbidden", other: 1 } }, true)).toEqual({ name: "deploy", execution: { taskSupport: "optional", other: 1 } });
  });

  it("drops what a server says of its own task support (the gateway does not relay its tasks)", () => {
    expect(withTaskSupport({ name: "slow", execution: { taskSupport: "required" } }, false)).toEqual({ name: "slow" });
    expect(withTaskSupport({ name: "slow", execution: { taskSupport: "optional", other: true } }, false)).toEqual({ name: "slow", execution: { other: true } });
    const plain = { name: "plain", description: "d" };
    expect(withTaskSupport(plain, false)).toBe(plain);
  });
});
