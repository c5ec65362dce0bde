import { z } from "zod";
import { a2aPolicySchema, policySchema } from "../mcp/tool-policy.ts";
import { a2aRoutesSchema } from "./a2a-schema.ts";
import { REQUEST_FEATURES } from "../protocol/features.ts";
import { endUserBudgetSchema, entrypointBudgetSchema, priceSchema, scopeLimitsSchema, tenantLedgerSchema } from "./budget-schema.ts";
import { a2aPricesSchema, toolPricesSchema } from "./tool-price-schema.ts";
import { decisionSchema, tiersSchema } from "./decision-schema.ts";
import { pluginSchema } from "./plugin-schema.ts";
import { regexSource, signalSchema } from "../signals/signal-schema.ts";
import { requireAttributionSchema, taskLimitsSchema, tenantGovernanceSchema } from "./task-schema.ts";

const id = z
  .string()
  .regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, "ids are 1-64 lower-case letters, digits, '.', '_' or '-'");
/** Public model names may carry upper case and '/', as vendors' names do. */
export const publicName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/, "invalid public model name");
const sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, "must be a lower-case hex SHA-256 digest of the key");

/** A capability a logical model revision needs from every backend that may serve it. */
export const capabilitySchema = z.enum(["chat", "streaming", "tools", "images", "stream-usage", "json-schema", "embeddings", "moderations", "logprobs"]);
export type Capability = z.infer<typeof capabilitySchema>;

/**
 * Conditions on trusted inputs only; all given conditions must hold. The caller's own words count
 * (it is their prompt), but never a header the bootstrap config did not mark as trusted.
 */
const whenSchema = z
  .strictObject({
    /** Any of these words (case-insensitive, whole word) in the last user message. */
    keywords: z.array(z.string().min(1)).min(1).optional(),
    /** A regular expression tested against the last user message. */
    regex: z.strictObject({ pattern: regexSource, flags: z.string().regex(/^[imsu]*$/).default("") }).optional(),
    /** Estimated prompt tokens strictly above / at or below a bound. */
    promptTokensAbove: z.number().int().min(0).optional(),
    promptTokensAtMost: z.number().int().min(0).optional(),
    toolsPresent: z.boolean().optional(),
    imagesPresent: z.boolean().optional(),
    /** A trusted header (listed in gateway.yaml security.trustedHeaders) equal to one of the values. */
    header: z.strictObject({ name: z.string().regex(/^[a-z0-9-]+$/), in: z.array(z.string()).min(1) }).optional(),
  })
  .refine((w) => Object.keys(w).length > 0, { message: "a rule needs at least one condition" });

const routeSchema = z.strictObject({
  name: id,
  when: whenSchema,
  models: tiersSchema,
});

const entrypointSchema = z.strictObject({
  /** The model name clients send. */
  name: publicName,
  description: z.string().optional(),
  /**
   * What it serves: `chat` (the generation APIs), `embeddings` (`POST /v1/embeddings`) or
   * `moderations` (`POST /v1/moderations`); its models' active revisions require the capability
   * of the same name.
   */
  operation: z.enum(["chat", "embeddings", "moderations"]).default("chat"),
  /**
   * Decisions over the publication's signals: the highest priority that holds chooses the tiers
   * and adds its plugins (docs/routing.md).
   */
  decisions: z.array(decisionSchema).default([]),
  /**
   * The earlier form of decisions: first match wins, on local conditions only. Still served (each
   * route is a decision of priority 0 in its order); an entrypoint has routes or decisions, not both.
   */
  routes: z.array(routeSchema).default([]),
  /** Tiers used when no decision holds. */
  default: tiersSchema,
  /** Named plugins (publication.yaml `plugins:`) that run for every request of this entrypoint, before its decision's. */
  plugins: z.array(id).default([]),
  retry: z.strictObject({ maxAttempts: z.number().int().min(1).max(10).default(1) }).prefault({}),
  /** Trusted header whose value keys the affinity selector (sticky sessions). */
  affinityHeader: z.string().regex(/^[a-z0-9-]+$/).optional(),
  /** Budget policy: strict or soft when the ledger is unreachable, and the injected output cap. */
  budget: entrypointBudgetSchema,
  /** Attribution every request to this entrypoint must carry (docs/governance.md). */
  requireAttribution: requireAttributionSchema.optional(),
  /**
   * Logging of content (prompts and completions): off unless given. A sampled request gets one
   * more access-log line with its prompt and completion, each truncated to `maxChars`, with every
   * match of `redact` (and of the built-in secret patterns) replaced. Never in spans or metrics.
   */
  contentLog: z
    .strictObject({
      sampleRatio: z.number().min(0).max(1),
      maxChars: z.number().int().min(16).max(65_536).default(2000),
      redact: z
        .array(
          z.string().min(1).refine(
            (src) => {
              try {
                new RegExp(src, "g");
                return true;
              } catch {
                return false;
              }
            },
            { message: "a JavaScript regular expression" },
          ),
        )
        .default([]),
    })
    .optional(),
});

const revisionSchema = z.strictObject({
  revision: z.number().int().min(1),
  /** The BackendSnapshot pool that serves this revision. */
  pool: id,
  /** Capabilities every backend of the pool must declare. */
  requires: z.array(capabilitySchema).default(["chat"]),
  /** Context window in tokens, for estimation and later budget checks. */
  contextWindow: z.number().int().min(1).optional(),
  /**
   * Request features this revision may silently drop when its backend's protocol cannot carry
   * them (e.g. `top_k` for an OpenAI backend). Without an entry such a request gets a 400.
   */
  downgrades: z.array(z.enum(REQUEST_FEATURES)).default([]),
  /** Price per million tokens; needed when a money budget or balance may be charged for it. */
  price: priceSchema.optional(),
});

const logicalModelSchema = z.strictObject({
  id,
  description: z.string().optional(),
  activeRevision: z.number().int().min(1),
  revisions: z.array(revisionSchema).min(1),
});

/** `team` or `team/project`: the same ids as the tenant's `teams[].id` and `teams[].projects[].id`. */
const CHARGE_TO = /^[a-z0-9][a-z0-9._-]{0,63}(\/[a-z0-9][a-z0-9._-]{0,63})?$/;

/**
 * Where a caller's spend is charged inside its tenant: a team (`team`) or a project of it
 * (`team/project`). One grammar for a key's `chargeTo`, an OAuth issuer's fixed `chargeTo` and the
 * value of its `claims.chargeTo` claim.
 */
export const chargeToSchema = z.string().regex(CHARGE_TO, "a team id or team/project");

/** Whether a value (such as a token claim) is a well-formed `team` or `team/project`. */
export function isChargeTo(value: unknown): value is string {
  return typeof value === "string" && CHARGE_TO.test(value);
}

/** The team and, when it names one, the project of a well-formed `chargeTo`. */
export function splitChargeTo(chargeTo: string): { readonly team: string; readonly project: string | undefined } {
  const slash = chargeTo.indexOf("/");
  return slash < 0 ? { team: chargeTo, project: undefined } : { team: chargeTo.slice(0, slash), project: chargeTo.slice(slash + 1) };
}

/** An instant in a key's lifecycle: an ISO 8601 date-time with its offset (`2026-12-31T00:00:00Z`). */
const instant = z.iso.datetime({ offset: true });

/** A key value a rotation replaced: still accepted, for the same key, until `until`. */
const previousKeySchema = z.strictObject({
  sha256: sha256Hex,
  until: instant,
});

const apiKeySchema = z.strictObject({
  id,
  /** SHA-256 (hex) of the key; the key itself never appears in config. */
  sha256: sha256Hex,
  /** When the key was created (`sluice keys create` sets it); informational. */
  createdAt: instant.optional(),
  /** The key is refused from this instant on, as if it were not listed. */
  expiresAt: instant.optional(),
  /**
   * When the key was revoked: it is refused for good and its entry stays so its id is never reused
   * (sessions and approvals name keys by id). `disabled` is the reversible switch.
   */
  revokedAt: instant.optional(),
  /** Values rotations replaced, each still accepted until its `until` (rotations may overlap). */
  previous: z.array(previousKeySchema).default([]),
  /** Entrypoint names this key may call; "*" allows all of its tenant's. */
  entrypoints: z.array(z.union([publicName, z.literal("*")])).min(1),
  disabled: z.boolean().default(false),
  /** The team (`team`) or project (`team/project`) this key is charged to, inside its tenant. */
  chargeTo: chargeToSchema.optional(),
  limits: scopeLimitsSchema.optional(),
  /** Whether this key's responses carry its remaining budget (`x-sluice-budget-remaining`). */
  exposeBudget: z.boolean().default(false),
  /** Attribution every request with this key must carry, model and MCP alike (docs/governance.md). */
  requireAttribution: requireAttributionSchema.optional(),
});

const projectSchema = z.strictObject({
  id,
  name: z.string().optional(),
  limits: scopeLimitsSchema.optional(),
  /** The cap of each task charged to this project (docs/governance.md). */
  taskLimits: taskLimitsSchema.optional(),
});
const teamSchema = z.strictObject({
  id,
  name: z.string().optional(),
  limits: scopeLimitsSchema.optional(),
  projects: z.array(projectSchema).default([]),
});

/**
 * A tenant is a financial root: its scopes (tenant → team → project → key → end user) live in its
 * own ledger. The ledger is used for every request of a tenant that declares a limit anywhere or
 * a `ledger` block.
 */
const tenantSchema = z.strictObject({
  id,
  name: z.string().optional(),
  limits: scopeLimitsSchema.optional(),
  teams: z.array(teamSchema).default([]),
  apiKeys: z.array(apiKeySchema).default([]),
  endUsers: endUserBudgetSchema.optional(),
  ledger: tenantLedgerSchema.optional(),
  /** Task sharing and the default task cap (docs/governance.md). */
  governance: tenantGovernanceSchema.optional(),
});

/** Semantic config (`config/publication.yaml`): owned by the platform team that publishes models. */
export const publicationSchema = z.strictObject({
  version: z.literal(1),
  /** Publication revision label, pinned by every request and shown on the admin status. */
  revision: z.string().min(1).max(64),
  tenants: z.array(tenantSchema).min(1),
  entrypoints: z.array(entrypointSchema).min(1),
  models: z.array(logicalModelSchema).min(1),
  /** Named facts about requests that decisions test (docs/routing.md). */
  signals: z.array(signalSchema).default([]),
  /**
   * How long model-backed signals (similarity, moderation) may take, counted from when a decision
   * first needs them; a signal not back by then is unknown. The request's own deadline bounds it too.
   */
  signalDeadlineMs: z.number().int().min(10).max(60_000).default(500),
  /** Named plugins that entrypoints, decisions and MCP tool calls refer to (docs/routing.md). */
  plugins: z.array(pluginSchema).default([]),
  /** Who may use which MCP tools (docs/mcp.md); without it every MCP call is denied. */
  mcp: z
    .strictObject({
      policy: policySchema,
      /** Prices and call-rate limits of tools, first matching rule wins (docs/mcp.md). */
      prices: toolPricesSchema.default([]),
      /** Named plugins (`pii`, `jailbreak`, `block`) run on every `tools/call`'s arguments before the server sees them. */
      plugins: z.array(id).default([]),
    })
    .optional(),
  /** Who may use which A2A agents and skills, at what price, and the virtual agent's routes (docs/a2a.md); without it every A2A call is denied. */
  a2a: z
    .strictObject({
      policy: a2aPolicySchema,
      /** Prices and call-rate limits of agents' skills, first matching rule wins (docs/a2a.md). */
      prices: a2aPricesSchema.default([]),
      /** Capability routes of the virtual agent `/a2a`, tried in order (docs/a2a.md). */
      routes: a2aRoutesSchema.default([]),
    })
    .optional(),
});

export type PublicationConfig = z.infer<typeof publicationSchema>;
export type EntrypointConfig = z.infer<typeof entrypointSchema>;
export type RouteCondition = z.infer<typeof whenSchema>;
