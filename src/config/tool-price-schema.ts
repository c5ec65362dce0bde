import { z } from "zod";
import { MAX_REQUEST_RATE } from "../ledger/ledger.ts";
import { SERVER_NAME } from "../mcp/tool-names.ts";
import { AGENT_NAME } from "./a2a-schema.ts";
import { moneySchema } from "./budget-schema.ts";

/**
 * Prices and call-rate limits of MCP tools (`mcp.prices` in publication.yaml). A rule names
 * servers and tool names with `*` wildcards; the first rule that matches a `tools/call` decides
 * its price and its rate limit. A priced call is reserved in the caller's ledger before it is
 * sent and settled after, like a model attempt (docs/mcp.md, "Prices, limits and retries").
 */

const NAME_GLOB = /^[A-Za-z0-9_.*-]{1,128}$/;

/** One tool price: per call, in currency units, with a version recorded on every settlement. */
export const toolPriceSchema = z.strictObject({
  version: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/, "1-64 letters, digits, '.', '_', ':' or '-'"),
  currency: z.string().regex(/^[A-Z]{3}$/, "must be an ISO 4217 code such as USD"),
  /** What one call costs (`0.002` = 0.2 cents), turned into integer micro-units. */
  perCall: moneySchema,
});

/** What every pricing rule says besides what it targets. */
const priceRuleCore = {
  /** Named in the audit line of every call it prices, and in the name of its rate-limit scope. */
  id: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "lower-case letters, digits, '-' and '_'"),
  price: toolPriceSchema.optional(),
  /**
   * Calls per caller key of the tools (or skills) this rule matches, as a token bucket:
   * `perMinute` refill, `burst` capacity. One limit for all that a wildcard rule matches.
   */
  requests: z.strictObject({ perMinute: z.number().int().min(1).max(MAX_REQUEST_RATE), burst: z.number().int().min(1).max(MAX_REQUEST_RATE) }).optional(),
};
const pricesOrLimits = (r: { price?: unknown; requests?: unknown }) => r.price !== undefined || r.requests !== undefined;
const pricesOrLimitsMessage = { message: "a rule needs a price, a requests limit or both" };
const targetNames = (what: string) => z.array(z.union([z.literal("*"), z.string().regex(SERVER_NAME, what)])).min(1);

/** One pricing rule of `mcp.prices`. */
export const toolPriceRuleSchema = z
  .strictObject({
    ...priceRuleCore,
    /** Configured server names, or `*`. */
    servers: targetNames("a server name"),
    /** Upstream tool names with `*` wildcards. */
    names: z.array(z.string().regex(NAME_GLOB, "a tool name with * wildcards")).min(1),
  })
  .refine(pricesOrLimits, pricesOrLimitsMessage);

/**
 * One pricing rule of `a2a.prices`: the same prices and limits, first matching rule wins, aimed
 * at agents (gateway.yaml `a2a.agents[].name`, or `*`) and skill ids with `*` wildcards.
 */
export const a2aPriceRuleSchema = z
  .strictObject({
    ...priceRuleCore,
    agents: z.array(z.union([z.literal("*"), z.string().regex(AGENT_NAME, "an agent name")])).min(1),
    skills: z.array(z.string().regex(NAME_GLOB, "a skill id with * wildcards")).min(1),
  })
  .refine(pricesOrLimits, pricesOrLimitsMessage);

export const toolPricesSchema = z.array(toolPriceRuleSchema);
export type ToolPriceRuleConfig = z.infer<typeof toolPriceRuleSchema>;
export const a2aPricesSchema = z.array(a2aPriceRuleSchema);
export type A2aPriceRuleConfig = z.infer<typeof a2aPriceRuleSchema>;
