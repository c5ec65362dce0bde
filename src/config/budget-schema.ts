import { z } from "zod";
// The ledger's own bounds: a config past them would be refused on every reservation.
import { LEDGER_DAY_MS, MAX_HISTORY_MS, MAX_LEASE_MS, MAX_REQUEST_RATE, MAX_RETENTION_MS, MIN_RETENTION_MS } from "../ledger/ledger.ts";

/**
 * Budget parts of the publication: limits per financial scope, prices per model revision and the
 * budget policy of each entrypoint. Money is written in currency units (`12.5` = 12.50 USD) and
 * turned into integer micro-units here, so nothing after parsing does float arithmetic on money.
 */

const MICROS = 1_000_000;
/** Largest amount of money or tokens a limit may name: the ledger's 2^50 bound. */
const MAX_AMOUNT = 2 ** 50;

const currency = z.string().regex(/^[A-Z]{3}$/, "must be an ISO 4217 code such as USD");

/** Decimal places of a number as written (`1.25` → 2, `1e-7` → 7). */
function decimals(v: number): number {
  const [mantissa = "", exponent = "0"] = String(v).toLowerCase().split("e");
  return Math.max(0, (mantissa.split(".")[1] ?? "").length - Number(exponent));
}

/** A decimal amount of currency units with at most 6 decimal places, as integer micro-units. */
export const moneySchema = z
  .number()
  .nonnegative()
  .transform((v, ctx) => {
    const micros = Math.round(v * MICROS);
    if (decimals(v) > 6 || micros > MAX_AMOUNT) {
      ctx.addIssue({ code: "custom", message: "must have at most 6 decimal places and fit the ledger" });
      return z.NEVER;
    }
    return micros;
  });
const money = moneySchema;

const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `90s`, `15m`, `1h`, `30d` as milliseconds. Periods are aligned to the Unix epoch (UTC). */
export const durationSchema = z
  .string()
  .regex(/^[1-9][0-9]{0,5}[smhd]$/, "a duration such as 60s, 15m, 1h or 30d")
  .transform((s) => Number(s.slice(0, -1)) * UNIT_MS[s.at(-1) as keyof typeof UNIT_MS]);

const positiveInt = z.number().int().min(1).max(MAX_AMOUNT);

/** What one financial scope may limit; every given limit applies. */
export const scopeLimitsSchema = z
  .strictObject({
    /** A strict money budget per period. */
    money: z.strictObject({ limit: money, currency, period: durationSchema }).optional(),
    /** Input + output tokens per window. */
    tokens: z.strictObject({ limit: positiveInt, window: durationSchema }).optional(),
    /** Requests (not retries) per minute, as a token bucket of `burst` capacity. */
    requests: z.strictObject({ perMinute: z.number().int().min(1).max(MAX_REQUEST_RATE), burst: z.number().int().min(1).max(MAX_REQUEST_RATE) }).optional(),
    /** A prepaid balance in this currency, credited by top-ups through the admin API. */
    balance: z.strictObject({ currency }).optional(),
  })
  .refine((l) => Object.keys(l).length > 0, { message: "name at least one limit (money, tokens, requests or balance)" });
export type ScopeLimitsConfig = z.infer<typeof scopeLimitsSchema>;

/**
 * The price of a logical model revision, per million tokens. `version` is recorded with every
 * settlement, so a bill can always be explained by the price it was computed with.
 */
export const priceSchema = z.strictObject({
  version: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/, "1-64 letters, digits, '.', '_', ':' or '-'"),
  currency,
  inputPerMTok: money,
  outputPerMTok: money,
  /** Input read from the provider's prompt cache; the input price when omitted. */
  cachedInputPerMTok: money.optional(),
  /** Input written to the provider's prompt cache; the input price when omitted. */
  cacheWritePerMTok: money.optional(),
  /** Reasoning output, when the provider prices it apart; the output price when omitted. */
  reasoningPerMTok: money.optional(),
});
export type PriceConfig = z.infer<typeof priceSchema>;

/** How an entrypoint treats budgets. */
export const entrypointBudgetSchema = z
  .strictObject({
    /**
     * `strict`: without the ledger nothing is sent (503 `budget_unavailable`). `soft`: the request
     * proceeds unchecked when the ledger cannot be reached, and the response says so.
     */
    mode: z.enum(["strict", "soft"]).default("strict"),
    /** Output cap injected when a request sets none, so its worst case is bounded and priced. */
    defaultMaxOutputTokens: z.number().int().min(1).max(1_000_000).default(4096),
  })
  .prefault({});

/** Per-end-user limits, keyed by a trusted header's value (e.g. the caller's own user id). */
export const endUserBudgetSchema = z.strictObject({
  /** A header listed in gateway.yaml security.trustedHeaders. */
  header: z.string().regex(/^[a-z0-9-]+$/),
  /** Applied to each end user separately. */
  limits: scopeLimitsSchema,
});

/** A tenant's ledger settings. */
export const tenantLedgerSchema = z
  .strictObject({
    /**
     * Ledger objects the tenant's books are split over (1 = one object). Each holds an exact share
     * of every limit, so the cap stays strict; see docs/budgets.md for the cost.
     */
    stripes: z.number().int().min(1).max(64).default(1),
    /** Reservations not settled within this time move to reconciliation. */
    lease: durationSchema.prefault("10m").refine((ms) => ms <= MAX_LEASE_MS, "at most 24h"),
    /**
     * How long finished attempts (per-attempt records), counters of ended periods and refusal
     * tallies are kept; older settled attempts live on in daily usage totals. At least 7d (seven
     * times the longest lease, so no settlement can outlive its attempt), at most 3650d.
     */
    retention: durationSchema.prefault("30d").refine((ms) => ms >= MIN_RETENTION_MS && ms <= MAX_RETENTION_MS, "from 7d to 3650d"),
    /**
     * How long the daily usage rollups (settled spend per scope, day and model) are kept: whole
     * days, at least the retention (the days whose attempts are kept always have their totals).
     * Omitted: 90 days, or the retention when that is longer.
     */
    history: durationSchema.refine((ms) => ms % LEDGER_DAY_MS === 0 && ms >= LEDGER_DAY_MS && ms <= MAX_HISTORY_MS, "whole days, from 1d to 3650d").optional(),
  })
  .refine((l) => l.history === undefined || l.history >= l.retention, { message: "history must be at least the retention", path: ["history"] });
