import { describe, expect, it } from "vitest";
import type { AttemptRecord } from "../../../src/context/attempt-record.ts";
import { breakerReport } from "../../../src/invoker/breaker-outcome.ts";

const a = (over: Partial<AttemptRecord>): AttemptRecord => ({
  id: "att",
  requestId: "req",
  snapshotRevision: 1,
  logicalModel: "m",
  modelRevision: 1,
  pool: "p",
  backendId: "b",
  backendName: "b",
  upstreamModel: "u",
  startedAt: 0,
  outcome: "success",
  ...over,
});

describe("breakerReport: only the backend's own failures count", () => {
  it("counts provider failures", () => {
    expect(breakerReport(a({ outcome: "success" }))).toBe("success");
    expect(breakerReport(a({ outcome: "upstream_status", status: 500 }))).toBe("failure");
    expect(breakerReport(a({ outcome: "upstream_status", status: 429 }))).toBe("failure");
    expect(breakerReport(a({ outcome: "network_error" }))).toBe("failure");
    expect(breakerReport(a({ outcome: "stream_cut" }))).toBe("failure");
    expect(breakerReport(a({ outcome: "timeout", errorCode: "upstream_timeout" }))).toBe("failure");
  });
  it("never counts the client's or the gateway's own doing", () => {
    expect(breakerReport(a({ outcome: "upstream_status", status: 400 }))).toBe("neutral");
    expect(breakerReport(a({ outcome: "client_cancelled" }))).toBe("neutral");
    expect(breakerReport(a({ outcome: "timeout", errorCode: "deadline_exceeded" }))).toBe("neutral");
    expect(breakerReport(a({ outcome: "connect_failed", errorCode: "internal_error" }))).toBe("neutral");
  });
});
