import { describe, expect, it } from "vitest";
import { A2aRouter, AffinityTable, type AgentFacts, type RouteDecision, type RouteQuestion } from "../../../src/a2a/a2a-routing.ts";
import { a2aRoutesSchema } from "../../../src/config/a2a-schema.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";

const agents: AgentFacts[] = [
  { agent: "translator-a", skills: [{ id: "translate", tags: ["language", "text"] }] },
  { agent: "translator-b", skills: [{ id: "translate", tags: ["language", "text"] }, { id: "summarize", tags: ["text"] }] },
  { agent: "coder", skills: [{ id: "code-review", tags: ["code"] }] },
  { agent: "generalist", skills: [] },
];

const routes = a2aRoutesSchema.parse([
  { name: "language", match: { tags: ["language"] }, agents: ["translator-a", "translator-b"], affinityHeader: "x-session" },
  { name: "text", match: { skills: ["summ*"] }, agents: ["translator-b"] },
  { name: "code", match: { skills: ["code-*"] }, agents: ["coder"] },
  { name: "default", agents: ["generalist"] },
]);

function setup(options: { maxEntries?: number; ttlMs?: number } = {}) {
  let now = 1_000_000;
  const table = new AffinityTable({ ...options, now: () => now });
  const router = new A2aRouter(routes, table);
  const down = new Set<string>();
  const route = (q: Partial<RouteQuestion> & { ask?: RouteQuestion["ask"] }): RouteDecision =>
    router.route({ tenant: "acme", ask: {}, trustedHeaders: new Map(), ...q }, agents, (a) => !down.has(a));
  return { router, table, down, route, advance: (ms: number) => (now += ms) };
}

const ok = (d: RouteDecision) => {
  if (!d.ok) throw new Error(`refused: ${d.reason}: ${d.error.message}`);
  return d;
};
const refusal = (d: RouteDecision) => {
  if (d.ok) throw new Error(`routed to ${d.agent}`);
  return d;
};

describe("A2A capability routing", () => {
  it("routes by skill or tags to the first healthy agent of the first rule that can serve it", () => {
    const { route, down } = setup();
    expect(route({ ask: { skill: "translate" } })).toEqual({ ok: true, agent: "translator-a", skill: "translate", rule: "language", pinnedBy: undefined });
    expect(ok(route({ ask: { tags: ["language"] } })).agent).toBe("translator-a");
    expect(ok(route({ ask: { skill: "summarize" } }))).toMatchObject({ agent: "translator-b", skill: "summarize", rule: "text" });
    expect(ok(route({ ask: { tags: ["code"] } }))).toMatchObject({ agent: "coder", skill: "code-review", rule: "code" });
    // A message that asks for nothing takes the default route.
    expect(ok(route({}))).toMatchObject({ agent: "generalist", skill: undefined, rule: "default" });
    // The first agent down: the next in order.
    down.add("translator-a");
    expect(ok(route({ ask: { skill: "translate" } })).agent).toBe("translator-b");
  });

  it("refuses a capability no route serves as not found, and one whose agents are all down as not routable", () => {
    const { route, down } = setup();
    const none = refusal(route({ ask: { skill: "paint" } }));
    expect(none.reason).toBe("no_route");
    expect(none.error).toBeInstanceOf(GatewayError);
    expect(none.error.code).toBe("not_found");
    expect(none.error.message).toBe('No published A2A route serves skill "paint".');
    // Both tags must be carried by one skill.
    expect(refusal(route({ ask: { tags: ["language", "code"] } })).reason).toBe("no_route");
    // Without a default route, a message that asks for nothing is not guessed at.
    const strict = new A2aRouter(routes.filter((r) => r.name !== "default"));
    const unlabelled = refusal(strict.route({ tenant: "acme", ask: {}, trustedHeaders: new Map() }, agents, () => true));
    expect(unlabelled.error.message).toBe("No published A2A route serves a message that asks for no skill or tags (there is no default route).");
    down.add("coder");
    const all = refusal(route({ ask: { skill: "code-review" } }));
    expect(all.reason).toBe("no_healthy_agent");
    expect(all.error).toMatchObject({ code: "agent_not_routable", status: 503, retryable: true });
    // A later rule is another capability, not a fallback: the default route does not take it.
    expect(all.error.message).toMatch(/route code/);
  });

  it("passes over agents the caller's policy does not allow, and says so when it allows none", () => {
    const { router, down } = setup();
    const q = { tenant: "acme", ask: { skill: "translate" }, trustedHeaders: new Map<string, string>() };
    const onlyB = (agent: string, skill: string | undefined) => agent === "translator-b" && skill === "translate";
    expect(ok(router.route(q, agents, () => true, onlyB)).agent).toBe("translator-b");
    const none = refusal(router.route(q, agents, () => true, () => false));
    expect(none.reason).toBe("not_permitted");
    expect(none.error).toMatchObject({ code: "tool_not_allowed", status: 403 });
    // Allowed but down is "not routable now", not "not allowed".
    down.add("translator-b");
    expect(refusal(router.route(q, agents, (a) => !down.has(a), onlyB)).reason).toBe("no_healthy_agent");
  });

  it("keeps a context on the agent that first served it, and refuses when that agent is down rather than moving it", () => {
    const { route, router, down } = setup();
    const first = ok(route({ ask: { skill: "translate" } }));
    expect(first.agent).toBe("translator-a");
    // The agent's answer names the context; the kind pins it.
    router.pinContext("acme", "ctx-1", first.agent);
    expect(route({ ask: { skill: "translate" }, contextId: "ctx-1" })).toEqual({ ok: true, agent: "translator-a", skill: "translate", rule: undefined, pinnedBy: "context" });
    down.add("translator-a");
    const pinned = refusal(route({ ask: { skill: "translate" }, contextId: "ctx-1" }));
    expect(pinned.reason).toBe("pinned_agent_unhealthy");
    expect(pinned.error).toMatchObject({ code: "agent_not_routable", status: 503, retryable: true });
    expect(pinned.error.message).toBe('Context "ctx-1" is held by agent translator-a, which is not healthy now; retry later.');
    // A new context goes to the healthy one; another tenant's context of the same id is its own.
    expect(ok(route({ ask: { skill: "translate" } })).agent).toBe("translator-b");
    expect(ok(route({ tenant: "other", ask: { skill: "translate" }, contextId: "ctx-1" })).agent).toBe("translator-b");
    down.delete("translator-a");
    expect(ok(route({ ask: { skill: "translate" }, contextId: "ctx-1" })).agent).toBe("translator-a");
  });

  it("pins a context the message already carries at once", () => {
    const { route, down } = setup();
    expect(ok(route({ ask: { skill: "translate" }, contextId: "client-ctx" })).agent).toBe("translator-a");
    down.add("translator-a");
    expect(refusal(route({ ask: { skill: "translate" }, contextId: "client-ctx" })).reason).toBe("pinned_agent_unhealthy");
  });

  it("keeps a trusted session on one agent per route", () => {
    const { route, down } = setup();
    const session = new Map([["x-session", "s-9"]]);
    expect(ok(route({ ask: { skill: "translate" }, trustedHeaders: session })).agent).toBe("translator-a");
    expect(ok(route({ ask: { skill: "translate" }, trustedHeaders: session }))).toMatchObject({ agent: "translator-a", pinnedBy: "session", rule: "language" });
    down.add("translator-a");
    const r = refusal(route({ ask: { skill: "translate" }, trustedHeaders: session }));
    expect(r.reason).toBe("pinned_agent_unhealthy");
    expect(r.error.message).toMatch(/^The session in x-session is held by agent translator-a/);
    // Another session value is free; the same session on another route is not pinned by this one.
    expect(ok(route({ ask: { skill: "translate" }, trustedHeaders: new Map([["x-session", "s-10"]]) })).agent).toBe("translator-b");
    expect(ok(route({ ask: { skill: "summarize" }, trustedHeaders: session })).agent).toBe("translator-b");
  });

  it("refuses a pinned context a different capability the pinned agent lacks, and one whose agent left the config", () => {
    const { route, router } = setup();
    router.pinContext("acme", "ctx-2", "translator-a");
    const lacks = refusal(route({ ask: { skill: "summarize" }, contextId: "ctx-2" }));
    expect(lacks.reason).toBe("pinned_agent_lacks_skill");
    expect(lacks.error).toMatchObject({ code: "invalid_request", retryable: false });
    router.pinContext("acme", "ctx-3", "retired");
    const gone = refusal(route({ ask: { skill: "translate" }, contextId: "ctx-3" }));
    expect(gone.reason).toBe("pinned_agent_gone");
    expect(gone.error.code).toBe("agent_not_routable");
  });

  it("forgets a pin after its idle time, each use renewing it", () => {
    const { route, router, advance, table } = setup({ ttlMs: 60_000 });
    router.pinContext("acme", "ctx", "translator-b");
    advance(59_000);
    expect(ok(route({ ask: { skill: "translate" }, contextId: "ctx" })).pinnedBy).toBe("context");
    advance(59_000);
    expect(table.get(AffinityTable.contextKey("acme", "ctx"))).toBe("translator-b");
    advance(60_000);
    expect(table.get(AffinityTable.contextKey("acme", "ctx"))).toBeUndefined();
    expect(table.size).toBe(0);
    // Forgotten: routed afresh (and pinned again).
    expect(ok(route({ ask: { skill: "translate" }, contextId: "ctx" }))).toMatchObject({ agent: "translator-a", pinnedBy: undefined });
  });

  it("holds at most maxEntries pins, evicting the least recently used", () => {
    const table = new AffinityTable({ maxEntries: 3, now: () => 0 });
    for (const c of ["a", "b", "c"]) table.set(AffinityTable.contextKey("t", c), `agent-${c}`);
    expect(table.get(AffinityTable.contextKey("t", "a"))).toBe("agent-a");
    table.set(AffinityTable.contextKey("t", "d"), "agent-d");
    expect(table.size).toBe(3);
    expect(table.get(AffinityTable.contextKey("t", "b"))).toBeUndefined();
    expect(table.get(AffinityTable.contextKey("t", "a"))).toBe("agent-a");
    expect(table.get(AffinityTable.contextKey("t", "d"))).toBe("agent-d");
    // Keys cannot collide across tenants or kinds, whatever the ids contain.
    expect(AffinityTable.contextKey("a", "b:c")).not.toBe(AffinityTable.contextKey("a:b", "c"));
    expect(AffinityTable.sessionKey("t", "r", "v")).not.toBe(AffinityTable.contextKey("t", "v"));
  });

  it("names the trusted headers its routes pin sessions by (what the kind reads from a request)", () => {
    expect(new A2aRouter(routes).affinityHeaders).toEqual(["x-session"]);
    expect(new A2aRouter([]).affinityHeaders).toEqual([]);
  });
});
