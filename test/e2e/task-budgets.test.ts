import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { ADMIN_TOKEN, allowingSimulators, bundledConfig, expectNothingLeft, perProtocolConfig, type Simulator } from "./support/stack.ts";

const KEYS = { agent: "sk-e2e-agent", sibling: "sk-e2e-sibling", strict: "sk-e2e-strict", rival: "sk-e2e-rival" } as const;
const sha = (k: string) => createHash("sha256").update(k).digest("hex");

/** K worst cases fit one task's tokens cap exactly: bound of the input bytes + 8, plus max_tokens. */
const K = 5;
const PROMPT = "step [[sim latency-ms=1000]]";
const MAX_TOKENS = 40;
const WORST = 8 + Buffer.byteLength(PROMPT) + MAX_TOKENS;

let sim: Simulator;
let gateway: RunningGateway;

beforeAll(async () => {
  sim = await startSimulatorProcess({ apiKey: SIMULATOR_API_KEY });
  const { backends, publication: pub } = perProtocolConfig(sim.url, ["chat", "streaming", "stream-usage", "tools"], { version: "e2e-1", currency: "USD", inputPerMTok: 3, outputPerMTok: 15 });
  pub.tenants = [
    {
      id: "acme",
      limits: { money: { limit: 100, currency: "USD", period: "30d" } },
      teams: [{ id: "agents", projects: [{ id: "loop", taskLimits: { tokens: { limit: K * WORST } } }, { id: "sibling" }] }],
      endUsers: { header: "x-sluice-end-user", limits: { money: { limit: 1, currency: "USD", period: "1d" } } },
      apiKeys: [
        { id: "agent", sha256: sha(KEYS.agent), entrypoints: ["*"], chargeTo: "agents/loop" },
        { id: "sibling", sha256: sha(KEYS.sibling), entrypoints: ["*"], chargeTo: "agents/sibling" },
        { id: "strict", sha256: sha(KEYS.strict), entrypoints: ["*"], chargeTo: "agents/loop", requireAttribution: ["task", "endUser"] },
      ],
    },
    { id: "rival", limits: { money: { limit: 100, currency: "USD", period: "30d" } }, apiKeys: [{ id: "rival", sha256: sha(KEYS.rival), entrypoints: ["*"] }] },
  ];
  const gw = allowingSimulators(bundledConfig("gateway"), sim.url);
  gw.breaker = { enabled: false };
  gateway = await startGateway({ adminToken: ADMIN_TOKEN, config: { backends: stringify(backends), publication: stringify(pub), gateway: stringify(gw) } });
});

afterAll(async () => {
  try {
    if (gateway) await expectNothingLeft(gateway.adminUrl);
  } finally {
    await Promise.all([gateway?.stop(), sim?.stop()]);
  }
});

const chat = (key: string, headers: Record<string, string> = {}) =>
  fetch(`${gateway.publicUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: "via-openai-chat", max_tokens: MAX_TOKENS, messages: [{ role: "user", content: PROMPT }] }),
  });
const served = async () => ((await (await fetch(`${sim.url}/__sim/stats`)).json()) as { total: number }).total;
const task = (id: string, more: Record<string, string> = {}) => ({ "x-sluice-task-id": id, ...more });

describe("per-task budgets and task binding", () => {
  it(`admits exactly ${K} of 40 parallel calls of one task whose cap fits ${K} worst cases`, async () => {
    const before = await served();
    const answers = await Promise.all(Array.from({ length: 40 }, () => chat(KEYS.agent, task("loop-1"))));
    const ok = answers.filter((r) => r.status === 200);
    expect(ok).toHaveLength(K);
    for (const r of answers.filter((a) => a.status !== 200)) {
      expect(r.status).toBe(429);
      expect(r.headers.get("x-sluice-error-code")).toBe("token_limit_exceeded");
      const body = (await r.json()) as any;
      expect(body.error.details[0]).toMatchObject({ scope: "task:loop-1", metric: "tokens" });
    }
    let used = 0;
    for (const r of ok) used += ((await r.json()) as any).usage.total_tokens as number;
    // The provider saw exactly the admitted calls, and they fit the task.
    expect((await served()) - before).toBe(K);
    expect(used).toBeLessThanOrEqual(K * WORST);
  });

  it("tells the caller the task's committed spend and what remains", async () => {
    const res = await chat(KEYS.agent, task("loop-2"));
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    expect(res.headers.get("x-sluice-task-spent")).toBe(`tokens=${WORST}`);
    expect(res.headers.get("x-sluice-task-remaining")).toBe(`tokens=${(K - 1) * WORST}`);
  });

  it("lowers the task's cap for one request by x-sluice-task-budget, in currency units", async () => {
    const res = await chat(KEYS.agent, task("loop-3", { "x-sluice-task-budget": "0.01" }));
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const spent = /money=(\d+)/.exec(res.headers.get("x-sluice-task-spent") ?? "")?.[1];
    const remaining = /money=(\d+)/.exec(res.headers.get("x-sluice-task-remaining") ?? "")?.[1];
    expect(Number(spent)).toBeGreaterThan(0);
    expect(Number(spent) + Number(remaining)).toBe(10_000);
    const bad = await chat(KEYS.agent, task("loop-3", { "x-sluice-task-budget": "lots" }));
    expect(bad.status).toBe(400);
    expect(bad.headers.get("x-sluice-error-code")).toBe("invalid_request");
    await bad.arrayBuffer();
  });

  it("refuses a task id bound to another tenant, and a child of another tenant's task", async () => {
    const mine = await chat(KEYS.agent, task("owned-1"));
    expect(mine.status).toBe(200);
    await mine.arrayBuffer();
    const before = await served();
    const forged = await chat(KEYS.rival, task("owned-1"));
    expect(forged.status).toBe(403);
    expect(forged.headers.get("x-sluice-error-code")).toBe("task_not_yours");
    expect(((await forged.json()) as any).error.type).toBe("permission_error");
    const child = await chat(KEYS.rival, task("rival-child", { "x-sluice-parent-task-id": "owned-1" }));
    expect(child.status).toBe(403);
    expect(child.headers.get("x-sluice-error-code")).toBe("task_not_yours");
    await child.arrayBuffer();
    expect((await served()) - before).toBe(0);
  });

  it("refuses a key of another project of the same tenant", async () => {
    const first = await chat(KEYS.agent, task("owned-2"));
    expect(first.status).toBe(200);
    await first.arrayBuffer();
    const other = await chat(KEYS.sibling, task("owned-2"));
    expect(other.status).toBe(403);
    expect(other.headers.get("x-sluice-error-code")).toBe("task_not_yours");
    await other.arrayBuffer();
  });

  it("refuses a request that leaves out required attribution instead of skipping the limit", async () => {
    const noTask = await chat(KEYS.strict, { "x-sluice-end-user": "u-1" });
    expect(noTask.status).toBe(400);
    expect(noTask.headers.get("x-sluice-error-code")).toBe("attribution_required");
    await noTask.arrayBuffer();
    const noUser = await chat(KEYS.strict, task("strict-1"));
    expect(noUser.status).toBe(400);
    expect(noUser.headers.get("x-sluice-error-code")).toBe("attribution_required");
    expect(((await noUser.json()) as any).error.message).toContain("x-sluice-end-user");
    const both = await chat(KEYS.strict, task("strict-1", { "x-sluice-end-user": "u-1" }));
    expect(both.status).toBe(200);
    await both.arrayBuffer();
  });
});
