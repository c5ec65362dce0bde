import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ExplainAnswer } from "../../src/kinds/model/explain-answer.ts";
import { signalText } from "../../src/http/console-explain.ts";
import { ADMIN_TOKEN, startStack, type Stack } from "../e2e/support/stack.ts";
import { formatCount } from "../../src/http/console-format.ts";
import { launchChromium, signIn, tableRows } from "./support/browser.ts";

const CONSOLE = "/admin/console";

type RoutesJson = { entrypoints: { name: string; routes: { name: string }[]; decisions: { name: string; when: unknown }[] }[] };

describe("the console's Routes page and explain form in Chromium", () => {
  let stack: Stack;
  let browser: Browser;

  beforeAll(async () => {
    [stack, browser] = await Promise.all([startStack(), launchChromium()]);
  });

  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  /** A signed-in page in a fresh browser context, closed with the context after `body`. */
  async function withPage(body: (page: Page) => Promise<void>): Promise<void> {
    const ctx: BrowserContext = await browser.newContext();
    try {
      const page = await ctx.newPage();
      await signIn(page, stack.gateway.adminUrl, ADMIN_TOKEN);
      await body(page);
    } finally {
      await ctx.close();
    }
  }

  /** What `POST /admin/explain` answers for the same question, asked directly. */
  async function explainDirectly(body: Record<string, unknown>): Promise<ExplainAnswer> {
    const res = await stack.admin("/admin/explain", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    expect(res.status).toBe(200);
    return (await res.json()) as ExplainAnswer;
  }

  /** The explain page's signals table as name → value text. */
  async function shownSignals(page: Page): Promise<Record<string, string>> {
    const rows = await tableRows(page, "#explain-signals table");
    return Object.fromEntries(rows.map((r) => [r[0]!, r[2]!]));
  }

  it("asks for a session, and for the CSRF token before it explains", async () => {
    const ctx = await browser.newContext();
    try {
      const page = await ctx.newPage();
      for (const path of ["/routes", "/explain"]) {
        await page.goto(`${stack.gateway.adminUrl}${CONSOLE}${path}`);
        expect(new URL(page.url()).pathname).toBe(`${CONSOLE}/login`);
      }
      await signIn(page, stack.gateway.adminUrl, ADMIN_TOKEN);
      const origin = new URL(stack.gateway.adminUrl).origin;
      const r = await page.request.post(`${stack.gateway.adminUrl}${CONSOLE}/explain`, { form: { caller: "demo/demo", protocol: "openai-chat", body: "{}" }, headers: { origin }, maxRedirects: 0 });
      expect(r.status()).toBe(403);
      expect(await r.text()).toContain("CSRF");
    } finally {
      await ctx.close();
    }
  });

  it("lists every entrypoint's decisions as GET /admin/routes describes them, in the order they are tried, then the default", async () => {
    await withPage(async (page) => {
      // Two requests the `code` decision serves, so its row has a figure to show.
      for (const content of ["fix this bug in my function", "why does my code throw an exception"]) {
        await stack.client.chat.completions.create({ model: "sluice-auto", messages: [{ role: "user", content }] });
      }
      await page.goto(`${stack.gateway.adminUrl}${CONSOLE}/routes`);
      const traffic = (await (await stack.admin("/admin/traffic")).json()) as { routes: { entrypoint: string; route: string; requests: number }[] };
      expect(await page.textContent("header a.on")).toBe("Routes");
      const routes = (await (await stack.admin("/admin/routes")).json()) as RoutesJson;
      expect(routes.entrypoints.length).toBeGreaterThan(1);
      const auto = routes.entrypoints.find((e) => e.name === "sluice-auto")!;
      // The API lists decisions highest priority first, as the decide phase tries them.
      expect(auto.decisions.map((d) => d.name)).toEqual(["jailbreak", "long-prompt", "code", "support"]);
      for (const ep of routes.entrypoints) {
        const section = page.locator(`section[data-entrypoint="${ep.name}"]`);
        const names = await section.locator("tbody tr td:first-child strong").allTextContents();
        expect(names).toEqual([...ep.decisions.map((d) => d.name), ...ep.routes.map((r) => r.name), "default"]);
        // Each decision's requests in this isolate's window, as GET /admin/traffic counts them.
        expect(await section.locator("thead th").last().textContent()).toBe("Requests, last 15 min");
        const shown = (await tableRows(page, `section[data-entrypoint="${ep.name}"] table`)).map((r) => r.at(-1));
        const counted = [...ep.decisions.map((d) => d.name), ...ep.routes.map((r) => r.name), "default"].map((name) => formatCount(traffic.routes.find((r) => r.entrypoint === ep.name && r.route === name)?.requests ?? 0));
        expect(shown).toEqual(counted);
      }
      expect(traffic.routes.find((r) => r.entrypoint === "sluice-auto" && r.route === "code")?.requests).toBe(2);
      const autoRows = await tableRows(page, 'section[data-entrypoint="sluice-auto"] table');
      expect(autoRows[0]!.slice(1, 3)).toEqual(["100", "jailbreak is on"]);
      expect(autoRows[2]![2]).toBe('topic is "code"');
      expect(autoRows[2]![3]).toContain("chat-large");
      const chatRows = await tableRows(page, 'section[data-entrypoint="sluice-chat"] table');
      expect(chatRows[0]![2]).toBe('header x-sluice-tier in ["premium"]');
      expect(await page.locator("#signals tbody tr td:first-child").allTextContents()).toEqual(expect.arrayContaining(["topic", "jailbreak", "prompt-tokens"]));
    });
  });

  it("explains a pasted request as POST /admin/explain does: the decision a signal chose, every signal's value, the refusal", async () => {
    await withPage(async (page) => {
      await page.goto(`${stack.gateway.adminUrl}${CONSOLE}/routes`);
      await Promise.all([page.waitForURL((u) => u.pathname === `${CONSOLE}/explain`), page.click('section[data-entrypoint="sluice-auto"] a[href*="explain"]')]);
      // The form starts filled for the entrypoint it was opened from, as the demo key.
      const body = await page.inputValue("#explain-body");
      expect(JSON.parse(body)).toMatchObject({ model: "sluice-auto" });
      expect(await page.inputValue('select[name="caller"]')).toBe("demo/demo");
      expect(await page.textContent("#explain-form")).toContain("x-sluice-tier");

      const [res] = await Promise.all([page.waitForResponse((r) => r.request().method() === "POST"), page.click('#explain-form button[type="submit"]')]);
      expect(res.status()).toBe(200);
      const api = await explainDirectly({ request: JSON.parse(body), protocol: "openai-chat", tenant: "demo", key: "demo" });
      // The demo's example is a jailbreak: a local signal decides it, and the decision's plugin refuses it.
      expect(api.decision).toBe("jailbreak");
      expect(api.signals.jailbreak).toMatchObject({ state: "known", value: { matched: true } });
      expect(await page.textContent("#explain-decision")).toBe(api.decision);
      expect(await shownSignals(page)).toEqual(Object.fromEntries(Object.entries(api.signals).map(([n, v]) => [n, signalText(v)])));
      expect(api.outcome).toMatchObject({ kind: "refused", phase: "plugins" });
      const o = api.outcome as Extract<ExplainAnswer["outcome"], { kind: "refused" }>;
      expect(await page.textContent("#explain-outcome")).toBe(`refused at plugins: ${o.status} ${o.code} — ${o.message}`);
      expect((await tableRows(page, "#explain-plugins table")).map((r) => r[0])).toEqual(api.plugins.map((p) => p.plugin));
      // The raw answer is there too, the same but for the request id each explain gets.
      const raw = JSON.parse((await page.textContent("#explain-raw"))!) as ExplainAnswer;
      expect({ ...raw, requestId: "" }).toEqual({ ...api, requestId: "" });
      // What was asked stays in the form.
      expect(await page.inputValue("#explain-body")).toBe(body);
    });
  });

  it("passes trusted headers to the explain: a header route is chosen, with its plan's candidate backends", async () => {
    await withPage(async (page) => {
      await page.goto(`${stack.gateway.adminUrl}${CONSOLE}/explain?entrypoint=sluice-chat&protocol=anthropic-messages&caller=demo/limited`);
      // The URL's choices are the form's: the example body in the protocol's shape, the key named.
      expect(await page.inputValue('select[name="caller"]')).toBe("demo/limited");
      expect(await page.inputValue('select[name="protocol"]')).toBe("anthropic-messages");
      expect(JSON.parse(await page.inputValue("#explain-body"))).toMatchObject({ model: "sluice-chat", max_tokens: 256 });
      await page.selectOption('select[name="caller"]', "demo/demo");
      await page.selectOption('select[name="protocol"]', "openai-chat");
      const request = { model: "sluice-chat", messages: [{ role: "user", content: "hello there" }] };
      await page.fill("#explain-body", JSON.stringify(request));
      await page.fill("#explain-headers", "X-Sluice-Tier: premium");
      await Promise.all([page.waitForResponse((r) => r.request().method() === "POST" && r.status() === 200), page.click('#explain-form button[type="submit"]')]);
      const api = await explainDirectly({ request, tenant: "demo", key: "demo", headers: { "x-sluice-tier": "premium" } });
      expect(api.decision).toBe("premium");
      expect(await page.textContent("#explain-decision")).toBe("premium");
      expect(await shownSignals(page)).toEqual(Object.fromEntries(Object.entries(api.signals).map(([n, v]) => [n, signalText(v)])));
      const plan = await tableRows(page, "#explain-plan table");
      expect(plan.map((r) => r[1]!.split(" ")[0])).toEqual(api.plan!.flat().map((m) => m.model));
      for (const [i, m] of api.plan!.flat().entries()) for (const c of m.candidates) expect(plan[i]![4]).toContain(c.backend);
      expect(await page.textContent("#explain-outcome")).toContain("would be sent");
    });
  });

  it("takes a body larger than the console's other forms allow (the explain form is bounded by the gateway's own body limit)", async () => {
    await withPage(async (page) => {
      await page.goto(`${stack.gateway.adminUrl}${CONSOLE}/explain?entrypoint=sluice-auto`);
      // Over 16 KiB as typed and about three times that URL-encoded: the prompt-tokens decision holds.
      const request = { model: "sluice-auto", messages: [{ role: "user", content: "Summarise this log, please. ".repeat(1000) }] };
      await page.fill("#explain-body", JSON.stringify(request));
      const [res] = await Promise.all([page.waitForResponse((r) => r.request().method() === "POST"), page.click('#explain-form button[type="submit"]')]);
      expect(res.status()).toBe(200);
      const api = await explainDirectly({ request, tenant: "demo", key: "demo" });
      expect(api.decision).toBe("long-prompt");
      expect(await page.textContent("#explain-decision")).toBe("long-prompt");
      expect(await shownSignals(page)).toEqual(Object.fromEntries(Object.entries(api.signals).map(([n, v]) => [n, signalText(v)])));
    });
  });

  it("keeps what was typed and says what is wrong: bad JSON, an untrusted header (HTTP 400)", async () => {
    await withPage(async (page) => {
      await page.goto(`${stack.gateway.adminUrl}${CONSOLE}/explain`);
      const broken = '{"model": "sluice-auto", "messages": [ {"role": "user"';
      await page.fill("#explain-body", broken);
      await page.fill("#explain-headers", "x-sluice-tier: premium");
      const [res] = await Promise.all([page.waitForResponse((r) => r.request().method() === "POST"), page.click('#explain-form button[type="submit"]')]);
      expect(res.status()).toBe(400);
      expect(await page.textContent("#explain-error")).toContain("The request body is not JSON");
      expect(await page.inputValue("#explain-body")).toBe(broken);
      expect(await page.inputValue("#explain-headers")).toBe("x-sluice-tier: premium");
      expect(await page.locator("#explain-answer").count()).toBe(0);

      // Well-formed, but a header no decision may read: the admin API's refusal, the form kept.
      const good = JSON.stringify({ model: "sluice-auto", messages: [{ role: "user", content: "hi" }] });
      await page.fill("#explain-body", good);
      await page.fill("#explain-headers", "x-forwarded-for: 10.0.0.1");
      const [res2] = await Promise.all([page.waitForResponse((r) => r.request().method() === "POST"), page.click('#explain-form button[type="submit"]')]);
      expect(res2.status()).toBe(400);
      expect(await page.textContent("#explain-error")).toContain("not a trusted header");
      expect(await page.inputValue("#explain-body")).toBe(good);
      expect(await page.inputValue("#explain-headers")).toBe("x-forwarded-for: 10.0.0.1");
    });
  });
});
