import { z } from "zod";
import { SERVER_NAME } from "./tool-names.ts";

/** A string that compiles as a JavaScript regular expression (with the `u` flag), refused at load otherwise. */
export function regexSource(message: string) {
  return z.string().refine(
    (p) => {
      try {
        new RegExp(p, "u");
        return true;
      } catch {
        return false;
      }
    },
    { message },
  );
}

/**
 * Deny-by-default authorization of MCP tools, prompts and resources: rules per principal ×
 * server × name × constraints on the parsed arguments. A2A agents' skills are decided by the same
 * language and matcher (`a2a.policy`: agents where servers are, skills where names are).
 *
 * The rule language is a small typed schema rather than CEL. A rule here is data the gateway can
 * explain: every decision names the rule that made it, the policy revision and, for a refusal,
 * the constraint that failed. Listing needs the same rules read without arguments (what may this
 * caller call at all?), which a typed rule answers exactly and an arbitrary expression cannot.
 * And the constraints operators asked peers for — a repository among these, a path under this
 * prefix, a limit at most N — are a handful of comparisons on named arguments.
 *
 * Semantics:
 * - Nothing is allowed unless an `allow` rule matches the principal, the server, the kind and
 *   the name, and all its argument constraints hold.
 * - A matching `deny` rule refuses whatever allow rules say. A deny rule with argument
 *   constraints refuses only the calls whose arguments meet all of them.
 * - A list shows an item when some allow rule could admit a call of it and no deny rule without
 *   argument constraints refuses it; each call is decided again with its arguments.
 */

const glob = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[A-Za-z0-9_.:/*-]+$/, "names and '*' wildcards");

const constraintSchema = z
  .strictObject({
    /** The argument must be present. */
    required: z.boolean().optional(),
    type: z.enum(["string", "number", "boolean"]).optional(),
    equals: z.union([z.string(), z.number(), z.boolean()]).optional(),
    oneOf: z.array(z.union([z.string(), z.number(), z.boolean()])).min(1).optional(),
    /** A JavaScript regular expression the whole string value must match. */
    pattern: regexSource("a JavaScript regular expression").min(1).optional(),
    /** The string value starts with this, after `.`/`..` segments and repeated slashes are refused. */
    pathPrefix: z.string().min(1).optional(),
    maxLength: z.number().int().min(0).optional(),
    min: z.number().optional(),
    max: z.number().optional(),
  })
  .refine((c) => Object.keys(c).length > 0, { message: "a constraint needs at least one condition" });

/** What every rule says, whatever it targets: its name, its effect, whom it covers. */
const ruleCore = {
  /** Named in every decision it makes (audit lines, errors). */
  id: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "lower-case letters, digits, '-' and '_'"),
  effect: z.enum(["allow", "deny"]),
  /** Who: tenant ids and key ids (`*` for any); both must match. */
  principals: z.strictObject({ tenants: z.array(glob).min(1).default(["*"]), keys: z.array(glob).min(1).default(["*"]) }).prefault({}),
  /**
   * `required`: a call this allow rule admits waits for a human approver (docs/governance.md,
   * "Approvals"), narrowed like the rule (an MCP rule by its `arguments`). Meaningless on a deny rule.
   */
  approval: z.enum(["required"]).optional(),
};
const approvalOnAllow = (r: { approval?: "required" | undefined; effect: "allow" | "deny" }) => r.approval === undefined || r.effect === "allow";
const approvalOnAllowMessage = { message: "approval applies to allow rules only", path: ["approval"] };

/** A configured server's (or agent's) name, or `*`. */
const targetNames = (what: string) => z.array(z.union([z.literal("*"), z.string().regex(SERVER_NAME, what)])).min(1);

/** One rule of an MCP policy. */
export const policyRuleSchema = z
  .strictObject({
    ...ruleCore,
    /** Which servers (their configured names, or `*`). */
    servers: targetNames("a server name"),
    kind: z.enum(["tool", "prompt", "resource"]).default("tool"),
    /** Tool or prompt names, or resource URIs, with `*` wildcards (upstream names, not namespaced). */
    names: z.array(glob).min(1),
    /** Constraints on the call's arguments by name (`a.b` reaches into objects); all must hold. */
    arguments: z.record(z.string().regex(/^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*$/), constraintSchema).default({}),
  })
  .refine(approvalOnAllow, approvalOnAllowMessage);

/**
 * One rule of an A2A policy: the same language as an MCP rule (id, effect, principals, approval;
 * one matcher, one decision shape), aimed at agents and their skills instead of servers and
 * tools. An A2A message has no named arguments, so there are no argument constraints.
 */
export const a2aPolicyRuleSchema = z
  .strictObject({
    ...ruleCore,
    /** Which agents (gateway.yaml `a2a.agents[].name`, or `*`). */
    agents: targetNames("an agent name"),
    /** Skill ids from the agents' cards, with `*` wildcards. */
    skills: z.array(glob).min(1),
  })
  .refine(approvalOnAllow, approvalOnAllowMessage);

/** An MCP policy: its revision (named in decisions) and its rules. */
export const policySchema = z.strictObject({
  revision: z.string().min(1).max(64),
  rules: z.array(policyRuleSchema).default([]),
});

/** An A2A policy (publication.yaml `a2a.policy`): its revision and its rules. */
export const a2aPolicySchema = z.strictObject({
  revision: z.string().min(1).max(64),
  rules: z.array(a2aPolicyRuleSchema).default([]),
});

export type PolicyRule = z.infer<typeof policyRuleSchema>;
export type PolicyConfig = z.infer<typeof policySchema>;
export type A2aPolicyRule = z.infer<typeof a2aPolicyRuleSchema>;
export type A2aPolicyConfig = z.infer<typeof a2aPolicySchema>;

/**
 * What is asked: who, which server, what kind, which name, and for a call its arguments. An A2A
 * question is of kind `skill`: `server` is then the agent and `name` the skill id.
 */
export interface PolicyQuestion {
  readonly tenant: string;
  readonly key: string;
  readonly server: string;
  readonly kind: "tool" | "prompt" | "resource" | "skill";
  readonly name: string;
}

/** A decision, with what explains it. */
export interface PolicyDecision {
  readonly allowed: boolean;
  /** The rule that decided; undefined for the default denial. */
  readonly rule: string | undefined;
  readonly policyRevision: string;
  /** Why, in words an operator and the caller may read (it names arguments, never their values). */
  readonly reason: string;
  /** Set when the allowing rule makes the call wait for a human approval (the rule is `rule`). */
  readonly approval?: "required" | undefined;
}

interface CompiledRule {
  readonly id: string;
  readonly deny: boolean;
  readonly approval: boolean;
  readonly tenants: readonly RegExp[];
  readonly keys: readonly RegExp[];
  readonly servers: readonly string[];
  readonly kind: PolicyQuestion["kind"];
  readonly names: readonly RegExp[];
  readonly constraints: readonly { readonly path: readonly string[]; readonly c: z.infer<typeof constraintSchema>; readonly pattern: RegExp | undefined }[];
}

/** One rule, whatever its target, as the matcher reads it. */
function compileRule(
  r: Pick<PolicyRule, "id" | "effect" | "approval" | "principals">,
  servers: readonly string[],
  kind: PolicyQuestion["kind"],
  names: readonly string[],
  args: PolicyRule["arguments"],
): CompiledRule {
  return {
    id: r.id,
    deny: r.effect === "deny",
    approval: r.approval === "required",
    tenants: r.principals.tenants.map(globRe),
    keys: r.principals.keys.map(globRe),
    servers,
    kind,
    names: names.map(globRe),
    constraints: Object.entries(args).map(([path, c]) => ({ path: path.split("."), c, pattern: c.pattern === undefined ? undefined : new RegExp(`^(?:${c.pattern})$`, "u") })),
  };
}

const globRe = (g: string) => new RegExp(`^${g.replace(/[.+?^${}()|[\]\\/:]/g, "\\$&").replace(/\*/g, ".*")}$`, "s");

/** A policy compiled once (globs and patterns to regular expressions), asked per list and per call. */
export class ToolPolicy {
  readonly revision: string;
  readonly #rules: readonly CompiledRule[];

  /** An MCP policy, or (`{ a2a }`) an A2A one: agents stand where servers do, skills where names do. */
  constructor(config: PolicyConfig | { readonly a2a: A2aPolicyConfig }) {
    if ("a2a" in config) {
      this.revision = config.a2a.revision;
      this.#rules = config.a2a.rules.map((r) => compileRule(r, r.agents, "skill", r.skills, {}));
    } else {
      this.revision = config.revision;
      this.#rules = config.rules.map((r) => compileRule(r, r.servers, r.kind, r.names, r.arguments));
    }
  }

  #matching(q: PolicyQuestion): CompiledRule[] {
    return this.#rules.filter(
      (r) =>
        r.kind === q.kind &&
        (r.servers.includes("*") || r.servers.includes(q.server)) &&
        r.names.some((n) => n.test(q.name)) &&
        r.tenants.some((t) => t.test(q.tenant)) &&
        r.keys.some((k) => k.test(q.key)),
    );
  }

  /** May the caller see this item in a list (could some call of it be allowed)? */
  visible(q: PolicyQuestion): PolicyDecision {
    const rules = this.#matching(q);
    const hardDeny = rules.find((r) => r.deny && r.constraints.length === 0);
    if (hardDeny) return this.#decision(false, hardDeny.id, `denied by rule ${hardDeny.id}`);
    const allow = rules.find((r) => !r.deny);
    return allow ? this.#decision(true, allow.id, `allowed by rule ${allow.id}`) : this.#decision(false, undefined, "no rule allows it (deny by default)");
  }

  /**
   * Could some call of this item by the caller need an approval? True when, in rule order, an
   * allowing rule that requires approval comes before any allowing rule that would admit every
   * call on its own (no argument constraints), and nothing denies the item outright. What a
   * tools/list says before the arguments are known (a task-capable tool, MCP 2025-11-25).
   */
  mayNeedApproval(q: PolicyQuestion): boolean {
    const rules = this.#matching(q);
    if (rules.some((r) => r.deny && r.constraints.length === 0)) return false;
    for (const r of rules) {
      if (r.deny) continue;
      if (r.approval) return true;
      if (r.constraints.length === 0) return false;
    }
    return false;
  }

  /** May the caller make this call, with these arguments? */
  decide(q: PolicyQuestion, args: unknown): PolicyDecision {
    const rules = this.#matching(q);
    for (const r of rules) {
      if (r.deny && r.constraints.every((k) => holds(k, args) === undefined)) return this.#decision(false, r.id, `denied by rule ${r.id}`);
    }
    let failed: string | undefined;
    for (const r of rules) {
      if (r.deny) continue;
      const why = r.constraints.map((k) => holds(k, args)).find((x) => x !== undefined);
      if (why === undefined) return r.approval ? { ...this.#decision(true, r.id, `allowed by rule ${r.id} after approval`), approval: "required" } : this.#decision(true, r.id, `allowed by rule ${r.id}`);
      failed ??= `rule ${r.id}: ${why}`;
    }
    return this.#decision(false, undefined, failed ? `no rule allows these arguments (${failed})` : "no rule allows it (deny by default)");
  }

  #decision(allowed: boolean, rule: string | undefined, reason: string): PolicyDecision {
    return { allowed, rule, policyRevision: this.revision, reason };
  }
}

/** Undefined when the constraint holds, else why not (naming the argument, never its value). */
function holds(k: CompiledRule["constraints"][number], args: unknown): string | undefined {
  let v: unknown = args;
  for (const p of k.path) v = v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>)[p] : undefined;
  const name = k.path.join(".");
  const c = k.c;
  if (v === undefined) return c.required || c.equals !== undefined || c.oneOf !== undefined || c.pattern !== undefined || c.pathPrefix !== undefined ? `argument ${name} is missing` : undefined;
  if (c.type !== undefined && typeof v !== c.type) return `argument ${name} must be a ${c.type}`;
  if (c.equals !== undefined && v !== c.equals) return `argument ${name} is not the allowed value`;
  if (c.oneOf !== undefined && !c.oneOf.includes(v as string | number | boolean)) return `argument ${name} is not one of the allowed values`;
  if (typeof v === "string") {
    if (c.maxLength !== undefined && v.length > c.maxLength) return `argument ${name} is longer than ${c.maxLength}`;
    if (k.pattern !== undefined && !k.pattern.test(v)) return `argument ${name} does not match the allowed pattern`;
    if (c.pathPrefix !== undefined && !underPrefix(v, c.pathPrefix)) return `argument ${name} is not under the allowed path`;
  } else if (c.pattern !== undefined || c.pathPrefix !== undefined || c.maxLength !== undefined) {
    return `argument ${name} must be a string`;
  }
  if (typeof v === "number") {
    if (c.min !== undefined && v < c.min) return `argument ${name} is below ${c.min}`;
    if (c.max !== undefined && v > c.max) return `argument ${name} is above ${c.max}`;
  } else if (c.min !== undefined || c.max !== undefined) {
    return `argument ${name} must be a number`;
  }
  return undefined;
}

/**
 * Whether a path lies under a prefix. Traversal is refused outright, in every spelling a later
 * decoder could turn into one: `.`/`..` segments, percent-encoded dots and slashes, backslashes,
 * empty segments and NUL — Kong's path-parameter traversal was one decode away from its check.
 */
function underPrefix(path: string, prefix: string): boolean {
  if (/%(?:2e|2f|5c|00)/i.test(path) || path.includes("\\") || path.includes("\0")) return false;
  const segments = path.split("/");
  if (segments.some((s, i) => s === "." || s === ".." || (s === "" && i > 0 && i < segments.length - 1))) return false;
  return path.startsWith(prefix);
}
