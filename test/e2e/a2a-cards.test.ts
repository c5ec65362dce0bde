import { DefaultAgentCardResolver } from "@a2a-js/sdk/client";
import { A2AClient } from "a2a-sdk-v0-3/client";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { startA2aV03Agent, startA2aV1Agent, TEST_AGENT_SIGNATURE, type A2aTestAgent, A2A_STATE_SECRET } from "./support/a2a-agents.ts";
import { ADMIN_TOKEN, allowingSimulators, backendsFor, bundledConfig, DEMO_KEY, type Simulator } from "./support/stack.ts";

interface AgentStatus {
  readonly name: string;
  readonly probed: boolean;
  readonly status: string;
  readonly lastReason: string | null;
  readonly card: { readonly source: string; readonly fetchedAt?: string | null; readonly lastFailure?: { readonly at: string; readonly reasons: string[] } | null };
}

/** The gateway's own security schemes (the card rewriting's names), and the agents' that must never show. */
const GATEWAY_SCHEMES = ["sluiceApiKey", "sluiceApiKeyHeader"];

/**
 * The agent card endpoint end to end: the official SDK's card resolvers (1.0, and the 0.3 line's
 * A2AClient) fetch the cards of two SDK agents through the real gateway, and see the gateway's
 * card, never the agent's: its URL and security schemes, no signature, the versions it speaks, and
 * only the skills the caller's policy allows. A card that later fails at the agent leaves the last
 * good one served; an agent that stops turns unhealthy in `/admin/status`.
 */
describe("A2A agent cards through the gateway", () => {
  let sim: Simulator;
  let v1: A2aTestAgent;
  let v03: A2aTestAgent;
  let flaky: A2aTestAgent;
  let gateway: RunningGateway;

  beforeAll(async () => {
    [sim, v1, v03, flaky] = await Promise.all([
      startSimulatorProcess({ apiKey: SIMULATOR_API_KEY }),
      startA2aV1Agent({ bearer: "agent-v1-token" }),
      startA2aV03Agent({ bearer: "agent-v03-token" }),
      startA2aV1Agent({ name: "flaky" }),
    ]);
    const g = allowingSimulators(bundledConfig("gateway"), sim.url, v1.origin, v03.origin, flaky.origin);
    g.health = { cacheTtlMs: 100 };
    g.a2a = {
      stateSecret: A2A_STATE_SECRET.name,
      agents: [
        { name: "echo-v1", card: v1.cardUrl, credential: { secret: "AGENT_V1_TOKEN", scheme: "bearer" }, refreshMs: 10_000 },
        { name: "echo-v03", card: v03.cardUrl, credential: { secret: "AGENT_V03_TOKEN", scheme: "bearer" } },
        { name: "flaky", card: flaky.cardUrl, healthCheck: { intervalMs: 1000, timeoutMs: 500 } },
      ],
    };
    const p = bundledConfig("publication");
    p.a2a = {
      policy: {
        revision: "cards-1",
        rules: [
          { id: "summaries", effect: "allow", principals: { tenants: ["demo"], keys: ["demo"] }, agents: ["*"], skills: ["summarize"] },
          { id: "no-translation", effect: "deny", principals: { tenants: ["demo"] }, agents: ["*"], skills: ["translate"] },
        ],
      },
    };
    gateway = await startGateway({
      adminToken: ADMIN_TOKEN,
      secrets: { AGENT_V1_TOKEN: "agent-v1-token", AGENT_V03_TOKEN: "agent-v03-token", [A2A_STATE_SECRET.name]: A2A_STATE_SECRET.value },
      config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) },
    });
  });

  afterAll(async () => {
    await gateway?.stop();
    await Promise.all([v1?.close(), v03?.close(), flaky?.close(), sim?.stop()]);
  });

  const cardUrl = (agent: string) => `${gateway.publicUrl}/a2a/${agent}/.well-known/agent-card.json`;
  /** A fetch that presents the demo key, as the SDK clients are given. */
  const withKey: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set("authorization", `Bearer ${DEMO_KEY}`);
    return fetch(input, { ...init, headers });
  };

  /** Polls until the gateway has a good card for `agent` (its registry fetches on its alarm, off the request path). */
  async function cardServed(agent: string): Promise<void> {
    const end = Date.now() + 20_000;
    for (;;) {
      const res = await withKey(cardUrl(agent), { headers: { "a2a-version": "1.0" } });
      await res.body?.cancel();
      if (res.status === 200) return;
      expect(res.status, `while waiting for ${agent}'s card`).toBe(503);
      if (Date.now() > end) throw new Error(`no card of ${agent} was served within 20 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  const statuses = async (): Promise<AgentStatus[]> => {
    const res = await fetch(`${gateway.adminUrl}/admin/status`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(res.status).toBe(200);
    return ((await res.json()) as { a2aAgents: AgentStatus[] }).a2aAgents;
  };
  const statusUntil = async (agent: string, pred: (s: AgentStatus) => boolean, withinMs = 20_000): Promise<AgentStatus> => {
    const end = Date.now() + withinMs;
    for (;;) {
      const s = (await statuses()).find((a) => a.name === agent)!;
      if (pred(s)) return s;
      if (Date.now() > end) throw new Error(`${agent}'s status never reached the expected state: ${JSON.stringify(s)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  /** Nothing the gateway serves names an agent's own address. */
  const agentOrigins = () => [v1.origin, v03.origin, flaky.origin];

  it("serves neither the agents' addresses nor their signatures in either shape", async () => {
    for (const agent of ["echo-v1", "echo-v03"]) {
      await cardServed(agent);
      for (const version of ["1.0", "0.3"]) {
        const res = await withKey(cardUrl(agent), { headers: { "a2a-version": version } });
        expect(res.status).toBe(200);
        const raw = await res.text();
        for (const origin of agentOrigins()) expect(raw).not.toContain(origin);
        expect(raw).not.toContain(TEST_AGENT_SIGNATURE.signature);
        expect(JSON.parse(raw)).not.toHaveProperty("signatures");
        expect(JSON.parse(raw).description).toMatch(/signatures are not included/);
        expect(raw).not.toContain("agentBearer");
      }
    }
  });

  it("the 1.0 SDK's resolver sees the gateway's card of the 1.0 agent", async () => {
    await cardServed("echo-v1");
    const card = await new DefaultAgentCardResolver({ fetchImpl: withKey }).resolve(`${gateway.publicUrl}/a2a/echo-v1/`);
    expect(card.name).toBe("echo-v1");
    expect(card.supportedInterfaces.map((i) => ({ url: i.url, binding: i.protocolBinding, version: i.protocolVersion }))).toEqual([
      { url: `${gateway.publicUrl}/a2a/echo-v1`, binding: "JSONRPC", version: "1.0" },
      // 0.3 callers are bridged to the 1.0 agent by POST /a2a/<agent>.
      { url: `${gateway.publicUrl}/a2a/echo-v1`, binding: "JSONRPC", version: "0.3" },
    ]);
    expect(Object.keys(card.securitySchemes).sort()).toEqual([...GATEWAY_SCHEMES].sort());
    expect(card.signatures ?? []).toEqual([]);
    expect(card.skills.map((s) => s.id)).toEqual(["summarize"]);
    expect(card.description).toMatch(/gateway/i);
    const raw = JSON.stringify(card);
    for (const origin of agentOrigins()) expect(raw).not.toContain(origin);
    expect(raw).not.toContain("agentBearer");
  });

  it("the 0.3 SDK's A2AClient sees the gateway's 0.3 card of the 0.3 agent", async () => {
    await cardServed("echo-v03");
    const client = await A2AClient.fromCardUrl(cardUrl("echo-v03"), { fetchImpl: withKey });
    const card = await client.getAgentCard();
    expect(card).toMatchObject({ name: "echo-v03", url: `${gateway.publicUrl}/a2a/echo-v03`, preferredTransport: "JSONRPC", protocolVersion: "0.3.0" });
    expect(card.additionalInterfaces ?? []).toEqual([]);
    expect(Object.keys(card.securitySchemes ?? {}).sort()).toEqual([...GATEWAY_SCHEMES].sort());
    expect(card.signatures ?? []).toEqual([]);
    expect(card.skills.map((s) => s.id)).toEqual(["summarize"]);
    const raw = JSON.stringify(card);
    for (const origin of agentOrigins()) expect(raw).not.toContain(origin);
  });

  it("a 1.0 caller of the 0.3 agent gets a 1.0 card claiming both generations, each at the gateway (the call is bridged)", async () => {
    await cardServed("echo-v03");
    const res = await withKey(cardUrl("echo-v03"), { headers: { "a2a-version": "1.0" } });
    expect(res.status).toBe(200);
    const card = (await res.json()) as { supportedInterfaces: Array<{ url: string; protocolVersion: string }> };
    expect(card.supportedInterfaces).toEqual([
      { url: `${gateway.publicUrl}/a2a/echo-v03`, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
      { url: `${gateway.publicUrl}/a2a/echo-v03`, protocolBinding: "JSONRPC", protocolVersion: "0.3" },
    ]);
  });

  it("refuses an unknown agent with a 404 JSON error and a caller without a key with 401", async () => {
    const unknown = await withKey(cardUrl("nobody"));
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get("content-type")).toMatch(/application\/json/);
    expect(JSON.stringify(await unknown.json())).toMatch(/agent_not_found/);

    const anonymous = await fetch(cardUrl("echo-v1"));
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("content-type")).toMatch(/application\/json/);
    await anonymous.body?.cancel();
  });

  it("keeps serving the last good card when the agent's card turns invalid", async () => {
    await cardServed("echo-v1");
    const before = await statusUntil("echo-v1", (s) => s.card.fetchedAt != null);
    v1.serveCard({ name: 42, skills: "none" });
    try {
      const failed = await statusUntil("echo-v1", (s) => s.card.lastFailure != null && s.card.lastFailure.at > before.card.fetchedAt!, 30_000);
      expect(failed.card.fetchedAt).toBe(before.card.fetchedAt);
      expect(failed.card.lastFailure!.reasons.length).toBeGreaterThan(0);
      const card = await new DefaultAgentCardResolver({ fetchImpl: withKey }).resolve(`${gateway.publicUrl}/a2a/echo-v1/`);
      expect(card.name).toBe("echo-v1");
      expect(card.skills.map((s) => s.id)).toEqual(["summarize"]);
    } finally {
      v1.serveCard(undefined);
    }
  });

  it("probes an agent with healthCheck after its first use, and a stopped agent turns unhealthy", async () => {
    const unprobed = (await statuses()).find((a) => a.name === "echo-v1")!;
    expect(unprobed).toMatchObject({ probed: false, status: "unknown" });
    await cardServed("flaky");
    await statusUntil("flaky", (s) => s.probed && s.status === "healthy");
    await flaky.close();
    const down = await statusUntil("flaky", (s) => s.status === "unhealthy");
    expect(down.lastReason).toMatch(/^network_error|^timeout/);
    // The probes were GETs of the card, none carried a caller's credential, and no message was sent.
    expect(flaky.received.length).toBeGreaterThan(0);
    for (const r of flaky.received) {
      expect(r).toMatchObject({ method: "GET", path: "/.well-known/agent-card.json" });
      expect(JSON.stringify(r.headers)).not.toContain(DEMO_KEY);
    }
    for (const r of [...v1.received, ...v03.received]) expect(JSON.stringify(r.headers)).not.toContain(DEMO_KEY);
  });
});
