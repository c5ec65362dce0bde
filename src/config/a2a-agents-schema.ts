import { z } from "zod";
import { readAgentCard } from "../protocol/a2a/agent-card.ts";

/** An agent's name in the gateway (`/a2a/<name>`): like an MCP server's, lower-case letters, digits and '-', at most 32. */
export const AGENT_NAME = /^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$/;

/** Default interval between two fetches of an agent's card. */
export const DEFAULT_CARD_REFRESH_MS = 300_000;

/**
 * One agent the gateway fronts (gateway.yaml `a2a.agents[]`). Its card is either fetched from a
 * URL (off the request path, by the agent's AgentCardRegistry object, every `refreshMs`) or given
 * inline (validated when the config loads; never fetched).
 */
export const a2aAgentSchema = z
  .strictObject({
    /** Its name: `/a2a/<name>`. */
    name: z.string().regex(AGENT_NAME, "lower-case letters, digits and '-', at most 32"),
    /** Where its card is (checked by the egress guard), or the card itself (an A2A 1.0 or 0.3 agent card object). */
    card: z.union([z.url({ protocol: /^https?$/, message: "an http(s) URL" }), z.record(z.string(), z.unknown())]),
    /** The gateway's credential at the agent: a secret's name, sent as a bearer token or `x-api-key`. Never the caller's. */
    credential: z
      .strictObject({
        secret: z.string().regex(/^[A-Z_][A-Z0-9_]*$/),
        scheme: z.enum(["bearer", "x-api-key"]),
        /** Send it when fetching the card too (for an agent whose card is not public); off by default: cards are public. */
        onCardFetch: z.boolean().default(false),
      })
      .optional(),
    /** How often a fetched card is fetched again, in ms. */
    refreshMs: z.number().int().min(10_000).max(86_400_000).default(DEFAULT_CARD_REFRESH_MS),
    /**
     * Active probes of the agent (its HealthMonitor object, `a2a:<name>`): a GET of its card URL,
     * never a message. Absent: the agent is not probed and counts as healthy.
     */
    healthCheck: z
      .strictObject({
        intervalMs: z.number().int().min(1000).max(3_600_000).default(30_000),
        timeoutMs: z.number().int().min(100).max(60_000).default(5_000),
      })
      .optional(),
  })
  .superRefine((agent, ctx) => {
    if (typeof agent.card === "string") return;
    // A probe must not send a message (it could be billed or run as work), and an inline card names no document to fetch.
    if (agent.healthCheck !== undefined) ctx.addIssue({ code: "custom", path: ["healthCheck"], message: "an agent with an inline card is not probed: there is no card URL to fetch, and a probe never sends a message" });
    const reading = readAgentCard(agent.card);
    if (!reading.ok) for (const reason of reading.reasons) ctx.addIssue({ code: "custom", path: ["card"], message: `invalid agent card: ${reason}` });
  });

/** gateway.yaml `a2a`: the agents the gateway fronts at `/a2a/<agent>` (docs/a2a.md); none by default. */
export const a2aConfigSchema = z
  .strictObject({
    agents: z.array(a2aAgentSchema).default([]),
    /**
     * The secret the A2A task ids handed to callers are bound with (src/a2a/task-binding.ts):
     * required with any agent, since an agent sees every caller as the gateway and only the
     * gateway can keep one caller from naming another's task.
     */
    stateSecret: z.string().regex(/^[A-Z_][A-Z0-9_]*$/).optional(),
  })
  .superRefine((a2a, ctx) => {
    if (a2a.agents.length > 0 && a2a.stateSecret === undefined) {
      ctx.addIssue({ code: "custom", path: ["stateSecret"], message: "required with a2a.agents: the secret that binds each A2A task id to the caller it was given to" });
    }
  })
  .prefault({});

export type A2aAgentConfig = z.infer<typeof a2aAgentSchema>;
