import { z } from "zod";
import { moneySchema } from "./budget-schema.ts";

/**
 * Publication settings for attributed work (docs/governance.md): per-task caps, who may share a
 * task id, and which attribution ids a key or an entrypoint must send.
 */

const currency = z.string().regex(/^[A-Z]{3}$/, "must be an ISO 4217 code such as USD");

/**
 * The cap of one task, over its whole life (a task has no period): money in currency units and/or
 * input + output tokens. Every given limit applies.
 */
export const taskLimitsSchema = z
  .strictObject({
    money: z.strictObject({ limit: moneySchema, currency }).optional(),
    tokens: z.strictObject({ limit: z.number().int().min(1).max(2 ** 50) }).optional(),
  })
  .refine((l) => l.money !== undefined || l.tokens !== undefined, { message: "name money, tokens or both" });
export type TaskLimitsConfig = z.infer<typeof taskLimitsSchema>;

/** A tenant's attribution policy. */
export const tenantGovernanceSchema = z.strictObject({
  /**
   * Who may use a task id once it is bound: `project` (default) only keys charged to the project
   * that first used it; `tenant` any key of the tenant. Another tenant never may.
   */
  taskSharing: z.enum(["project", "tenant"]).default("project"),
  /** The cap of each task of a project that sets no `taskLimits` (and of keys charged to no project). */
  taskDefault: taskLimitsSchema.optional(),
});

/** Attribution a request must carry: `task` (a task id), `endUser` (the tenant's `endUsers.header`). */
export const requireAttributionSchema = z.array(z.enum(["task", "endUser"])).min(1);
export type RequiredAttribution = z.infer<typeof requireAttributionSchema>[number];
