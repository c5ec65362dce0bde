import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, startStack, type Stack } from "../e2e/support/stack.ts";
import { formatCount, formatMoney } from "../../src/http/console-format.ts";
import { eventually, launchChromium, signIn, tableRows } from "./support/browser.ts";

const CONSOLE = "/admin/console";

interface Figures {
  name: string;
  requests: number;
  success: number;
  cancelled: number;
  errors: { client: number; upstream: number; gateway: number };
}
interface Traffic {
  perMinute: { at: number; requests: number; errors: number }[];
  entrypoints: Figures[];
  backends: Figures[];
}
interface Scope {
  scope: string;
  kind: string;
  requests: number;
  tokens: number;
  cost: { currency: string; micros: number }[];
  models: { model: string; currency: string; requests: number; tokens: number; micros: number }[];
}

const counts = (f: Figures) => [f.requests, f.success, f.errors.client, f.errors.upstream, f.errors.gateway, f.cancelled].map(formatCount);
const money = (s: Scope) => s.cost.map((c) => formatMoney(c.micros, c.currency)).join(" + ");

describe("the console's overview in Chromium, checked against the admin API", () => {
  let stack: Stack;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    [stack, browser] = await Promise.all([startStack(), launchChromium()]);
    // Traffic of every kind the page tells apart: tasks of different cost, plain calls, a stream, a refusal.
    for (const [task, n] of [["ov-big", 3], ["ov-small", 1]] as const) {
      for (let i = 0; i < n; i++) {
        await stack.client.chat.completions.create({ model: "sluice-chat", messages: [{ role: "user", content: `task ${task} call ${i} ${"word ".repeat(20 * (i + 1))}` }] }, { headers: { "x-sluice-task-id": task } });
      }
    }
    await stack.client.chat.completions.create({ model: "sluice-chat", messages: [{ role: "user", content: "plain" }] });
    const stream = await stack.client.chat.completions.create({ model: "sluice-chat", stream: true, messages: [{ role: "user", content: "a stream" }] });
    for await (const _ of stream) void _;
    await expect(stack.client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }] })).rejects.toMatchObject({ status: 404 });
    // The call ledger is written off the request path: wait until both tasks are in it.
    await eventually(async () => {
      const r = (await (await stack.admin("/admin/tasks?tenant=demo&sort=spend")).json()) as { tasks: { taskId: string; calls: number }[] };
      return r.tasks.find((t) => t.taskId === "ov-big")?.calls === 3 && r.tasks.some((t) => t.taskId === "ov-small") ? true : undefined;
    });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    await signIn(page, stack.gateway.adminUrl, ADMIN_TOKEN);
  });

  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it("is the admin's home after signing in", () => {
    expect(new URL(page.url()).pathname).toBe(`${CONSOLE}/overview`);
  });

  it("shows this isolate's traffic per entrypoint and backend as GET /admin/traffic counts it, and charts it per minute", async () => {
    await page.goto(`${stack.gateway.adminUrl}${CONSOLE}/overview?tenant=demo`);
    // Admin calls are not traffic: the API answers what the page was rendered from.
    const api = (await (await stack.admin("/admin/traffic")).json()) as Traffic;
    const entry = api.entrypoints.find((e) => e.name === "sluice-chat")!;
    expect(entry.requests).toBe(6);
    expect(api.entrypoints.reduce((a, e) => a + e.errors.client, 0)).toBe(1);
    const rows = await tableRows(page, "#traffic-entrypoints table");
    expect(rows.map((r) => [r[0], ...r.slice(1, 7)])).toEqual(api.entrypoints.map((e) => [e.name, ...counts(e)]));
    // Latency and TTFT quantiles are written with their unit.
    const chat = rows.find((r) => r[0] === "sluice-chat")!;
    for (const cell of chat.slice(8, 12)) expect(cell).toMatch(/^\d[\d,.]* (ms|s)$/);
    const backends = await tableRows(page, "#traffic-backends table");
    expect(backends.map((r) => [r[0], ...r.slice(1, 7)])).toEqual(api.backends.map((b) => [b.name, ...counts(b)]));
    // The chart's columns stand for the API's minutes.
    const columns = await page.locator("#traffic-per-minute rect.bar").evaluateAll((els) => els.map((e) => Number((e as unknown as { getAttribute(n: string): string }).getAttribute("data-requests"))));
    expect(columns).toEqual(api.perMinute.map((m) => m.requests));
    await expect(page.locator("#traffic-per-minute").getAttribute("role")).resolves.toBe("img");
  });

  it("shows spend by tenant, model and key as the ledger's rollups have it, in money", async () => {
    await page.goto(`${stack.gateway.adminUrl}${CONSOLE}/overview?tenant=demo`);
    const spend = (await (await stack.admin("/admin/budgets/demo/spend")).json()) as { scopes: Scope[] };
    const root = spend.scopes.find((s) => s.kind === "tenant")!;
    expect(root.requests).toBeGreaterThanOrEqual(6);
    const tenants = await tableRows(page, "#spend-tenants table");
    expect(tenants.find((r) => r[0] === "demo")).toEqual(["demo", money(root), formatCount(root.requests), formatCount(root.tokens)]);
    expect(tenants.find((r) => r[0] === "demo")![1]).toMatch(/^\$\d[\d,]*\.\d{2,6}$/);
    const models = await tableRows(page, "#spend-models table");
    expect(models).toEqual(root.models.map((m) => [m.model, formatMoney(m.micros, m.currency), formatCount(m.requests), formatCount(m.tokens)]));
    const keys = await tableRows(page, "#top-keys table");
    expect(keys).toEqual(spend.scopes.filter((s) => s.kind === "key").map((s) => [s.scope.slice(4), money(s), formatCount(s.requests), formatCount(s.tokens)]));
    // The day chart has today's spend as the daily rollups say.
    const days = (await (await stack.admin("/admin/budgets/demo/usage?by=day")).json()) as { days: { day: string; cost: { micros: number }[] }[] };
    const today = days.days.at(-1)!;
    const bar = page.locator(`section[data-spend-tenant="demo"] rect.bar[data-day="${today.day}"]`);
    await expect(bar.getAttribute("data-micros")).resolves.toBe(String(today.cost[0]!.micros));
  });

  it("lists the costliest tasks first, as GET /admin/tasks?sort=spend does", async () => {
    await page.goto(`${stack.gateway.adminUrl}${CONSOLE}/overview?tenant=demo`);
    const api = (await (await stack.admin("/admin/tasks?tenant=demo&sort=spend&limit=10")).json()) as { tasks: { taskId: string; costMicros: number; currency: string; calls: number }[] };
    expect(api.tasks[0]!.taskId).toBe("ov-big");
    const rows = await tableRows(page, "#top-tasks table");
    expect(rows.map((r) => [r[0], r[2], r[3]])).toEqual(api.tasks.map((t) => [t.taskId, formatMoney(t.costMicros, t.currency), formatCount(t.calls)]));
  });

  it("shows the budgets nearest their limit and the pending approvals as the API counts them", async () => {
    await page.goto(`${stack.gateway.adminUrl}${CONSOLE}/overview?tenant=demo`);
    type Limit = { limit: number; spent: number; held: number; pending: number };
    const balances = (await (await stack.admin("/admin/budgets/demo/balance")).json()) as { balances: ({ scope: string } & Partial<Record<"money" | "tokens" | "balance", Limit>>)[] };
    const limited = balances.balances.flatMap((b) => (["money", "tokens", "balance"] as const).flatMap((m) => (b[m] && b[m].limit > 0 ? [{ scope: b.scope, full: (b[m].spent + b[m].held + b[m].pending) / b[m].limit }] : [])));
    const fullest = limited.sort((a, b) => b.full - a.full || (a.scope < b.scope ? -1 : 1))[0]!;
    const rows = await tableRows(page, "#nearest-limits table");
    expect(rows[0]!.slice(0, 2)).toEqual(["demo", fullest.scope]);
    const approvals = (await (await stack.admin("/admin/approvals?tenant=demo&state=pending")).json()) as { approvals: unknown[] };
    const pending = await tableRows(page, "#pending table");
    expect(pending.find((r) => r[0] === "demo")![1]).toBe(formatCount(approvals.approvals.length));
    // The page fits a 1280-px window.
    expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(1280);
  });
});
