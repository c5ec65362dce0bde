import { describe, expect, it } from "vitest";
import { CredentialWatch } from "../../../src/traffic/credential-watch.ts";
import { toAnthropicErrorBody, toOpenAiErrorBody } from "../../../src/errors/envelopes.ts";
import { jsonRpcCode } from "../../../src/errors/json-rpc.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { errorFromUpstreamStatus } from "../../../src/invoker/upstream-error.ts";

describe("CredentialWatch", () => {
  it("marks a backend refused until an accepted answer clears it, and keeps the refusal's status and time", () => {
    const w = new CredentialWatch();
    expect(w.view("b1")).toBeUndefined();
    w.rejected("b1", 401, 1_000);
    expect(w.view("b1")).toEqual({ state: "credential_rejected", status: 401, at: 1_000 });
    w.rejected("b1", 403, 2_000);
    expect(w.view("b1")).toEqual({ state: "credential_rejected", status: 403, at: 2_000 });
    w.accepted("b1", 3_000);
    expect(w.view("b1")).toEqual({ state: "accepted", at: 3_000 });
    // A run of accepted answers keeps the time the state began.
    w.accepted("b1", 4_000);
    expect(w.view("b1")?.at).toBe(3_000);
    expect(w.view("b2")).toBeUndefined();
  });

  it("is bounded: the least recently changed backend is dropped first", () => {
    const w = new CredentialWatch(2);
    w.rejected("a", 401, 1);
    w.rejected("b", 401, 2);
    w.rejected("a", 401, 3);
    w.accepted("c", 4);
    expect(w.view("b")).toBeUndefined();
    expect(w.view("a")?.state).toBe("credential_rejected");
    expect(w.view("c")?.state).toBe("accepted");
  });
});

describe("upstream_auth_failed", () => {
  it("is what a provider's 401 and 403 become, by status, whatever the provider's text", () => {
    for (const status of [401, 403]) {
      const err = errorFromUpstreamStatus(status, undefined, "Incorrect API key provided: sk-abc");
      expect(err).toMatchObject({ code: "upstream_auth_failed", status: 502, source: "upstream", retryable: false });
      expect(err.message).not.toContain("sk-abc");
    }
    // Neighbouring statuses keep their own codes.
    expect(errorFromUpstreamStatus(400, undefined, "invalid api key").code).toBe("invalid_request");
    expect(errorFromUpstreamStatus(404, undefined, "").code).toBe("upstream_error");
  });

  it("has each protocol's envelope: a server-side failure, never an authentication error the caller would blame on its own key", () => {
    const err = new GatewayError("upstream_auth_failed", "The model provider refused the gateway's credentials for this backend.");
    expect(toOpenAiErrorBody(err)).toEqual({ error: { message: err.message, type: "server_error", param: null, code: "upstream_auth_failed" } });
    expect(toAnthropicErrorBody(err)).toEqual({ type: "error", error: { type: "api_error", message: err.message } });
    expect(jsonRpcCode("upstream_auth_failed")).toBe(-32000);
  });
});
