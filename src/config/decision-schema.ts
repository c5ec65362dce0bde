import { z } from "zod";
import { algorithmSchema } from "./algorithm-schema.ts";
import type { ConditionConfig } from "../signals/conditions.ts";

const id = z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, "ids are 1-64 lower-case letters, digits, '.', '_' or '-'");

/**
 * A test of one signal. Without an operator it asks whether the value is "on": true, a number
 * above zero, a non-empty string or list (a PII signal's `total`, a jailbreak signal's `matched`,
 * a similarity signal's `category`). A record-valued signal is read at `key` (its primary key when
 * absent). At most one operator:
 * - `is`: equal to a boolean, number or string;
 * - `in`: one of several strings or numbers;
 * - `above` / `atMost`: a number strictly above / at or below;
 * - `contains`: a list (modalities, fired rules) that holds this string.
 */
const leafSchema = z
  .strictObject({
    signal: id,
    key: z.string().min(1).max(128).optional(),
    is: z.union([z.boolean(), z.number(), z.string()]).optional(),
    in: z.array(z.union([z.string(), z.number()])).min(1).optional(),
    above: z.number().optional(),
    atMost: z.number().optional(),
    contains: z.string().optional(),
  })
  .refine((l) => ["is", "in", "above", "atMost", "contains"].filter((k) => k in l && (l as Record<string, unknown>)[k] !== undefined).length <= 1, {
    message: "a condition on a signal takes at most one of is, in, above, atMost, contains",
  });

/** A condition: a signal test, or `all` / `any` of conditions, or `not` one. */
export const conditionSchema: z.ZodType<ConditionConfig> = z.lazy(() =>
  z.union([
    z.strictObject({ all: z.array(conditionSchema).min(1) }),
    z.strictObject({ any: z.array(conditionSchema).min(1) }),
    z.strictObject({ not: conditionSchema }),
    leafSchema,
  ]),
);

/** Logical models in priority tiers: tier 0 first; fallback walks the tiers in order. */
export const tiersSchema = z.array(z.array(id).min(1)).min(1);

/**
 * A decision of an entrypoint: when its condition holds, its tiers serve the request and its
 * plugins run. The highest `priority` that holds wins; equal priorities go by order.
 */
export const decisionSchema = z.strictObject({
  name: id,
  description: z.string().optional(),
  priority: z.number().int().min(-1_000_000).max(1_000_000).default(0),
  when: conditionSchema,
  /** The tiers that serve the request; absent: the entrypoint's default tiers. */
  models: tiersSchema.optional(),
  /** Named plugins (publication.yaml `plugins:`) that run after the entrypoint's own, in order. */
  plugins: z.array(id).default([]),
  /**
   * A Looper algorithm over the decision's `models:` (required with it): the engine answers the
   * request from several bounded sub-calls instead of one (docs/looper.md).
   */
  algorithm: algorithmSchema.optional(),
  /**
   * When a signal the condition needs is unknown (it failed, or was late): `skip` treats the
   * decision as not holding (fail open) and goes on to the next; `refuse` answers the request
   * with `signal_unavailable` (fail closed), for a decision that must not be passed by.
   */
  onUnknown: z.enum(["skip", "refuse"]).default("skip"),
});

export type DecisionConfig = z.infer<typeof decisionSchema>;
