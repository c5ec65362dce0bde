import { describe, expect, it } from "vitest";
import { formatTraceparent, newSpanId, newTraceId, parseTraceparent, requestTrace } from "../../../src/context/trace-context.ts";

const TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

describe("W3C trace context", () => {
  it("parses version 00 and later versions, refuses malformed and all-zero ids", () => {
    expect(parseTraceparent(TP, "vendor=x")).toEqual({ traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", sampled: true, state: "vendor=x" });
    expect(parseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra")?.sampled).toBe(false);
    for (const bad of [
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
      `${TP}-extra`,
      "garbage",
      "",
    ]) {
      expect(parseTraceparent(bad), bad).toBeUndefined();
    }
  });

  it("formats what it parses", () => {
    const p = parseTraceparent(TP)!;
    expect(formatTraceparent(p.traceId, p.spanId, p.sampled)).toBe(TP);
    expect(newTraceId()).toMatch(/^[0-9a-f]{32}$/);
    expect(newSpanId()).toMatch(/^[0-9a-f]{16}$/);
  });

  it("continues a trusted client trace, links an untrusted one, and a sub-call continues its parent's", () => {
    const client = parseTraceparent(TP)!;
    const trusted = requestTrace(client, true, undefined, () => false);
    expect(trusted).toMatchObject({ traceId: client.traceId, parentSpanId: client.spanId, sampled: true, linked: undefined });
    const untrusted = requestTrace(client, false, undefined, () => false);
    expect(untrusted.traceId).not.toBe(client.traceId);
    expect(untrusted).toMatchObject({ parentSpanId: undefined, sampled: false, linked: client });
    const sub = requestTrace(undefined, false, trusted, () => false);
    expect(sub).toMatchObject({ traceId: trusted.traceId, parentSpanId: trusted.spanId, sampled: true });
    expect(sub.spanId).not.toBe(trusted.spanId);
  });
});
