import { describe, expect, it } from "vitest";
import { refusalCode } from "../support/refusal.ts";
import { checkLegacyParams, isStatelessMessage, legacyVersionOf, negotiateVersion, validateLegacyMessage } from "../../../src/protocol/mcp/legacy-request.ts";

const codeOf = refusalCode;

describe("stateful-era MCP messages", () => {
  it("tells the eras apart by the per-request _meta version", () => {
    expect(isStatelessMessage({ jsonrpc: "2.0", id: 1, method: "tools/list", params: { _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28" } } })).toBe(true);
    expect(isStatelessMessage({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25" } })).toBe(false);
    expect(isStatelessMessage([])).toBe(false);
  });

  it("accepts requests and notifications, refuses batches and malformed messages", () => {
    expect(validateLegacyMessage({ jsonrpc: "2.0", id: "a", method: "tools/list" })).toEqual({ id: "a", method: "tools/list", params: {} });
    expect(validateLegacyMessage({ jsonrpc: "2.0", method: "notifications/initialized" }).id).toBeUndefined();
    expect(codeOf(() => validateLegacyMessage([{ jsonrpc: "2.0", id: 1, method: "ping" }]))).toBe("mcp_invalid_message");
    expect(codeOf(() => validateLegacyMessage({ jsonrpc: "2.0", method: "tools/list" }))).toBe("mcp_invalid_message");
    expect(codeOf(() => validateLegacyMessage({ jsonrpc: "2.0", id: null, method: "ping" }))).toBe("mcp_invalid_message");
    expect(codeOf(() => validateLegacyMessage({ jsonrpc: "2.0", id: 1, method: "ping", params: [1] }))).toBe("invalid_request");
  });

  it("refuses a request without what it is about, or with arguments that are not an object, as the caller's error", () => {
    for (const [method, params] of [
      ["tools/call", {}],
      ["tools/call", { name: 123 }],
      ["tools/call", { name: "" }],
      ["prompts/get", { name: null }],
      ["resources/read", {}],
      ["resources/subscribe", { uri: 7 }],
      ["tools/call", { name: "echo", arguments: "rm -rf" }],
      ["tools/call", { name: "echo", arguments: [1] }],
    ] as const) {
      expect(codeOf(() => checkLegacyParams(validateLegacyMessage({ jsonrpc: "2.0", id: 1, method, params }))), `${method} ${JSON.stringify(params)}`).toBe("invalid_request");
    }
    const ok = validateLegacyMessage({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "echo", arguments: { a: 1 } } });
    expect(() => checkLegacyParams(ok)).not.toThrow();
    expect(ok.params).toEqual({ name: "echo", arguments: { a: 1 } });
  });

  it("negotiates the requested version when supported, else the newest; reads the header after initialize", () => {
    expect(negotiateVersion("2025-06-18")).toBe("2025-06-18");
    expect(negotiateVersion("2024-11-05")).toBe("2025-11-25");
    expect(negotiateVersion(undefined)).toBe("2025-11-25");
    expect(legacyVersionOf(new Headers())).toBe("2025-03-26");
    expect(legacyVersionOf(new Headers({ "mcp-protocol-version": "2025-11-25" }))).toBe("2025-11-25");
    expect(codeOf(() => legacyVersionOf(new Headers({ "mcp-protocol-version": "1999-01-01" })))).toBe("mcp_unsupported_version");
  });
});
