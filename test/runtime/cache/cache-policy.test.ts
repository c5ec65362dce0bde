import { describe, expect, it } from "vitest";
import { cacheDirectives, notStoredReason, type StoreCandidate } from "../../../src/cache/cache-policy.ts";

const ok: StoreCandidate = {
  directives: { lookup: true, store: true },
  temperature: 0,
  maxTemperature: 0.3,
  succeeded: true,
  toolCalls: false,
  refusal: false,
  complete: true,
  usageKnown: true,
  bytes: 100,
  maxBytes: 1000,
};

describe("what the cache may store", () => {
  it("reads the client's directives from its headers", () => {
    expect(cacheDirectives(new Headers())).toEqual({ lookup: true, store: true });
    expect(cacheDirectives(new Headers({ "x-sluice-cache": "Bypass" }))).toEqual({ lookup: false, store: false });
    expect(cacheDirectives(new Headers({ "cache-control": "max-age=0, no-store" }))).toEqual({ lookup: true, store: false });
    expect(cacheDirectives(new Headers({ "cache-control": "no-cache" }))).toEqual({ lookup: false, store: true });
  });

  it("stores a complete, known-usage, tool-free answer at a low temperature, and nothing else", () => {
    expect(notStoredReason(ok)).toBeUndefined();
    expect(notStoredReason({ ...ok, temperature: undefined })).toBeUndefined();
    expect(notStoredReason({ ...ok, directives: { lookup: true, store: false } })).toBe("directive");
    expect(notStoredReason({ ...ok, temperature: 0.7 })).toBe("temperature");
    expect(notStoredReason({ ...ok, succeeded: false })).toBe("error");
    expect(notStoredReason({ ...ok, toolCalls: true })).toBe("tool_calls");
    expect(notStoredReason({ ...ok, refusal: true })).toBe("refusal");
    expect(notStoredReason({ ...ok, complete: false })).toBe("incomplete");
    expect(notStoredReason({ ...ok, usageKnown: false })).toBe("unknown_usage");
    expect(notStoredReason({ ...ok, bytes: 1001 })).toBe("too_large");
  });
});
