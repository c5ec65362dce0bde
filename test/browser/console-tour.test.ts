import { mkdirSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import { Client as LegacyClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as LegacyTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../../local-stack/build.ts";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type Child, type RunningGateway } from "../../local-stack/stack.ts";
import { A2A_STATE_SECRET, startA2aV1Agent, type A2aTestAgent } from "../e2e/support/a2a-agents.ts";
import { startMcpTestServer, type McpTestServer } from "../e2e/support/mcp-test-server.ts";
import { ADMIN_TOKEN, backendsFor, bundledConfig, DEMO_KEY } from "../e2e/support/stack.ts";
import { accessibilityViolations, describeViolations, expectAccessible } from "./support/accessibility.ts";
import { eventually, launchChromium, signIn, tableRows } from "./support/browser.ts";

// A tour of every console page on a gateway with a little of everything to show: task calls,
// plain calls, a pending approval, a created key. Each page must pass axe's WCAG 2.1 A/AA rules.
// With SLUICE_SCREENSHOTS naming a folder (`npm run docs:screenshots` sets docs/console), each
// page is also written there as a PNG for docs/console.md: the tour that checks the pages is the
// one that photographs them, so the pictures show what the tests saw.

const CONSOLE = "/admin/console";
const APPROVER_TOKEN = "tour-approver-token";
const TASK = "research-agent-42";
const SHOTS = process.env.SLUICE_SCREENSHOTS ? (isAbsolute(process.env.SLUICE_SCREENSHOTS) ? process.env.SLUICE_SCREENSHOTS : join(ROOT, process.env.SLUICE_SCREENSHOTS)) : undefined;
/** Taller pages are cut here: a picture in the docs shows the top of the page, not all of it. */
const MAX_SHOT_HEIGHT = 2000;

/** Writes the page as `<name>.png` into the screenshot folder, when there is one. */
async function shoot(page: Page, name: string): Promise<void> {
  if (SHOTS === undefined) return;
  mkdirSync(SHOTS, { recursive: true });
  // The page's own height (not the window's), so a short page makes a short picture.
  const height = Math.min(MAX_SHOT_HEIGHT, Number(await page.evaluate("document.body.scrollHeight")));
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true, clip: { x: 0, y: 0, width: 1280, height }, animations: "disabled" });
}

describe("every console page passes an accessibility check", () => {
  let sim: Child & { url: string };
  let tools: McpTestServer;
  let agent: A2aTestAgent;
  let gateway: RunningGateway;
  let browser: Browser;
  let ctx: BrowserContext;
  let page: Page;
  let approvalId = "";
  let callId = "";
  const admin = (path: string, init: RequestInit = {}) => fetch(`${gateway.adminUrl}${path}`, { ...init, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json", ...(init.headers ?? {}) } });

  beforeAll(async () => {
    [sim, tools, browser, agent] = await Promise.all([startSimulatorProcess({ apiKey: SIMULATOR_API_KEY }), startMcpTestServer(), launchChromium(), startA2aV1Agent({ name: "summarizer" })]);
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    g.breaker = { enabled: true };
    g.mcp = { servers: [{ name: "tools", url: tools.url, era: "stateful" }], sessions: { secrets: ["MCP_SESSION_SECRET"] } };
    g.governance = { approverTokenSecret: "SLUICE_APPROVER_TOKEN", approvals: { stateSecret: "SLUICE_APPROVAL_STATE" } };
    g.a2a = { stateSecret: A2A_STATE_SECRET.name, agents: [{ name: "summarizer", card: agent.cardUrl }] };
    const p = bundledConfig("publication");
    p.mcp = { policy: { revision: "tour-1", rules: [{ id: "echo-approved", effect: "allow", principals: { tenants: ["demo"] }, servers: ["tools"], names: ["echo"], approval: "required" }] } };
    gateway = await startGateway({
      adminToken: ADMIN_TOKEN,
      secretNames: ["MCP_SESSION_SECRET", "SLUICE_APPROVER_TOKEN", "SLUICE_APPROVAL_STATE", A2A_STATE_SECRET.name],
      secrets: { MCP_SESSION_SECRET: "tour-mcp-session-secret-0123456789abc", SLUICE_APPROVER_TOKEN: APPROVER_TOKEN, SLUICE_APPROVAL_STATE: "tour-approval-state-secret", [A2A_STATE_SECRET.name]: A2A_STATE_SECRET.value },
      config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) },
    });

    // Traffic: a task over two sessions, two plain calls, a tool call that waits for a human.
    const chat = async (content: string, headers: Record<string, string> = {}) => {
      const res = await fetch(`${gateway.publicUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json", ...headers },
        body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content }] }),
      });
      await res.text();
      expect(res.status).toBe(200);
      return res.headers.get("x-request-id")!;
    };
    for (const [session, turn] of [["plan", "t1"], ["plan", "t2"], ["write", "t1"]] as const) {
      await chat(`task turn ${session}/${turn}`, { "x-sluice-task-id": TASK, "x-sluice-session-id": session, "x-sluice-turn-id": turn });
    }
    callId = await chat("a plain call");
    await chat("another plain call");
    const client = new LegacyClient({ name: "console-tour", version: "1.0.0" });
    try {
      await client.connect(new LegacyTransport(new URL(`${gateway.publicUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${DEMO_KEY}`, "x-sluice-task-id": TASK } } }));
      await expect(client.callTool({ name: "tools.echo", arguments: { text: "needs a human" } })).rejects.toMatchObject({ code: -32042 });
    } finally {
      await client.close().catch(() => undefined);
    }
    const created = await admin("/admin/keys", { method: "POST", body: JSON.stringify({ tenant: "demo", id: "ci-bot", chargeTo: "platform" }) });
    expect(created.status).toBe(201);
    await created.text();

    // The logs are written off the request path: wait until the pages will have them.
    approvalId = await eventually(async () => ((await (await admin("/admin/approvals?tenant=demo&state=pending")).json()) as { approvals: { id: string }[] }).approvals[0]?.id);
    await eventually(async () => {
      const { calls } = (await (await admin("/admin/calls?tenant=demo&limit=50")).json()) as { calls: { requestId: string }[] };
      return calls.some((c) => c.requestId === callId) ? true : undefined;
    });
    await eventually(async () => ((await admin(`/admin/tasks/${TASK}?tenant=demo`)).status === 200 ? true : undefined));

    ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 });
    page = await ctx.newPage();
    await signIn(page, gateway.adminUrl, ADMIN_TOKEN);
  });

  afterAll(async () => {
    await ctx?.close();
    await browser?.close();
    await gateway?.stop();
    await Promise.all([sim?.stop(), tools?.stop(), agent?.close()]);
  });

  /** Opens a console page (signed in, unless another page is given), checks it answered, passes axe, and photographs it. */
  async function visit(path: string, shot: string | undefined, on: Page = page): Promise<void> {
    const res = await on.goto(`${gateway.adminUrl}${CONSOLE}${path}`);
    expect(res!.status(), path).toBe(200);
    await expectAccessible(on, `${CONSOLE}${path}`);
    // Nothing scrolls sideways in a 1280-px window (WCAG's reflow asks for less; people ask for this).
    expect(await on.evaluate("document.documentElement.scrollWidth"), path).toBeLessThanOrEqual(1280);
    if (shot !== undefined) await shoot(on, shot);
  }

  it("the check itself finds faults: a page with known ones fails it, naming each", async () => {
    const p = await ctx.newPage();
    try {
      await p.setContent(`<!doctype html><html><head><title>faults</title></head><body><main><h1>Faults</h1><p style="color:#bbb;background:#fff">faint</p><a href="/x"></a><input type="text" name="q"></main></body></html>`);
      const found = await accessibilityViolations(p);
      expect(found.map((v) => v.id).sort()).toEqual(["color-contrast", "html-has-lang", "label", "link-name"]);
      expect(describeViolations(found)).toMatch(/^color-contrast \(serious\): .+\n {2}at p — .*contrast/m);
    } finally {
      await p.close();
    }
  });

  it("the sign-in page, blank and after a refused token", async () => {
    const anonymous = await browser.newContext({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 });
    try {
      const p = await anonymous.newPage();
      await visit("/login", "login", p);
      await p.fill('input[name="token"]', "not-the-token");
      await Promise.all([p.waitForResponse((r) => r.request().method() === "POST"), p.click('button[type="submit"]')]);
      await expectAccessible(p, "the refused sign-in");
    } finally {
      await anonymous.close();
    }
  });

  it("the overview, with its traffic and spend charts", async () => {
    await visit("/overview?tenant=demo", "overview");
    for (const chart of await page.locator("main svg").all()) {
      expect(await chart.getAttribute("role")).toBe("img");
      expect((await chart.locator("desc").textContent())?.length).toBeGreaterThan(0);
    }
  });

  it("routes, the explain form and an explained request", async () => {
    await visit("/routes", "routes");
    await visit("/explain?entrypoint=sluice-auto", undefined);
    const [answer] = await Promise.all([page.waitForResponse((r) => r.request().method() === "POST" && r.url().endsWith(`${CONSOLE}/explain`)), page.click('#explain-form button[type="submit"]')]);
    expect(answer.status()).toBe(200);
    await page.waitForLoadState("load");
    await expectAccessible(page, "an explained request");
    expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(1280);
    await shoot(page, "explain");
  });

  it("approvals: the inbox and one approval", async () => {
    await visit("/approvals?tenant=demo", "approvals");
    await visit(`/approvals/${encodeURIComponent(approvalId)}?tenant=demo`, "approval");
  });

  it("requests: the log and one call", async () => {
    await visit("/requests?tenant=demo", "requests");
    await visit(`/requests/${encodeURIComponent(callId)}?tenant=demo`, "request");
  });

  it("tasks: the list and one task", async () => {
    await visit("/tasks?tenant=demo", "tasks");
    await visit(`/tasks/${TASK}?tenant=demo`, "task");
  });

  it("budgets, with the spend chart", async () => {
    await visit("/budgets", "budgets");
    // The chart is an image with a name and a description, and its numbers are also a table.
    const chart = page.locator("svg[role=img]").first();
    expect(await chart.getAttribute("aria-labelledby")).toBeTruthy();
    expect(await page.locator("section.spend table").count()).toBeGreaterThan(0);
  });

  it("keys, and the page that shows a new key once", async () => {
    await visit("/keys?tenant=demo", "keys");
    await page.fill('#create-key input[name="id"]', "tour-made");
    await Promise.all([page.waitForURL(/\/admin\/console\/keys$/), page.click('#create-key button[type="submit"]')]);
    // Not photographed: it shows a working key.
    await expectAccessible(page, "the new key's page");
  });

  it("backends", async () => {
    // The agent's card is fetched off the request path: the page shows it once its registry has it.
    await eventually(async () => {
      // Its first use starts the registry's fetching.
      await fetch(`${gateway.publicUrl}/a2a/summarizer/.well-known/agent-card.json`, { headers: { authorization: `Bearer ${DEMO_KEY}` } });
      await page.goto(`${gateway.adminUrl}${CONSOLE}/backends`);
      const rows = await tableRows(page, "h2:has-text('A2A agents') + table");
      return rows.find((r) => r[0] === "summarizer" && r[1]!.startsWith("fetched")) ? true : undefined;
    });
    await visit("/backends", "backends");
  });

  it("audit", async () => {
    await visit("/audit?tenant=demo", "audit");
  });

  it("every other page the navigation links to", async () => {
    await page.goto(`${gateway.adminUrl}${CONSOLE}/approvals`);
    const hrefs = await page.locator("header nav a, header a").evaluateAll((as: unknown[]) => as.map((a) => (a as { getAttribute(n: string): string | null }).getAttribute("href") ?? ""));
    const checked = new Set(["overview", "approvals", "requests", "tasks", "budgets", "keys", "backends", "routes", "audit"]);
    for (const href of new Set(hrefs)) {
      const name = href.slice(`${CONSOLE}/`.length).split(/[/?]/)[0]!;
      if (!href.startsWith(`${CONSOLE}/`) || checked.has(name)) continue;
      await visit(href.slice(CONSOLE.length), name);
    }
  });

  it("the approver's view of the inbox", async () => {
    const other = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    try {
      const p = await other.newPage();
      await signIn(p, gateway.adminUrl, APPROVER_TOKEN);
      await p.goto(`${gateway.adminUrl}${CONSOLE}/approvals?tenant=demo`);
      await expectAccessible(p, "the approver's inbox");
      // The refusal an approver meets on an admin page.
      expect((await p.goto(`${gateway.adminUrl}${CONSOLE}/tasks`))!.status()).toBe(403);
      await expectAccessible(p, "the approver's refusal");
    } finally {
      await other.close();
    }
  });
});
