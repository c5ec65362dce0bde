import { describe, expect, it } from "vitest";
import { lexicalSignature, lexicallyAgree } from "../../../src/cache/lexical-gate.ts";

const agree = (a: string, b: string) => lexicallyAgree(lexicalSignature(a), lexicalSignature(b));

describe("lexical second gate", () => {
  it("lets through prompts that differ only in fillers, case, punctuation, plurals and contractions", () => {
    expect(agree("How do I reset my password?", "how can I reset my password")).toBe(true);
    expect(agree("What is the capital of France?", "What's the capital of France")).toBe(true);
    expect(agree("Please list the prime numbers below 20.", "list the prime number below 20")).toBe(true);
    expect(agree("Why doesn't my build work?", "Why does not my build work")).toBe(true);
    expect(agree("Convert 1,000 meters to feet", "convert 1000 meters to feet")).toBe(true);
  });

  it("refuses a changed name, number, negation, direction or order", () => {
    expect(agree("transfer $100 to Alice", "transfer $100 to Bob")).toBe(false);
    expect(agree("transfer $100 to Alice", "transfer $200 to Alice")).toBe(false);
    expect(agree("transfer $100 to Alice", "transfer $100 from Alice")).toBe(false);
    expect(agree("Is ibuprofen safe during pregnancy?", "Is ibuprofen not safe during pregnancy?")).toBe(false);
    expect(agree("Can I take aspirin with alcohol?", "Can't I take aspirin with alcohol?")).toBe(false);
    expect(agree("coffee with sugar", "coffee without sugar")).toBe(false);
    expect(agree("Is Paris bigger than London?", "Is London bigger than Paris?")).toBe(false);
    expect(agree("convert 5 km to miles", "convert 5 miles to km")).toBe(false);
    expect(agree("When did Rome fall?", "Where did Rome fall?")).toBe(false);
    expect(agree("Can you help me?", "Can I help you?")).toBe(false);
    expect(agree("version 1.5 release notes", "version 15 release notes")).toBe(false);
  });

  it("counts each negation: a double negative is another question", () => {
    expect(agree("is it not true that it is not raining", "is it true that it is not raining")).toBe(false);
    expect(lexicalSignature("no, never").terms).toEqual(["¬", "¬"]);
  });
});
