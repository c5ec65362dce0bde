import { describe, expect, it } from "vitest";
import { ERROR_CODES, GatewayError } from "../../../src/errors/gateway-error.ts";
import { jsonRpcCode, toJsonRpcErrorBody } from "../../../src/errors/json-rpc.ts";
import { checkStatelessFraming, decodeHeaderValue, STATELESS_VERSION, validateStatelessRequest } from "../../../src/protocol/mcp/stateless-request.ts";

const SUPPORTED = [STATELESS_VERSION];
const meta = { "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION, "io.modelcontextprotocol/clientCapabilities": {} };
const call = (params: Record<string, unknown> = {}) => ({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "search", arguments: { q: "x" }, _meta: meta, ...params } });
const headers = (h: Record<string, string>) => new Headers({ "mcp-protocol-version": STATELESS_VERSION, "mcp-method": "tools/call", "mcp-name": "search", ...h });

/** The code, HTTP status and JSON-RPC code of what `fn` throws. */
function refusal(fn: () => unknown) {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError);
    const e = err as GatewayError;
    return { code: e.code, status: e.status, rpc: jsonRpcCode(e.code) };
  }
  throw new Error("expected a refusal");
}

describe("MCP stateless request validation (2026-07-28)", () => {
  it("accepts a request whose headers repeat its body, and reads version and capabilities from _meta", () => {
    expect(validateStatelessRequest(headers({}), call(), SUPPORTED)).toMatchObject({ id: 7, method: "tools/call", protocolVersion: STATELESS_VERSION, clientCapabilities: {} });
    const read = { jsonrpc: "2.0", id: "r1", method: "resources/read", params: { uri: "file:///a b", _meta: meta } };
    expect(validateStatelessRequest(headers({ "mcp-method": "resources/read", "mcp-name": `=?base64?${btoa("file:///a b")}?=` }), read, SUPPORTED).method).toBe("resources/read");
    const list = { jsonrpc: "2.0", id: 1, method: "tools/list", params: { _meta: meta } };
    expect(validateStatelessRequest(new Headers({ "mcp-protocol-version": STATELESS_VERSION, "mcp-method": "tools/list" }), list, SUPPORTED).id).toBe(1);
  });

  it.each([
    ["a batch", [call()], {}, "mcp_invalid_message", 400, -32600],
    ["no jsonrpc 2.0", { ...call(), jsonrpc: "1.0" }, {}, "mcp_invalid_message", 400, -32600],
    ["an object id", { ...call(), id: { x: 1 } }, {}, "mcp_invalid_message", 400, -32600],
    ["no _meta", { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "search" } }, {}, "invalid_request", 400, -32602],
    ["no capabilities", call({ _meta: { "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION } }), {}, "invalid_request", 400, -32602],
    ["an unsupported version", call({ _meta: { ...meta, "io.modelcontextprotocol/protocolVersion": "2099-01-01" } }), { "mcp-protocol-version": "2099-01-01" }, "mcp_unsupported_version", 400, -32022],
    ["a version header that differs from _meta", call(), { "mcp-protocol-version": "2025-11-25" }, "mcp_header_mismatch", 400, -32020],
    ["Mcp-Method naming another method", call(), { "mcp-method": "tools/list" }, "mcp_header_mismatch", 400, -32020],
    ["a forged Mcp-Name", call(), { "mcp-name": "delete_everything" }, "mcp_header_mismatch", 400, -32020],
    ["an undecodable Mcp-Name", call(), { "mcp-name": "=?base64?@@@?=" }, "mcp_header_mismatch", 400, -32020],
    ["an unknown method", { jsonrpc: "2.0", id: 1, method: "tools/delete", params: { _meta: meta } }, { "mcp-method": "tools/delete" }, "mcp_method_not_found", 404, -32601],
    ["a legacy initialize (naming the supported versions)", { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {} } }, { "mcp-method": "initialize" }, "mcp_unsupported_version", 400, -32022],
    ["tools/call without a name", call({ name: undefined }), {}, "invalid_request", 400, -32602],
    ["tools/call with arguments that are not an object", call({ arguments: ["q", "x"] }), {}, "invalid_request", 400, -32602],
  ])("refuses %s", (_what, body, h, code, status, rpc) => {
    expect(refusal(() => validateStatelessRequest(headers(h as Record<string, string>), body, SUPPORTED))).toEqual({ code, status, rpc });
  });

  it("names the supported versions when refusing one", () => {
    try {
      validateStatelessRequest(headers({ "mcp-protocol-version": "2099-01-01" }), call({ _meta: { ...meta, "io.modelcontextprotocol/protocolVersion": "2099-01-01" } }), SUPPORTED);
    } catch (err) {
      const body = toJsonRpcErrorBody(err as GatewayError, 7);
      expect(body).toEqual({
        jsonrpc: "2.0",
        id: 7,
        error: { code: -32022, message: expect.any(String), data: { supported: SUPPORTED, requested: "2099-01-01", code: "mcp_unsupported_version", retryable: false, details: [{ supported: SUPPORTED, requested: "2099-01-01" }] } },
      });
    }
  });

  it("decodes =?base64?…?= header values as UTF-8, and passes plain values through", () => {
    expect(decodeHeaderValue("plain")).toBe("plain");
    expect(decodeHeaderValue(`=?base64?${btoa(String.fromCharCode(...new TextEncoder().encode("wetter-münchen")))}?=`)).toBe("wetter-münchen");
    expect(decodeHeaderValue("=?base64?/w==?=")).toBeUndefined();
  });

  it("checks the HTTP framing: POST (or an event-stream GET, for the engine to judge), allowed origins, JSON in, JSON or events out", () => {
    const ok = new Headers({ "content-type": "application/json", accept: "application/json, text/event-stream" });
    expect(() => checkStatelessFraming("POST", ok, [])).not.toThrow();
    // A GET is a stateful-era session's stream or a 405, which only the engine can tell (it needs the session).
    expect(() => checkStatelessFraming("GET", new Headers({ accept: "text/event-stream" }), [])).not.toThrow();
    expect(refusal(() => checkStatelessFraming("GET", new Headers({ accept: "application/json" }), []))).toMatchObject({ code: "not_acceptable" });
    expect(refusal(() => checkStatelessFraming("GET", new Headers({ accept: "text/event-stream", origin: "http://evil.example" }), []))).toMatchObject({ code: "origin_not_allowed" });
    expect(refusal(() => checkStatelessFraming("DELETE", ok, []))).toMatchObject({ status: 405 });
    const evil = new Headers({ "content-type": "application/json", accept: "application/json, text/event-stream", origin: "http://evil.example" });
    expect(refusal(() => checkStatelessFraming("POST", evil, ["https://app.example.com"]))).toMatchObject({ code: "origin_not_allowed", status: 403 });
    expect(() => checkStatelessFraming("POST", new Headers({ ...Object.fromEntries(evil), origin: "https://app.example.com" }), ["https://app.example.com"])).not.toThrow();
    expect(refusal(() => checkStatelessFraming("POST", new Headers({ "content-type": "text/plain", accept: "application/json, text/event-stream" }), []))).toMatchObject({ status: 415 });
    expect(refusal(() => checkStatelessFraming("POST", new Headers({ "content-type": "application/json", accept: "application/json" }), []))).toMatchObject({ code: "not_acceptable", status: 406 });
  });

  it("maps every gateway error code to a JSON-RPC code", () => {
    for (const code of ERROR_CODES) expect(Number.isInteger(jsonRpcCode(code)), code).toBe(true);
    expect(toJsonRpcErrorBody(new GatewayError("budget_exceeded", "no money"), null)).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32000, message: "no money", data: { code: "budget_exceeded", retryable: true } } });
  });
});
