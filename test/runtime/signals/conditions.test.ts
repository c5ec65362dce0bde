import { describe, expect, it } from "vitest";
import type { SignalShape } from "../../../src/signals/compile-signals.ts";
import { compileCondition, evaluate, type ConditionConfig, type SignalReader } from "../../../src/signals/conditions.ts";
import type { SignalDatum, SignalValue } from "../../../src/signals/signal-set.ts";

const shapes = new Map<string, SignalShape>([
  ["flag", { type: "boolean" }],
  ["tokens", { type: "number" }],
  ["lang", { type: "string" }],
  ["modality", { type: "list" }],
  ["pii", { primary: "total", keys: { total: "number", email: "number" } }],
  ["topic", { primary: "category", keys: { category: "string", score: "number" } }],
  ["mod", { primary: "flagged", keys: { flagged: "boolean" }, anyKey: "number" }],
]);

const known = (value: SignalDatum): SignalValue => ({ state: "known", value });

function truth(when: ConditionConfig, values: Record<string, SignalValue | "pending">): ReturnType<typeof evaluate> {
  const { condition, problems } = compileCondition(when, shapes, "when");
  expect(problems).toEqual([]);
  const read: SignalReader = (n) => values[n] ?? { state: "unknown", reason: "not_applicable" };
  return evaluate(condition, read);
}

describe("conditions: each operator on the value it tests", () => {
  it("without an operator asks whether the value is on: true, above zero, non-empty", () => {
    expect(truth({ signal: "flag" }, { flag: known(true) })).toBe(true);
    expect(truth({ signal: "flag" }, { flag: known(false) })).toBe(false);
    expect(truth({ signal: "pii" }, { pii: known({ total: 2, email: 2 }) })).toBe(true);
    expect(truth({ signal: "pii" }, { pii: known({ total: 0, email: 0 }) })).toBe(false);
    expect(truth({ signal: "topic" }, { topic: known({ category: "", score: 0.3 }) })).toBe(false);
    expect(truth({ signal: "modality" }, { modality: known([]) })).toBe(false);
  });

  it("is, in, above, atMost, contains and key", () => {
    expect(truth({ signal: "lang", in: ["de", "fr"] }, { lang: known("fr") })).toBe(true);
    expect(truth({ signal: "lang", is: "de" }, { lang: known("fr") })).toBe(false);
    expect(truth({ signal: "tokens", above: 100 }, { tokens: known(100) })).toBe(false);
    expect(truth({ signal: "tokens", atMost: 100 }, { tokens: known(100) })).toBe(true);
    expect(truth({ signal: "modality", contains: "images" }, { modality: known(["tools", "images"]) })).toBe(true);
    expect(truth({ signal: "topic", key: "score", above: 0.8 }, { topic: known({ category: "code", score: 0.81 }) })).toBe(true);
    expect(truth({ signal: "mod", key: "violence", above: 0.5 }, { mod: known({ flagged: false, violence: 0.7 }) })).toBe(true);
    // A key the value does not carry this time (a category the classifier did not score) does not hold.
    expect(truth({ signal: "mod", key: "hate", above: 0.5 }, { mod: known({ flagged: false }) })).toBe(false);
  });
});

describe("conditions: three values", () => {
  const failed: SignalValue = { state: "unknown", reason: "failed" };
  it("a signal that does not apply is false; one that failed is unknown", () => {
    expect(truth({ signal: "lang", is: "de" }, {})).toBe(false);
    expect(truth({ not: { signal: "lang", is: "de" } }, {})).toBe(true);
    expect(truth({ signal: "lang", is: "de" }, { lang: failed })).toBe("unknown");
    expect(truth({ not: { signal: "lang", is: "de" } }, { lang: failed })).toBe("unknown");
  });

  it("all and any are settled by a decisive part whatever else is unknown or pending", () => {
    expect(truth({ all: [{ signal: "lang", is: "de" }, { signal: "flag" }] }, { lang: failed, flag: known(false) })).toBe(false);
    expect(truth({ any: [{ signal: "lang", is: "de" }, { signal: "flag" }] }, { lang: failed, flag: known(true) })).toBe(true);
    expect(truth({ all: [{ signal: "topic" }, { signal: "flag" }] }, { topic: "pending", flag: known(false) })).toBe(false);
    expect(truth({ all: [{ signal: "topic" }, { signal: "flag" }] }, { topic: "pending", flag: known(true) })).toBe("pending");
    // Pending outranks unknown: settling the pending part may still decide it.
    expect(truth({ all: [{ signal: "topic" }, { signal: "lang", is: "de" }] }, { topic: "pending", lang: failed })).toBe("pending");
    expect(truth({ any: [{ signal: "flag" }, { signal: "lang", is: "de" }] }, { flag: known(false), lang: failed })).toBe("unknown");
  });
});

describe("conditions: checked against the signals when the publication loads", () => {
  const problems = (when: ConditionConfig) => compileCondition(when, shapes, "d.when").problems;
  it("names an unknown signal, a missing key, a key on a plain value, and an operator the value cannot take", () => {
    expect(problems({ signal: "nope" })).toEqual([{ path: "d.when.signal", message: 'unknown signal "nope" (publication.yaml signals)' }]);
    expect(problems({ signal: "pii", key: "phone", above: 0 })[0]!.message).toMatch(/has no key "phone" \(it has "total", "email"\)/);
    expect(problems({ signal: "lang", key: "x", is: "de" })[0]!.message).toMatch(/plain value: it takes no key/);
    expect(problems({ signal: "lang", above: 3 })[0]!.message).toMatch(/above and atMost test a number; its value is a string/);
    expect(problems({ signal: "tokens", is: "many" })[0]!.message).toMatch(/its value is a number; is "many" is a string/);
    expect(problems({ signal: "modality", is: "images" })[0]!.message).toMatch(/a list is tested with contains/);
    expect(problems({ signal: "lang", contains: "de" })[0]!.message).toMatch(/contains tests a list/);
    expect(problems({ all: [{ signal: "flag" }, { not: { signal: "nope" } }] })[0]!.path).toBe("d.when.all[1].not.signal");
  });
});
