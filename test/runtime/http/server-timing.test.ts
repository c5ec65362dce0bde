import { describe, expect, it } from "vitest";
import { gatewayTiming, serverTiming } from "../../../src/http/server-timing.ts";

describe("Server-Timing", () => {
  it("spells gw, then upstream and ttfb only when known, in milliseconds with at most two decimals", () => {
    expect(serverTiming({ totalMs: 812.7, upstreamMs: 812.3, gatewayMs: 0.4, firstByteMs: 100.126 })).toBe("gw;dur=0.4, upstream;dur=812.3, ttfb;dur=100.13");
    expect(serverTiming({ totalMs: 3, upstreamMs: undefined, gatewayMs: 3, firstByteMs: undefined })).toBe("gw;dur=3");
    expect(serverTiming({ totalMs: 5, upstreamMs: 5, gatewayMs: 0, firstByteMs: undefined })).toBe("gw;dur=0, upstream;dur=5");
  });

  it("gives a refusal at the door the gateway's time alone, never negative", () => {
    expect(gatewayTiming(1_000, 1_004)).toBe("gw;dur=4");
    expect(gatewayTiming(1_000, 999)).toBe("gw;dur=0");
  });
});
