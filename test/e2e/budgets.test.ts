import Anthropic from "@anthropic-ai/sdk";
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshFetch } from "./support/raw-http.ts";
import { stringify } from "yaml";
import { startGateway, type RunningGateway } from "../../local-stack/stack.ts";
import { ADMIN_TOKEN, allowingSimulators, BACKEND_PROTOCOLS, bundledConfig, expectNothingLeft, generationCount, perProtocolConfig, startProtocolSimulator, type ProtocolSimulator } from "./support/stack.ts";


const BACKENDS = BACKEND_PROTOCOLS;
const KEYS = { cap: "sk-e2e-cap", open: "sk-e2e-open", rate: "sk-e2e-rate", prepaid: "sk-e2e-prepaid", bulk: "sk-e2e-bulk", quiet: "sk-e2e-quiet" } as const;
const sha = (k: string) => createHash("sha256").update(k).digest("hex");
/** One capped project and key per backend protocol, so each race starts from an empty window. */
const capKey = (backend: string) => `sk-e2e-cap-${backend}`;

/** K worst cases fit the capped project exactly: bound of the input bytes + 8, plus max_tokens. */
const K = 7;
// Slow enough that every racing call is judged before the first admitted one settles (a settled
// call frees what its usage did not spend): at 3 s a loaded machine once admitted 10, not 7.
const CAP_PROMPT = "cap [[sim latency-ms=8000]]";
const CAP_MAX_TOKENS = 50;
const WORST = 8 + Buffer.byteLength(CAP_PROMPT) + CAP_MAX_TOKENS;

let sim: ProtocolSimulator;
let gateway: RunningGateway;

beforeAll(async () => {
  sim = await startProtocolSimulator();
  const { backends, publication: pub } = perProtocolConfig(
    sim.url,
    ["chat", "streaming", "stream-usage", "tools"],
    { version: "e2e-1", currency: "USD", inputPerMTok: 3, outputPerMTok: 15, cachedInputPerMTok: 1 },
    { retry: { maxAttempts: 3 } },
  );
  pub.tenants = [
    {
      id: "acme",
      limits: { money: { limit: 100, currency: "USD", period: "30d" } },
      teams: [
        {
          id: "research",
          projects: [
            { id: "capped", limits: { tokens: { limit: K * WORST, window: "1h" } } },
            ...BACKENDS.map((b) => ({ id: `capped-${b}`, limits: { tokens: { limit: K * WORST, window: "1h" } } })),
            { id: "open" },
          ],
        },
        { id: "ops", limits: { money: { limit: 50, currency: "USD", period: "1d" } } },
      ],
      endUsers: { header: "x-sluice-end-user", limits: { money: { limit: 0.1, currency: "USD", period: "1d" } } },
      apiKeys: [
        { id: "cap", sha256: sha(KEYS.cap), entrypoints: ["*"], chargeTo: "research/capped" },
        ...BACKENDS.map((b) => ({ id: `cap-${b}`, sha256: sha(capKey(b)), entrypoints: ["*"], chargeTo: `research/capped-${b}` })),
        { id: "open", sha256: sha(KEYS.open), entrypoints: ["*"], chargeTo: "research/open", exposeBudget: true },
        { id: "rate", sha256: sha(KEYS.rate), entrypoints: ["*"], chargeTo: "ops", limits: { requests: { perMinute: 1, burst: 2 } } },
        { id: "prepaid", sha256: sha(KEYS.prepaid), entrypoints: ["*"], chargeTo: "ops", limits: { balance: { currency: "USD" } } },
      ],
    },
  ];
  // A striped tenant: 4 ledger objects, each holding exactly 2 of its 8 worst cases.
  pub.tenants.push({
    id: "bulk",
    limits: { tokens: { limit: 8 * WORST, window: "1h" } },
    ledger: { stripes: 4 },
    apiKeys: [{ id: "bulk", sha256: sha(KEYS.bulk), entrypoints: ["*"] }],
  });
  // A second plain tenant, whose path goes idle after acme's (the idle lease test).
  pub.tenants.push({
    id: "quiet",
    limits: { money: { limit: 100, currency: "USD", period: "30d" } },
    apiKeys: [{ id: "quiet", sha256: sha(KEYS.quiet), entrypoints: ["*"] }],
  });
  const gw = allowingSimulators(bundledConfig("gateway"), sim.url);
  gw.breaker = { enabled: false };
  gateway = await startGateway({ adminToken: ADMIN_TOKEN, secrets: sim.secrets, config: { backends: stringify(backends), publication: stringify(pub), gateway: stringify(gw) } });
});

afterAll(async () => {
  try {
    if (gateway) await expectNothingLeft(gateway.adminUrl);
  } finally {
    await Promise.all([gateway?.stop(), sim?.stop()]);
  }
});

// Bursts of concurrent calls seconds apart: each takes a fresh connection (see freshFetch).
const chat = (key: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  freshFetch(`${gateway.publicUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: "via-openai-chat", ...body }),
  });
const admin = async (path: string, init: RequestInit = {}): Promise<any> => {
  const res = await fetch(`${gateway.adminUrl}${path}`, { ...init, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json", ...(init.headers ?? {}) } });
  return { status: res.status, ...((await res.json()) as object) };
};
const attemptIds = (res: Response) => (res.headers.get("x-sluice-attempts") ?? "").split(", ").filter((s) => s !== "");

/** The ledger record of an attempt once its settlement has landed (settlement runs after the response). */
async function settledRecord(id: string): Promise<any> {
  const until = Date.now() + 5000;
  for (;;) {
    const r = await admin(`/admin/budgets/acme/attempts/${id}`);
    if (r.status === 200 && r.attempt.state !== "held") return r.attempt;
    if (Date.now() > until) throw new Error(`attempt ${id} still ${r.attempt?.state ?? r.status}\n${gateway.output().split("\n").slice(-15).join("\n")}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

describe("strict budgets through the HTTP API", () => {
  it.each(BACKENDS)(`admits exactly ${K} of 64 concurrent requests to the %s backend whose worst cases fit ${K} times, and spend stays under the limit`, async (backend) => {
    const scope = `project:research/capped-${backend}`;
    const servedBefore = await generationCount(sim);
    const startedAt = Date.now();
    const answers = await Promise.all(
      Array.from({ length: 64 }, () => chat(capKey(backend), { model: `via-${backend}`, max_tokens: CAP_MAX_TOKENS, messages: [{ role: "user", content: CAP_PROMPT }] })),
    );
    const ok = answers.filter((r) => r.status === 200);
    const refused = answers.filter((r) => r.status !== 200);
    expect(ok).toHaveLength(K);
    for (const r of refused) {
      expect(r.status).toBe(429);
      expect(r.headers.get("x-sluice-error-code")).toBe("token_limit_exceeded");
      expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
      const body = (await r.json()) as any;
      expect(body.error.type).toBe("rate_limit_error");
      expect(body.error.details[0]).toMatchObject({ scope, metric: "tokens", reason: "token_limit_exceeded" });
      expect(body.error.message).toContain(scope);
    }
    const used = (await Promise.all(ok.map(async (r) => ((await r.json()) as any).usage.total_tokens as number))).reduce((a, b) => a + b, 0);
    // Refused requests never reached the provider: it saw exactly the admitted ones (a token mint is no generation).
    expect((await generationCount(sim)) - servedBefore).toBe(K);
    for (const r of ok) expect((await settledRecord(attemptIds(r)[0]!)).state).toBe("settled");
    const { balances } = await admin(`/admin/budgets/acme/balance?scope=${scope}`);
    // The balance shows the current hour's window. A run that crosses the hour booked its spend in
    // the window before (each charge stays in the window it was admitted in): the new one is empty.
    const rolledOver = balances[0].tokens.windowStart > startedAt;
    expect(balances[0].tokens).toMatchObject({ limit: K * WORST, held: 0, pending: 0 });
    if (rolledOver) expect(balances[0].tokens.spent).toBeLessThanOrEqual(used);
    else expect(balances[0].tokens.spent).toBe(used);
    expect(used).toBeLessThanOrEqual(K * WORST);
  });

  it("keeps the cap exact for a tenant striped over 4 ledger objects: exactly 8 of 64", async () => {
    const answers = await Promise.all(
      Array.from({ length: 64 }, () => chat(KEYS.bulk, { max_tokens: CAP_MAX_TOKENS, messages: [{ role: "user", content: CAP_PROMPT }] })),
    );
    expect(answers.filter((r) => r.status === 200)).toHaveLength(8);
    expect(answers.filter((r) => r.status === 429)).toHaveLength(56);
    for (const r of answers) await r.arrayBuffer();
    const { balances } = await admin("/admin/budgets/bulk/balance?scope=tenant:bulk");
    expect(balances[0].tokens.limit).toBe(8 * WORST);
    expect(balances[0].tokens.spent + balances[0].tokens.held).toBeLessThanOrEqual(8 * WORST);
  });

  it.each(BACKENDS)("settles a stream from a %s backend at the usage it reported, cached input included, with the price version", async (backend) => {
    const CACHED = 5;
    const res = await chat(KEYS.open, { model: `via-${backend}`, stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: `stream please [[sim cached-tokens=${CACHED}]]` }] });
    expect(res.status).toBe(200);
    const text = await res.text();
    const usageLine = text.split("\n").filter((l) => l.startsWith("data: {") && l.includes('"usage":{')).at(-1)!;
    const usage = JSON.parse(usageLine.slice("data: ".length)).usage;
    // The provider's cached figure, whatever its wire called it, reaches the client as Chat's.
    expect(usage.prompt_tokens_details?.cached_tokens).toBe(CACHED);
    const rec = await settledRecord(attemptIds(res)[0]!);
    expect(rec.state).toBe("settled");
    expect(rec.settlement.actual.tokens).toBe(usage.total_tokens);
    expect(rec.settlement.usage).toMatchObject({ inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens, cachedInputTokens: CACHED });
    // 3 USD/MTok uncached input, 1 cached, 15 output: each token a whole number of micro-dollars.
    expect(rec.settlement.actual.micros).toBe((usage.prompt_tokens - CACHED) * 3 + CACHED * 1 + usage.completion_tokens * 15);
    expect(rec.meta).toMatchObject({ model: `m-${backend}@1`, priceVersion: "e2e-1" });
  });

  it("injects an output cap when the request has none, says so, and shows the key its remaining budget", async () => {
    const res = await chat(KEYS.open, { messages: [{ role: "user", content: "no cap" }] });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-sluice-max-output-tokens")).toBe("4096; injected");
    // Money reads as an amount of its currency (the tenant's limit is 100 USD), never as micro-units.
    const remaining = /(?:^|, )tenant:acme;money:USD=(\d+(?:\.\d{1,6})?)(?:,|$)/.exec(res.headers.get("x-sluice-budget-remaining") ?? "")?.[1];
    expect(remaining).toBeDefined();
    expect(Number(remaining)).toBeGreaterThan(0);
    expect(Number(remaining)).toBeLessThan(100);
    const { requests } = (await (await fetch(`${sim.url}/__sim/requests?limit=1`)).json()) as { requests: any[] };
    const last = requests[0];
    expect(last.body.max_completion_tokens).toBe(4096);
    // A key that may not see its budget gets no figures.
    const capped = await chat(KEYS.cap, { max_tokens: 5, messages: [{ role: "user", content: "x" }] });
    expect(capped.headers.get("x-sluice-budget-remaining")).toBeNull();
  });

  it("a retry reserves its own: the refused attempt is released, the served one settled", async () => {
    const res = await chat(KEYS.open, { max_tokens: 20, messages: [{ role: "user", content: `retry me ${Date.now()} [[sim status=429 times=1 retry-after=0]]` }] });
    expect(res.status).toBe(200);
    const [first, second] = attemptIds(res);
    expect((await settledRecord(first!)).state).toBe("released");
    expect((await settledRecord(second!)).state).toBe("settled");
  });

  it("keeps unknown usage held for reconciliation (cut stream, 5xx, client cancel), and an admin resolves it with an audit record", async () => {
    const cut = await chat(KEYS.open, { stream: true, max_tokens: 100, messages: [{ role: "user", content: "cut [[sim fault=cut-mid-stream cut-after=2]]" }] });
    await cut.text();
    const cutRec = await settledRecord(attemptIds(cut)[0]!);
    expect(cutRec).toMatchObject({ state: "pending_reconciliation", pendingReason: "unknown_usage" });
    expect(cutRec.settlement.actual).toBe("unknown");
    expect(cutRec.settlement.estimate.tokens).toBeGreaterThan(0);

    const failed = await chat(KEYS.open, { max_tokens: 100, messages: [{ role: "user", content: "boom [[sim status=500]]" }] });
    expect(failed.status).toBe(502);
    expect((await settledRecord(attemptIds(failed)[0]!)).state).toBe("pending_reconciliation");

    const bad = await chat(KEYS.open, { max_tokens: 100, messages: [{ role: "user", content: "refused [[sim status=400]]" }] });
    expect(bad.status).toBe(400);
    expect((await settledRecord(attemptIds(bad)[0]!)).state).toBe("released");

    const abort = new AbortController();
    const slow = await fetch(`${gateway.publicUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEYS.open}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "via-openai-chat", stream: true, max_tokens: 100, messages: [{ role: "user", content: "slow [[sim tokens=40 token-interval-ms=100]]" }] }),
      signal: abort.signal,
    });
    await slow.body!.getReader().read();
    abort.abort();
    const cancelled = await settledRecord(attemptIds(slow)[0]!);
    expect(cancelled.state).toBe("pending_reconciliation");

    const listed = await admin("/admin/budgets/acme/reconciliations");
    expect(listed.pending.map((p: any) => p.attemptId)).toEqual(expect.arrayContaining([cutRec.attemptId, cancelled.attemptId]));
    const resolved = await admin(`/admin/budgets/acme/reconciliations/${cutRec.attemptId}/resolve`, {
      method: "POST",
      body: JSON.stringify({ cost: 0.0002, tokens: 40, actor: "ops@acme", note: "provider invoice line 7" }),
    });
    expect(resolved.status).toBe(200);
    const after = await settledRecord(cutRec.attemptId);
    expect(after).toMatchObject({ state: "settled", settlement: { actual: { micros: 200, tokens: 40 }, resolvedBy: { actor: "ops@acme" } } });
    // Only attempts pending reconciliation can be resolved: a released one cannot be billed after the fact.
    const released = await admin(`/admin/budgets/acme/reconciliations/${attemptIds(bad)[0]}/resolve`, { method: "POST", body: JSON.stringify({ cost: 1, tokens: 1, actor: "ops@acme" }) });
    expect(released.status).toBe(400);
    const { audit } = await admin("/admin/budgets/acme/audit");
    expect(audit.some((a: any) => a.action === "resolve" && a.attemptId === cutRec.attemptId && a.actor === "ops@acme")).toBe(true);
  });

  it("a request-rate limit refuses past the burst, with retry-after, in the Anthropic envelope too", async () => {
    for (let i = 0; i < 2; i++) expect((await chat(KEYS.rate, { max_tokens: 5, messages: [{ role: "user", content: "r" }] })).status).toBe(200);
    const anthropic = new Anthropic({ apiKey: KEYS.rate, baseURL: gateway.publicUrl, maxRetries: 0 });
    const err = await anthropic.messages.create({ model: "via-openai-chat", max_tokens: 5, messages: [{ role: "user", content: "r" }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.RateLimitError);
    const e = err as InstanceType<typeof Anthropic.RateLimitError>;
    expect(e.headers?.get("x-sluice-error-code")).toBe("request_rate_exceeded");
    expect(Number(e.headers?.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect((e.error as any).error.message).toContain("key:rate");
  });

  it("a prepaid balance refuses until topped up, and a repeated top-up credits once", async () => {
    const before = await chat(KEYS.prepaid, { max_tokens: 10, messages: [{ role: "user", content: "p" }] });
    expect(before.status).toBe(402);
    expect(((await before.json()) as any).error).toMatchObject({ code: "balance_exhausted", type: "insufficient_quota" });
    const topUp = { scope: "key:prepaid", currency: "USD", amount: 1, opId: "invoice-1", actor: "billing@acme" };
    for (let i = 0; i < 2; i++) expect((await admin("/admin/budgets/acme/top-ups", { method: "POST", body: JSON.stringify(topUp) })).status).toBe(200);
    const after = await chat(KEYS.prepaid, { max_tokens: 10, messages: [{ role: "user", content: "p" }] });
    expect(after.status).toBe(200);
    await settledRecord(attemptIds(after)[0]!);
    const { balances } = await admin("/admin/budgets/acme/balance?scope=key:prepaid");
    expect(balances[0].balance).toMatchObject({ limit: 1_000_000, held: 0 });
    expect(balances[0].balance.spent).toBeGreaterThan(0);
  });

  it("an end user's own budget refuses by its name, leaving no reservation at the other levels", async () => {
    const held = async () => (await admin("/admin/budgets/acme/balance?scope=project:research/open&scope=tenant:acme")).balances.map((b: any) => b.money?.held ?? null);
    const before = await held();
    // Alice's daily 0.10 USD holds one worst case of a 4096-token answer (about 0.062 USD), not two.
    const first = chat(KEYS.open, { messages: [{ role: "user", content: "u [[sim latency-ms=800]]" }] }, { "x-sluice-end-user": "alice" });
    await new Promise((r) => setTimeout(r, 200));
    const res = await chat(KEYS.open, { messages: [{ role: "user", content: "u" }] }, { "x-sluice-end-user": "alice" });
    expect(res.status).toBe(429);
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    const body = (await res.json()) as any;
    expect(body.error).toMatchObject({ code: "budget_exceeded", type: "insufficient_quota" });
    expect(body.error.details[0]).toMatchObject({ scope: "user:alice", metric: "money:USD" });
    expect((await first).status).toBe(200);
    await settledRecord(attemptIds(await first)[0]!);
    expect(await held()).toEqual(before);
  });

  it("an admin override of a scope's limits wins over the publication until cleared, audited", async () => {
    const put = (body: unknown) => admin("/admin/budgets/acme/limits", { method: "PUT", body: JSON.stringify(body) });
    expect((await put({ scope: "key:open", limits: { tokens: { limit: 10, window: "1h" } } })).status).toBe(400);
    const set = await put({ scope: "key:open", limits: { tokens: { limit: 10, window: "1h" } }, actor: "ops@acme", note: "incident 12" });
    expect(set.status).toBe(200);
    const refused = await chat(KEYS.open, { max_tokens: 5, messages: [{ role: "user", content: "o" }] });
    // The override is smaller than one worst case: a client error, not a retry-later.
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as any).error.details[0]).toMatchObject({ scope: "key:open", metric: "tokens" });
    expect((await put({ scope: "key:open", limits: null, actor: "ops@acme" })).status).toBe(200);
    expect((await chat(KEYS.open, { max_tokens: 5, messages: [{ role: "user", content: "o" }] })).status).toBe(200);
    const { audit } = await admin("/admin/budgets/acme/audit");
    expect(audit.filter((a: any) => a.action === "set_limits" && a.scope === "key:open").map((a: any) => a.detail.override)).toEqual([{ tokens: { limit: 10, windowMs: 3_600_000 } }, null]);
  });

  it("returns both tenants' budget leases with no further traffic when their paths go idle at staggered times", async () => {
    const say = { max_tokens: 20, messages: [{ role: "user", content: "hello" }] };
    const first = await chat(KEYS.open, say);
    expect(first.status).toBe(200);
    // The second tenant's path goes idle well after the first's, inside the first one's idle second.
    const second = await chat(KEYS.quiet, { ...say, messages: [{ role: "user", content: "hello [[sim latency-ms=600]]" }] });
    expect(second.status).toBe(200);
    // Only the status is read until then: a budget read closes idle leases itself.
    const until = Date.now() + 5_000;
    for (;;) {
      const status = await admin("/admin/status");
      if (status.budgetLeases === 0) break;
      if (Date.now() > until) throw new Error(`${status.budgetLeases} budget lease(s) still held with nothing in flight`);
      await new Promise((res) => setTimeout(res, 50));
    }
    // The quiet tenant's path is this test's alone: its call was admitted from a lease, which came
    // back on its own (acme's path carries earlier tests' traffic, and may go one by one).
    expect((await admin(`/admin/budgets/acme/attempts/${attemptIds(first)[0]}`)).attempt).toMatchObject({ state: "settled" });
    expect((await admin(`/admin/budgets/quiet/attempts/${attemptIds(second)[0]}`)).attempt).toMatchObject({ state: "settled", fromLease: expect.any(String) });
  });

  it("reports usage by model for a scope", async () => {
    const r = await admin("/admin/budgets/acme/usage?scope=project:research/open");
    expect(r.status).toBe(200);
    const row = r.models.find((m: any) => m.model === "m-openai-chat@1");
    expect(row).toMatchObject({ priceVersion: "e2e-1" });
    expect(row.attempts).toBeGreaterThan(0);
    expect(row.settledMicros).toBeGreaterThan(0);
  });

  it("reports settled spend per UTC day from the daily rollups, equal to the usage by model over the same days", async () => {
    const DAY = 86_400_000;
    const today = Date.now() - (Date.now() % DAY);
    const range = `from=${today - DAY}&to=${today + DAY}`;
    const scope = "scope=project:research/open";
    const byModel = await admin(`/admin/budgets/acme/usage?${scope}&${range}`);
    const byDay = await admin(`/admin/budgets/acme/usage?by=day&${scope}&${range}`);
    expect(byDay).toMatchObject({ status: 200, by: "day", scope: "project:research/open", from: today - DAY, to: today + DAY, historyMs: 90 * DAY });
    expect(byDay.days.length).toBeGreaterThan(0);
    const sum = (rows: any[], f: (r: any) => number) => rows.reduce((a, r) => a + f(r), 0);
    const days: any[] = byDay.days;
    const models = days.flatMap((d) => d.models);
    expect(sum(models, (m) => m.micros)).toBe(sum(byModel.models, (m: any) => m.settledMicros));
    expect(sum(models, (m) => m.tokens)).toBe(sum(byModel.models, (m: any) => m.settledTokens));
    for (const d of days) {
      expect(d.day).toBe(new Date(d.dayStart).toISOString().slice(0, 10));
      expect(d.requests).toBe(sum(d.models, (m: any) => m.requests));
      expect(d.cost).toEqual([{ currency: "USD", micros: sum(d.models, (m: any) => m.micros), amount: (sum(d.models, (m: any) => m.micros) / 1e6).toFixed(6) }]);
    }
    const row = models.find((m) => m.model === "m-openai-chat@1");
    expect(row.micros).toBe(byModel.models.filter((m: any) => m.model === "m-openai-chat@1").reduce((a: number, m: any) => a + m.settledMicros, 0));
    // One model only; the tenant (its root scope) by default, over the last 30 days.
    const one = await admin(`/admin/budgets/acme/usage?by=day&${scope}&${range}&model=m-openai-chat@1`);
    expect(one.days.flatMap((d: any) => d.models.map((m: any) => m.model))).toEqual(one.days.map(() => "m-openai-chat@1"));
    const tenant = await admin("/admin/budgets/acme/usage?by=day");
    expect(tenant).toMatchObject({ status: 200, scope: "tenant:acme", from: today - 29 * DAY });
    expect(sum(tenant.days, (d: any) => d.cost[0]?.micros ?? 0)).toBeGreaterThanOrEqual(sum(days, (d) => d.cost[0]?.micros ?? 0));
    expect(await admin("/admin/budgets/acme/usage?by=week")).toMatchObject({ status: 400, error: { param: "by" } });
  });
});
