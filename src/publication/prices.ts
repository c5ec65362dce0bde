import type { PriceConfig } from "../config/budget-schema.ts";
import type { LedgerAmount } from "../ledger/ledger.ts";
import type { Usage } from "../protocol/neutral.ts";

/**
 * A model revision's price in integer micro-units per million tokens (1 USD/MTok = 1_000_000).
 * Costs are computed in BigInt and rounded up to whole micro-units, so they are exact for any
 * token count and never rounded in the caller's favour against the budget.
 */
export interface Price {
  readonly version: string;
  readonly currency: string;
  readonly input: number;
  readonly output: number;
  readonly cachedInput: number;
  readonly cacheWrite: number;
  readonly reasoning: number;
}

/** From the publication's price entry (already in micro-units). */
export function priceOf(cfg: PriceConfig): Price {
  return {
    version: cfg.version,
    currency: cfg.currency,
    input: cfg.inputPerMTok,
    output: cfg.outputPerMTok,
    cachedInput: cfg.cachedInputPerMTok ?? cfg.inputPerMTok,
    cacheWrite: cfg.cacheWritePerMTok ?? cfg.inputPerMTok,
    reasoning: cfg.reasoningPerMTok ?? cfg.outputPerMTok,
  };
}

const MTOK = 1_000_000n;
const ceilDiv = (n: bigint, d: bigint) => (n + d - 1n) / d;

function micros(parts: readonly (readonly [tokens: number, perMTok: number])[]): number {
  // Exact in plain numbers while every product and the sum stay safe integers (every real
  // request); BigInt only past that. BigInt on every attempt showed in the budgeted profile.
  let fast = 0;
  let exact = true;
  for (const [tokens, perMTok] of parts) {
    const product = tokens * perMTok;
    fast += product;
    if (!Number.isSafeInteger(product) || !Number.isSafeInteger(fast)) exact = false;
  }
  if (exact) {
    const rest = fast % 1_000_000;
    return (fast - rest) / 1_000_000 + (rest > 0 ? 1 : 0);
  }
  let sum = 0n;
  for (const [tokens, perMTok] of parts) sum += BigInt(tokens) * BigInt(perMTok);
  const m = ceilDiv(sum, MTOK);
  // The ledger refuses amounts past 2^50; such a cost means a misconfigured price or cap.
  return m > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(m);
}

/**
 * The priced worst case of one attempt: every input token at the dearest input rate (a cache
 * write can cost more than plain input) and the whole output cap at the dearest output rate
 * (reasoning tokens count towards the cap). Unpriced revisions cost 0 but their tokens count.
 */
export function worstCase(price: Price | undefined, inputTokens: number, outputCap: number): LedgerAmount {
  const tokens = inputTokens + outputCap;
  if (!price) return { micros: 0, tokens };
  return { micros: micros([[inputTokens, Math.max(price.input, price.cacheWrite, price.cachedInput)], [outputCap, Math.max(price.output, price.reasoning)]]), tokens };
}

/**
 * What an attempt actually cost from the usage the provider reported. Cached reads and cache
 * writes are subsets of the input and reasoning a subset of the output (see {@link Usage}); a
 * provider reporting a subset larger than its total is clamped, never priced negative.
 */
export function actualCost(price: Price | undefined, usage: Usage): LedgerAmount {
  const input = Math.max(0, usage.inputTokens);
  const output = Math.max(0, usage.outputTokens);
  const tokens = input + output;
  if (!price) return { micros: 0, tokens };
  const cached = Math.min(input, Math.max(0, usage.cachedInputTokens ?? 0));
  const written = Math.min(input - cached, Math.max(0, usage.cacheWriteInputTokens ?? 0));
  const reasoning = Math.min(output, Math.max(0, usage.reasoningTokens ?? 0));
  return {
    micros: micros([
      [input - cached - written, price.input],
      [cached, price.cachedInput],
      [written, price.cacheWrite],
      [output - reasoning, price.output],
      [reasoning, price.reasoning],
    ]),
    tokens,
  };
}

/** The token breakdown recorded with a settlement (what the provider reported). */
export function usageDetail(usage: Usage): Record<string, number> {
  const d: Record<string, number> = { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens };
  if (usage.cachedInputTokens !== undefined) d["cachedInputTokens"] = usage.cachedInputTokens;
  if (usage.cacheWriteInputTokens !== undefined) d["cacheWriteInputTokens"] = usage.cacheWriteInputTokens;
  if (usage.reasoningTokens !== undefined) d["reasoningTokens"] = usage.reasoningTokens;
  return d;
}
