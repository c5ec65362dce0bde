import { describe, expect, it } from "vitest";
import { priceSchema } from "../../../src/config/budget-schema.ts";
import { actualCost, priceOf, worstCase } from "../../../src/publication/prices.ts";
import { inputTokenBound, outputCap } from "../../../src/reserve/token-bounds.ts";
import type { NeutralRequest } from "../../../src/protocol/neutral.ts";

const large = priceOf(priceSchema.parse({ version: "v1", currency: "USD", inputPerMTok: 3, outputPerMTok: 15, cachedInputPerMTok: 0.3, cacheWritePerMTok: 3.75 }));
const small = priceOf(priceSchema.parse({ version: "v2", currency: "USD", inputPerMTok: 0.15, outputPerMTok: 0.6 }));

describe("prices", () => {
  it("turns decimal prices into exact micro-units and defaults the optional rates", () => {
    expect(large).toEqual({ version: "v1", currency: "USD", input: 3_000_000, output: 15_000_000, cachedInput: 300_000, cacheWrite: 3_750_000, reasoning: 15_000_000 });
    expect(small).toMatchObject({ input: 150_000, output: 600_000, cachedInput: 150_000, cacheWrite: 150_000, reasoning: 600_000 });
    expect(priceSchema.safeParse({ version: "v", currency: "USD", inputPerMTok: 0.1234567, outputPerMTok: 1 }).success).toBe(false);
    expect(priceSchema.safeParse({ version: "v", currency: "usd", inputPerMTok: 1, outputPerMTok: 1 }).success).toBe(false);
  });

  it("prices the worst case at the dearest input and output rates, rounded up", () => {
    // 1000 input at the cache-write rate 3.75/MTok = 3750 micros; 4096 output at 15/MTok = 61440.
    expect(worstCase(large, 1000, 4096)).toEqual({ micros: 3750 + 61_440, tokens: 5096 });
    // 7 tokens at 0.15/MTok = 1.05 micros → 2; 0 output.
    expect(worstCase(small, 7, 0)).toEqual({ micros: 2, tokens: 7 });
    expect(worstCase(undefined, 10, 20)).toEqual({ micros: 0, tokens: 30 });
  });

  it("prices actual usage by its parts: cached reads, cache writes and reasoning apart", () => {
    const cost = actualCost(large, { inputTokens: 1000, cachedInputTokens: 600, cacheWriteInputTokens: 100, outputTokens: 500, reasoningTokens: 200, source: "provider" });
    // 300×3 + 600×0.3 + 100×3.75 + 300×15 + 200×15 (reasoning at output) = 900+180+375+4500+3000 micros
    expect(cost).toEqual({ micros: 8955, tokens: 1500 });
    expect(actualCost(small, { inputTokens: 1, outputTokens: 1, source: "provider" })).toEqual({ micros: 1, tokens: 2 });
  });

  it("never prices a subset above its total or a negative count", () => {
    const cost = actualCost(large, { inputTokens: 100, cachedInputTokens: 500, cacheWriteInputTokens: 50, outputTokens: 10, reasoningTokens: 99, source: "provider" });
    expect(cost).toEqual({ micros: Math.ceil((100 * 300_000 + 10 * 15_000_000) / 1_000_000), tokens: 110 });
  });

  it("is exact for token counts whose product passes 2^53", () => {
    const big = actualCost(large, { inputTokens: 2 ** 40, outputTokens: 0, source: "provider" });
    expect(big.micros).toBe(Number((2n ** 40n * 3_000_000n + 999_999n) / 1_000_000n));
  });

  it("agrees with exact BigInt arithmetic on random counts and prices, both sides of 2^53", () => {
    // Seeded, so a failure repeats.
    let seed = 0x5eed;
    const rand = (max: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return Math.floor((seed / 2 ** 31) * max);
    };
    for (let i = 0; i < 5_000; i++) {
      const scale = [1_000, 1_000_000, 2 ** 31, 2 ** 40][i % 4]!;
      const price = priceOf(priceSchema.parse({ version: "r", currency: "USD", inputPerMTok: rand(100_000) / 1000, outputPerMTok: rand(100_000) / 1000, cachedInputPerMTok: rand(10_000) / 1000 }));
      const usage = { inputTokens: rand(scale), outputTokens: rand(scale), cachedInputTokens: 0, source: "provider" as const };
      const exact = (parts: [number, number][]) => {
        const sum = parts.reduce((n, [t, p]) => n + BigInt(t) * BigInt(p), 0n);
        const m = (sum + 999_999n) / 1_000_000n;
        return m > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(m);
      };
      expect(worstCase(price, usage.inputTokens, usage.outputTokens).micros).toBe(
        exact([
          [usage.inputTokens, Math.max(price.input, price.cacheWrite, price.cachedInput)],
          [usage.outputTokens, Math.max(price.output, price.reasoning)],
        ]),
      );
    }
  });
});

const req = (over: Partial<NeutralRequest>): NeutralRequest => ({ model: "m", messages: [{ role: "user", content: [{ type: "text", text: "hello" }] }], stream: false, ...over }) as NeutralRequest;

describe("token bounds", () => {
  it("bounds input tokens by UTF-8 bytes plus allowances", () => {
    expect(inputTokenBound(req({}))).toBe(8 + 5);
    // "é" is 2 bytes, "€" 3, an emoji 4.
    expect(inputTokenBound(req({ messages: [{ role: "user", content: [{ type: "text", text: "é€😀" }] }] }))).toBe(8 + 9);
    const withImage = req({ messages: [{ role: "user", content: [{ type: "text", text: "ab" }, { type: "image", url: "data:image/png;base64,AAAA" }] }] });
    expect(inputTokenBound(withImage)).toBe(8 + 2 + 2000);
    const withTools = req({ tools: [{ name: "f", parameters: { type: "object" } }] });
    expect(inputTokenBound(withTools)).toBe(8 + 5 + 1000 + 1 + JSON.stringify({ type: "object" }).length + 8);
  });

  it("uses the request's own cap, or injects the policy's", () => {
    expect(outputCap(req({ maxOutputTokens: 100 }), 4096)).toEqual({ cap: 100, injected: false });
    expect(outputCap(req({}), 4096)).toEqual({ cap: 4096, injected: true });
    expect(outputCap(req({ reasoningEffort: "high" }), 1000)).toEqual({ cap: 1000, injected: true });
  });
});
