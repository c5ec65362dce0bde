import { z } from "zod";
import { SERVER_NAME } from "../mcp/tool-names.ts";

/**
 * A configured A2A agent's name (gateway.yaml `a2a.agents[].name`, the `<agent>` of
 * `/a2a/<agent>`): the grammar of an MCP server's name, so policy and price rules name both alike.
 */
export const AGENT_NAME = SERVER_NAME;

/*
 * The capability routes of the virtual agent `/a2a` (publication.yaml `a2a.routes`); what they
 * mean is in src/a2a/a2a-routing.ts, which applies them.
 */

const glob = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9_.:/*-]+$/, "skill ids and '*' wildcards");
const tag = z.string().min(1).max(128);

/** One route rule of publication.yaml `a2a.routes`. */
export const a2aRouteSchema = z.strictObject({
  /** Named in every routing decision (access line, errors). */
  name: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "lower-case letters, digits, '-' and '_'"),
  /**
   * Which skills the rule routes: a skill whose id matches one of `skills` or which carries one
   * of `tags`. Without `match` the rule is a default route: it takes messages that ask for no
   * skill or tags, and those asking for a skill one of its agents declares.
   */
  match: z
    .strictObject({ skills: z.array(glob).min(1).optional(), tags: z.array(tag).min(1).optional() })
    .refine((m) => m.skills !== undefined || m.tags !== undefined, { message: "a match needs skills, tags or both" })
    .optional(),
  /** The agents that may serve it, in order of preference: the first healthy one that declares a matching skill wins. */
  agents: z
    .array(z.string().regex(AGENT_NAME, "an agent name"))
    .min(1)
    .refine((a) => new Set(a).size === a.length, { message: "each agent once" }),
  /**
   * A trusted header (gateway.yaml `security.trustedHeaders`) whose value pins a session to the
   * agent first chosen for it under this rule, besides the pin by `contextId`.
   */
  affinityHeader: z.string().regex(/^[a-z0-9-]+$/).optional(),
});

export const a2aRoutesSchema = z.array(a2aRouteSchema);
export type A2aRouteConfig = z.infer<typeof a2aRouteSchema>;
