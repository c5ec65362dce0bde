/**
 * Bedrock's error answers by their `x-amzn-errortype`: refusals before any work are known-zero
 * (through the codec's statuses), a refused credential is the gateway's own, a model timeout or
 * model error came after the work began.
 */
import { describe, expect, it } from "vitest";
import { evidenceFromStatus } from "../../../src/invoker/evidence.ts";
import { bedrockErrorType, bedrockStatusFailure } from "../../../src/invoker/bedrock-errors.ts";
import { errorFromUpstreamStatus } from "../../../src/invoker/upstream-error.ts";
import { bedrockConverseCodec } from "../../../src/protocol/bedrock-converse/index.ts";

/** What the invoker does: the Bedrock classification first, then the status's usual meaning. */
function classify(status: number, header: string | null) {
  const own = bedrockStatusFailure(status, bedrockErrorType(header), '{"message":"x"}');
  if (own) return { code: own.error.code, evidence: own.evidence.class, outcome: own.outcome };
  return { code: errorFromUpstreamStatus(status, undefined, "").code, evidence: evidenceFromStatus(status, bedrockConverseCodec.rejectedBeforeProcessing).class, outcome: "upstream_status" };
}

describe("Bedrock errors", () => {
  it("reads the error type from the header, with or without its namespace", () => {
    expect(bedrockErrorType("ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/")).toBe("ThrottlingException");
    expect(bedrockErrorType("ValidationException")).toBe("ValidationException");
    expect(bedrockErrorType(null)).toBeUndefined();
  });

  it("maps each documented error to its code and evidence", () => {
    expect(classify(429, "ThrottlingException")).toEqual({ code: "upstream_rate_limited", evidence: "known_zero", outcome: "upstream_status" });
    expect(classify(429, "ModelNotReadyException")).toEqual({ code: "upstream_rate_limited", evidence: "known_zero", outcome: "upstream_status" });
    expect(classify(503, "ServiceUnavailableException")).toEqual({ code: "upstream_overloaded", evidence: "known_zero", outcome: "upstream_status" });
    expect(classify(400, "ValidationException")).toEqual({ code: "invalid_request", evidence: "client_error", outcome: "upstream_status" });
    for (const t of ["AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException"]) {
      expect(classify(403, t)).toEqual({ code: "upstream_auth_failed", evidence: "client_error", outcome: "upstream_status" });
    }
    expect(classify(408, "ModelTimeoutException")).toEqual({ code: "upstream_timeout", evidence: "unknown", outcome: "timeout" });
    expect(classify(424, "ModelErrorException")).toEqual({ code: "upstream_error", evidence: "unknown", outcome: "upstream_status" });
    expect(classify(500, "InternalServerException")).toEqual({ code: "upstream_error", evidence: "unknown", outcome: "upstream_status" });
  });

  it("keeps the provider's text as the internal cause only", () => {
    const f = bedrockStatusFailure(403, "AccessDeniedException", '{"message":"User: arn:aws:iam::123456789012:user/x is not authorized"}')!;
    expect(f.error.message).not.toContain("123456789012");
  });
});
