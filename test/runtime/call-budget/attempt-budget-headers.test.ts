import { describe, expect, it } from "vitest";
import { MAX_DEADLINE_AHEAD_MS, parseCallBudget } from "../../../src/call-budget/attempt-budget-client.ts";

const NOW = 1_700_000_000_000;
const valid = { "x-sluice-call-id": "agent-7:call.42_a", "x-sluice-attempt-budget": "7", "x-sluice-deadline": String(NOW + 30_000) };

function parse(h: Record<string, string>, now = NOW) {
  return parseCallBudget(new Headers(h), now);
}
function error(h: Record<string, string>, now = NOW): string {
  const r = parse(h, now);
  expect(r).toHaveProperty("error");
  return (r as { error: string }).error;
}

describe("parseCallBudget", () => {
  it("returns undefined when none of the three headers is sent", () => {
    expect(parse({})).toBeUndefined();
    expect(parse({ "x-other": "1" })).toBeUndefined();
  });

  it("parses a valid set", () => {
    expect(parse(valid)).toEqual({ callId: "agent-7:call.42_a", budget: 7, deadlineAt: NOW + 30_000 });
    expect(parse({ ...valid, "x-sluice-attempt-budget": "0" })).toMatchObject({ budget: 0 });
    expect(parse({ ...valid, "x-sluice-attempt-budget": "1000" })).toMatchObject({ budget: 1000 });
    expect(parse({ ...valid, "x-sluice-call-id": "a".repeat(128) })).toMatchObject({ callId: "a".repeat(128) });
    expect(parse({ ...valid, "x-sluice-deadline": String(NOW + MAX_DEADLINE_AHEAD_MS) })).toMatchObject({ deadlineAt: NOW + MAX_DEADLINE_AHEAD_MS });
    expect(parse({ ...valid, "x-sluice-deadline": String(NOW + 1) })).toMatchObject({ deadlineAt: NOW + 1 });
  });

  it("names each missing header of a partial set", () => {
    for (const name of Object.keys(valid)) {
      const partial: Record<string, string> = { ...valid };
      delete partial[name];
      expect(error(partial)).toContain(`missing header ${name}`);
    }
    expect(error({ "x-sluice-call-id": "c" })).toContain("missing header x-sluice-attempt-budget and x-sluice-deadline");
    expect(error({ "x-sluice-deadline": String(NOW + 1) })).toContain("missing header x-sluice-call-id and x-sluice-attempt-budget");
  });

  it("rejects a bad call id", () => {
    for (const id of ["", "a".repeat(129), "has space", "slash/no", "a*b", "a@b", "a,b", "a;b"]) {
      expect(error({ ...valid, "x-sluice-call-id": id }), id).toMatch(/^x-sluice-call-id /);
    }
  });

  it("rejects a bad attempt budget", () => {
    for (const b of ["", "-1", "+1", "1.0", "1e2", "0x10", "1001", "99999", "seven", "1, 2", "Infinity"]) {
      expect(error({ ...valid, "x-sluice-attempt-budget": b }), b).toMatch(/^x-sluice-attempt-budget must be an integer from 0 to 1000/);
    }
  });

  it("rejects a bad deadline: malformed, not in the future, or more than 24 h ahead", () => {
    for (const d of ["", "soon", "-5", String(NOW + 1000) + ".5", "1e15", "12345678901234567", `${NOW + 1000}, ${NOW + 2000}`]) {
      expect(error({ ...valid, "x-sluice-deadline": d }), d).toMatch(/^x-sluice-deadline must be an absolute time in epoch milliseconds/);
    }
    expect(error({ ...valid, "x-sluice-deadline": String(NOW) })).toBe("x-sluice-deadline is not in the future");
    expect(error({ ...valid, "x-sluice-deadline": String(NOW - 1) })).toBe("x-sluice-deadline is not in the future");
    // Seconds instead of milliseconds read as a time long past.
    expect(error({ ...valid, "x-sluice-deadline": String(Math.floor(NOW / 1000) + 60) })).toBe("x-sluice-deadline is not in the future");
    expect(error({ ...valid, "x-sluice-deadline": String(NOW + MAX_DEADLINE_AHEAD_MS + 1) })).toBe("x-sluice-deadline is more than 24 h ahead");
  });

  it("never echoes the header value in an error", () => {
    expect(error({ ...valid, "x-sluice-call-id": "secret<script>" })).not.toContain("secret");
  });
});
