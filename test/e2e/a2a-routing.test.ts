import { createHash } from "node:crypto";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startGateway, type RunningGateway } from "../../local-stack/stack.ts";
import { cardsServed, startA2aV1Agent, type A2aTestAgent, type TestAgentSkill, A2A_STATE_SECRET, agentIdOf } from "./support/a2a-agents.ts";
import { ADMIN_TOKEN, bundledConfig, expectNothingLeft } from "./support/stack.ts";

const KEY = "sk-e2e-a2a-router";
const sha = (k: string) => createHash("sha256").update(k).digest("hex");

const skill = (id: string, tags: string[]): TestAgentSkill => ({ id, name: id, description: `Does ${id}.`, tags, examples: [] });
/** Two translators (both `language`) and a coder: a tag picks a capability, the route's order picks among its agents. */
const SKILLS = {
  "translator-a": [skill("translate", ["language", "text"])],
  "translator-b": [skill("translate", ["language", "text"]), skill("summarize", ["text", "summary"])],
  coder: [skill("code-review", ["code"])],
} as const;
type AgentName = keyof typeof SKILLS;

interface AgentStatus {
  readonly name: string;
  readonly probed: boolean;
  readonly status: string;
}

describe("The virtual A2A agent (POST /a2a): routed by capability, with affinity", () => {
  const agents = {} as Record<AgentName, A2aTestAgent>;
  let gateway: RunningGateway;

  beforeAll(async () => {
    const names = Object.keys(SKILLS) as AgentName[];
    const started = await Promise.all(names.map((name) => startA2aV1Agent({ name, skills: SKILLS[name] })));
    names.forEach((n, i) => (agents[n] = started[i]!));
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.health = { cacheTtlMs: 100 };
    g.a2a = { stateSecret: A2A_STATE_SECRET.name, agents: names.map((name) => ({ name, card: agents[name].cardUrl, healthCheck: { intervalMs: 1000, timeoutMs: 500 } })) };
    const p = bundledConfig("publication");
    const demo = p.tenants.find((t: any) => t.id === "demo");
    demo.apiKeys.push({ id: "a2a-router", sha256: sha(KEY), entrypoints: ["*"] });
    p.a2a = {
      policy: { revision: "routing-1", rules: [{ id: "all", effect: "allow", principals: { keys: ["a2a-router"] }, agents: ["*"], skills: ["*"] }] },
      routes: [
        { name: "language", match: { tags: ["language"] }, agents: ["translator-a", "translator-b"] },
        { name: "code", match: { skills: ["code-*"] }, agents: ["coder"] },
      ],
    };
    gateway = await startGateway({ adminToken: ADMIN_TOKEN, secrets: { [A2A_STATE_SECRET.name]: A2A_STATE_SECRET.value }, config: { gateway: stringify(g), publication: stringify(p) } });
    // Cards are fetched off the request path: wait until each agent's first one is in.
    await cardsServed(gateway.publicUrl, KEY, names);
  });

  afterAll(async () => {
    try {
      if (gateway) await expectNothingLeft(gateway.adminUrl);
    } finally {
      await Promise.all([gateway?.stop(), ...Object.values(agents).map((a) => a.close())]);
    }
  });

  /** One A2A 1.0 SendMessage to the virtual agent. */
  const send = async (text: string, metadata: Record<string, unknown>, contextId = "") => {
    const body = {
      jsonrpc: "2.0",
      id: crypto.randomUUID(),
      method: "SendMessage",
      params: { message: { messageId: crypto.randomUUID(), contextId, role: "ROLE_USER", parts: [{ text }], metadata } },
    };
    const res = await fetch(`${gateway.publicUrl}/a2a`, { method: "POST", headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json", "a2a-version": "1.0" }, body: JSON.stringify(body) });
    expect(res.status).toBe(200);
    return (await res.json()) as { result?: { message?: { contextId: string; parts: { text?: string }[] } }; error?: { code: number; message: string; data?: { code?: string } } };
  };
  const answerText = (r: Awaited<ReturnType<typeof send>>) => r.result?.message?.parts.map((p) => p.text ?? "").join("") ?? "";
  const posts = (a: AgentName) => agents[a].received.filter((r) => r.method === "POST").length;
  const lines = () =>
    gateway
      .output()
      .split("\n")
      .filter((l) => l.startsWith("{") && l.includes('"kind":"request"') && l.includes('"a2a":'))
      .map((l) => JSON.parse(l) as { requestId: string; entrypoint: string; a2a: Record<string, any> });
  const statusOf = async (agent: string): Promise<AgentStatus> => {
    const res = await fetch(`${gateway.adminUrl}/admin/status`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(res.status).toBe(200);
    return ((await res.json()) as { a2aAgents: AgentStatus[] }).a2aAgents.find((a) => a.name === agent)!;
  };

  let context = "";

  it("sends a message that asks for a tag to the agent with that capability, and records the route", async () => {
    const before = posts("coder");
    const r = await send("review this", { tags: ["code"] });
    expect(answerText(r)).toBe("[coder] echo: review this");
    expect(posts("coder")).toBe(before + 1);
    await vi.waitFor(() => expect(lines().some((l) => l.entrypoint === "a2a" && l.a2a.agent === "coder" && l.a2a.routed?.rule === "code")).toBe(true), { timeout: 5_000, interval: 50 });
  });

  it("keeps a context on the agent that answered it, even when another agent also matches", async () => {
    const first = await send("hello", { tags: ["language"] });
    expect(answerText(first)).toBe("[translator-a] echo: hello");
    context = first.result!.message!.contextId;
    expect(context).not.toBe("");
    // A message without a context is routed afresh, by the route's order of preference.
    const fresh = await send("short", { skill: "translate", tags: ["text"] });
    expect(answerText(fresh)).toBe("[translator-a] echo: short");
    const again = await send("again", { tags: ["language", "text"] }, context);
    expect(answerText(again)).toBe("[translator-a] echo: again");
    await vi.waitFor(() => expect(lines().some((l) => l.a2a.agent === "translator-a" && l.a2a.routed?.pinnedBy === "context" && l.a2a.contextId === agentIdOf(context))).toBe(true), { timeout: 5_000, interval: 50 });
  });

  it("routes a streamed message, and pins the context its stream names", async () => {
    const body = {
      jsonrpc: "2.0",
      id: "s1",
      method: "SendStreamingMessage",
      params: { message: { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text: "task review" }], metadata: { tags: ["code"] } } },
    };
    const res = await fetch(`${gateway.publicUrl}/a2a`, { method: "POST", headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json", "a2a-version": "1.0" }, body: JSON.stringify(body) });
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const events = (await res.text())
      .split("\n\n")
      .filter((f) => f.startsWith("data: "))
      .map((f) => JSON.parse(f.slice(6)) as { result?: Record<string, any> });
    expect(JSON.stringify(events)).toContain("[coder] done: task review");
    const task = events.map((e) => e.result?.task).find((t) => t !== undefined);
    const streamed = task?.contextId as string;
    expect(streamed).toBeTruthy();
    const next = await send("and this", { tags: ["code"] }, streamed);
    expect(answerText(next)).toBe("[coder] echo: and this");
    await vi.waitFor(() => expect(lines().some((l) => l.a2a.agent === "coder" && l.a2a.routed?.pinnedBy === "context" && l.a2a.contextId === agentIdOf(streamed))).toBe(true), { timeout: 5_000, interval: 50 });
  });

  it("refuses a task method at /a2a, pointing at /a2a/<agent>", async () => {
    const res = await fetch(`${gateway.publicUrl}/a2a`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json", "a2a-version": "1.0" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "GetTask", params: { id: "some-task" } }),
    });
    expect(res.status).toBe(200);
    const r = (await res.json()) as { id: unknown; error?: { message: string; data?: { code?: string } } };
    expect(r.id).toBe(7);
    expect(r.error?.data?.code).toBe("invalid_request");
    expect(r.error?.message).toContain("/a2a/<agent>");
  });

  it("answers agent_not_routable for a context whose agent is down, and routes a new context to a healthy agent", async () => {
    await vi.waitFor(async () => expect((await statusOf("translator-a")).status).toBe("healthy"), { timeout: 20_000, interval: 200 });
    await agents["translator-a"].close();
    await vi.waitFor(async () => expect((await statusOf("translator-a")).status).toBe("unhealthy"), { timeout: 20_000, interval: 200 });
    const beforeB = posts("translator-b");
    // The isolate's health view is at most its cache TTL old: poll until it agrees.
    await vi.waitFor(
      async () => {
        const pinned = await send("still there?", { tags: ["language"] }, context);
        expect(pinned.error?.data?.code).toBe("agent_not_routable");
      },
      { timeout: 5_000, interval: 100 },
    );
    expect(posts("translator-b")).toBe(beforeB);
    const fresh = await send("new one", { tags: ["language"] });
    expect(answerText(fresh)).toBe("[translator-b] echo: new one");
    expect(posts("translator-b")).toBe(beforeB + 1);
  });
});
