import { Client as LegacyClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as LegacyTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Browser, BrowserContext } from "playwright-core";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY } from "../../local-stack/stack.ts";
import { startLoopbackServer, type LoopbackServer } from "../e2e/support/loopback-server.ts";
import { startMcpTestServer } from "../e2e/support/mcp-test-server.ts";
import { ADMIN_TOKEN, backendsFor, bundledConfig, DEMO_KEY, startStack, type Stack } from "../e2e/support/stack.ts";
import { formatCount, formatMoney } from "../../src/http/console-format.ts";
import { eventually, launchChromium, signIn, tableRows, type DomNode } from "./support/browser.ts";

const CONSOLE = "/admin/console";

describe("the admin console in Chromium", () => {
  let stack: Stack;
  let browser: Browser;
  let foreign: LoopbackServer;
  let foreignPage = "";

  beforeAll(async () => {
    const gateway = bundledConfig("gateway");
    gateway.breaker = { enabled: true };
    [stack, browser] = await Promise.all([startStack({ gateway }), launchChromium()]);
    // A page on another origin (another loopback port: same site, so SameSite=Strict alone would
    // not keep the session cookie off its requests).
    foreign = await startLoopbackServer(async (_req, _body, res) => {
      res.writeHead(200, { "content-type": "text/html" }).end(foreignPage);
    });
    // One model call, so the books and the breaker have something to show.
    await stack.client.chat.completions.create({ model: "sluice-chat", messages: [{ role: "user", content: "hello" }] });
  });

  afterAll(async () => {
    await browser?.close();
    await foreign?.close();
    await stack?.stop();
  });

  const newContext = (): Promise<BrowserContext> => browser.newContext();

  it("sends a browser without a session to the login page and refuses a wrong token", async () => {
    const ctx = await newContext();
    try {
      const page = await ctx.newPage();
      for (const path of ["/overview", "/approvals", "/requests", "/tasks", "/budgets", "/backends", "/audit", ""]) {
        await page.goto(`${stack.gateway.adminUrl}${CONSOLE}${path}`);
        expect(new URL(page.url()).pathname).toBe(`${CONSOLE}/login`);
        await expect(page.locator('input[name="token"]').count()).resolves.toBe(1);
      }
      await page.fill('input[name="token"]', "not-the-token");
      const [res] = await Promise.all([page.waitForResponse((r) => r.request().method() === "POST"), page.click('button[type="submit"]')]);
      expect(res.status()).toBe(401);
      expect(await page.textContent("#login-error")).toContain("not valid");
      expect(await ctx.cookies()).toEqual([]);
      // The admin API's JSON routes still want the bearer header: a console cookie is no substitute.
      await signIn(page, stack.gateway.adminUrl, ADMIN_TOKEN);
      const api = await page.request.get(`${stack.gateway.adminUrl}/admin/status`);
      expect(api.status()).toBe(401);
    } finally {
      await ctx.close();
    }
  });

  it("signs in with the admin token into a cookie that is not the token, with strict headers, and logs out", async () => {
    const ctx = await newContext();
    try {
      const page = await ctx.newPage();
      await signIn(page, stack.gateway.adminUrl, ADMIN_TOKEN);
      expect(new URL(page.url()).pathname).toBe(`${CONSOLE}/overview`);
      const [cookie, ...more] = await ctx.cookies();
      expect(more).toEqual([]);
      expect(cookie).toMatchObject({ name: "sluice_console", path: CONSOLE, httpOnly: true, sameSite: "Strict", secure: false });
      expect(cookie!.value).not.toContain(ADMIN_TOKEN);
      expect(cookie!.value).not.toContain(Buffer.from(ADMIN_TOKEN).toString("base64").replace(/=+$/, ""));

      const res = await page.goto(`${stack.gateway.adminUrl}${CONSOLE}/backends`);
      const h = res!.headers();
      expect(h["content-security-policy"]).toBe("default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'");
      expect(h["x-frame-options"]).toBe("DENY");
      expect(h["cache-control"]).toBe("no-store");
      expect(h["content-type"]).toMatch(/^text\/html/);
      // No external asset and no script on any page.
      expect(await page.locator("script, link[rel=stylesheet], img, iframe").count()).toBe(0);

      // A forged cookie (right shape, wrong MAC) is no session.
      const forged = cookie!.value.replace(/.$/, (ch) => (ch === "A" ? "B" : "A"));
      const other = await newContext();
      try {
        await other.addCookies([{ ...cookie!, value: forged }]);
        const p2 = await other.newPage();
        await p2.goto(`${stack.gateway.adminUrl}${CONSOLE}/budgets`);
        expect(new URL(p2.url()).pathname).toBe(`${CONSOLE}/login`);
      } finally {
        await other.close();
      }

      await Promise.all([page.waitForURL((u) => u.pathname === `${CONSOLE}/login`), page.click('header button[type="submit"]')]);
      expect(await ctx.cookies()).toEqual([]);
      await page.goto(`${stack.gateway.adminUrl}${CONSOLE}/budgets`);
      expect(new URL(page.url()).pathname).toBe(`${CONSOLE}/login`);
    } finally {
      await ctx.close();
    }
  });

  it("refuses a form without its CSRF token, and one from another origin even with the token", async () => {
    const ctx = await newContext();
    try {
      const page = await ctx.newPage();
      await signIn(page, stack.gateway.adminUrl, ADMIN_TOKEN);
      const origin = new URL(stack.gateway.adminUrl).origin;
      const csrf = await page.getAttribute('header input[name="csrf"]', "value");
      expect(csrf).toMatch(/^[A-Za-z0-9_-]{43}$/);

      // Same origin, the session cookie, but no CSRF token (or a wrong one): refused, still signed in.
      for (const form of [{ reason: "no token" }, { csrf: "x".repeat(43) }] as Record<string, string>[]) {
        const r = await page.request.post(`${stack.gateway.adminUrl}${CONSOLE}/logout`, { form, headers: { origin }, maxRedirects: 0 });
        expect(r.status()).toBe(403);
        expect(await r.text()).toContain("CSRF");
      }
      expect(await ctx.cookies()).toHaveLength(1);

      // A page on another origin that knows the token and submits the console's own form: refused by
      // its Origin (the browser sends the cookie: both are 127.0.0.1, one site).
      foreignPage = `<!doctype html><form id="f" method="post" action="${stack.gateway.adminUrl}${CONSOLE}/logout"><input type="hidden" name="csrf" value="${csrf}"><button id="go" type="submit">go</button></form>`;
      const evil = await ctx.newPage();
      await evil.goto(`${foreign.origin}/`);
      const [res] = await Promise.all([evil.waitForResponse((r) => r.url().endsWith(`${CONSOLE}/logout`)), evil.click("#go")]);
      expect(res.status()).toBe(403);
      expect(await res.text()).toContain("Cross-origin");
      expect((await res.request().allHeaders())["cookie"]).toContain("sluice_console=");
      expect(await ctx.cookies()).toHaveLength(1);

      // A foreign page cannot sign a browser in either (login CSRF).
      foreignPage = `<!doctype html><form method="post" action="${stack.gateway.adminUrl}${CONSOLE}/login"><input type="hidden" name="token" value="${ADMIN_TOKEN}"><button id="go" type="submit">go</button></form>`;
      const fresh = await newContext();
      try {
        const p = await fresh.newPage();
        await p.goto(`${foreign.origin}/`);
        const [r] = await Promise.all([p.waitForResponse((x) => x.url().endsWith(`${CONSOLE}/login`)), p.click("#go")]);
        expect(r.status()).toBe(403);
        expect(await fresh.cookies()).toEqual([]);
      } finally {
        await fresh.close();
      }

      // With its token, from its own page, the same form works.
      await page.goto(`${stack.gateway.adminUrl}${CONSOLE}/backends`);
      await Promise.all([page.waitForURL((u) => u.pathname === `${CONSOLE}/login`), page.click('header button[type="submit"]')]);
      expect(await ctx.cookies()).toEqual([]);
    } finally {
      await ctx.close();
    }
  });

  it("shows the backends live as the admin API does: in flight, latency, recent errors, breaker, health and credential", async () => {
    const ctx = await newContext();
    try {
      const page = await ctx.newPage();
      await signIn(page, stack.gateway.adminUrl, ADMIN_TOKEN);
      await page.goto(`${stack.gateway.adminUrl}${CONSOLE}/backends`);
      const rows = await tableRows(page, "main > table");
      const snap = (await (await stack.admin("/admin/snapshot")).json()) as { revision: number; snapshot: { backends: { id: string; name: string; protocol: string; baseUrl?: string }[] } };
      type Live = { name: string; credential: string; inFlight: number; latencyMs: number | null; breaker: { state: string; failures: number; samples: number } | null; health: { status: string } | null };
      const status = (await (await stack.admin("/admin/status")).json()) as { backends: Live[] };
      const live = new Map(status.backends.map((b) => [b.name, b]));
      expect(snap.snapshot.backends.length).toBeGreaterThan(0);
      // The backend the model call went to has a latency and a breaker window with that attempt in it.
      const used = status.backends.filter((b) => b.latencyMs !== null);
      expect(used.length).toBeGreaterThan(0);
      expect(used.every((b) => b.credential === "accepted")).toBe(true);
      expect(rows.map((r) => r.slice(0, 5))).toEqual(
        snap.snapshot.backends.map((b) => {
          const v = live.get(b.name)!;
          return [b.name, b.protocol, b.baseUrl ?? "—", String(v.inFlight), v.latencyMs === null ? "—" : expect.stringMatching(new RegExp(`^${v.latencyMs.toLocaleString("en-US")} ms last `))];
        }),
      );
      for (const r of rows) {
        const v = live.get(r[0]!)!;
        expect(r[6]!.split(" ")[0]).toBe(v.breaker?.state ?? "off");
        expect(r[7]!.split(" ")[0]).toBe(v.health?.status ?? "unknown");
        // `unknown` health is explained, never left bare.
        if (v.health === null) expect(r[7]).toContain("not probed");
        expect(r[8]).toBe(v.credential.replace("_", " "));
      }
      expect(await page.textContent("main > p")).toContain(`Snapshot revision ${snap.revision}`);
    } finally {
      await ctx.close();
    }
  });

  it("shows each tenant's balances as the admin API does", async () => {
    const ctx = await newContext();
    try {
      const page = await ctx.newPage();
      await signIn(page, stack.gateway.adminUrl, ADMIN_TOKEN);
      await page.goto(`${stack.gateway.adminUrl}${CONSOLE}/budgets`);
      const { tenants } = (await (await stack.admin("/admin/budgets")).json()) as { tenants: { tenant: string }[] };
      expect(tenants.length).toBeGreaterThan(0);
      let spentSomewhere = false;
      for (const { tenant } of tenants) {
        const { balances } = (await (await stack.admin(`/admin/budgets/${tenant}/balance`)).json()) as {
          balances: { scope: string; money?: Record<string, number>; tokens?: Record<string, number>; balance?: Record<string, number> }[];
        };
        const rows = await tableRows(page, `section[data-tenant="${tenant}"] table`);
        const expected: string[][] = [];
        for (const b of balances) {
          for (const metric of ["money", "tokens", "balance"] as const) {
            const l = b[metric] as (Record<string, number> & { metric?: string }) | undefined;
            if (!l) continue;
            if ((l.spent ?? 0) > 0) spentSomewhere = true;
            // Money in its currency, tokens with separators: the API's figures, written for people.
            const f = (v: number) => (metric === "tokens" ? formatCount(v) : formatMoney(v, l.metric?.slice(l.metric.indexOf(":") + 1)));
            expected.push([b.scope, metric, f(l.limit!), f(l.spent!), f(l.held!), f(l.pending!), f(l.remaining!)]);
          }
        }
        // The metric column may name the currency after the metric; the last column is how full the limit is.
        expect(rows.filter((r) => r[1] !== "requests" && r[2] !== "no limit").map((r) => [r[0]!, r[1]!.split(" ")[0]!, ...r.slice(2, 7)])).toEqual(expected);
        expect(rows.filter((r) => r[1] !== "requests" && r[2] !== "no limit").every((r) => /^(?:<1|\d{1,3})%/.test(r[7]!))).toBe(true);
      }
      expect(spentSomewhere).toBe(true);
      // The demo books are in dollars: written as such, not as a metric name.
      expect((await tableRows(page, 'section[data-tenant="demo"] table')).find((r) => r[1]!.startsWith("money"))).toEqual(expect.arrayContaining(["money (USD)", "$1,000.00"]));
    } finally {
      await ctx.close();
    }
  });

  it("creates a key that works, shows it once, and revokes it so it is refused", async () => {
    const ctx = await newContext();
    try {
      const page = await ctx.newPage();
      await signIn(page, stack.gateway.adminUrl, ADMIN_TOKEN);
      await page.goto(`${stack.gateway.adminUrl}${CONSOLE}/keys?tenant=demo`);
      const before = await tableRows(page, "table");
      expect(before.map((r) => r[0])).toContain("demo");
      await page.fill('#create-key input[name="id"]', "console-made");
      await page.fill('#create-key input[name="chargeTo"]', "platform/playground");
      await Promise.all([page.waitForURL(/\/admin\/console\/keys$/), page.click('#create-key button[type="submit"]')]);
      const key = (await page.textContent("#new-key"))!;
      expect(key).toMatch(/^sk-sluice-/);
      /** The status of one chat with key `k` (its body read, so the connection is reused). */
      const chat = async (k: string) => {
        const res = await fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${k}`, "content-type": "application/json" }, body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: "hi" }] }) });
        await res.text();
        return res.status;
      };
      await eventually(async () => ((await chat(key)) === 200 ? true : undefined));
      // The list shows the key by id and digest prefix, never the key.
      await page.goto(`${stack.gateway.adminUrl}${CONSOLE}/keys?tenant=demo`);
      expect(await page.content()).not.toContain(key);
      const row = (await tableRows(page, "table")).find((r) => r[0] === "console-made")!;
      expect(row.slice(1, 4)).toEqual(["active", expect.stringMatching(/^[0-9a-f]{8}…$/), "platform/playground"]);
      await page.fill('input[aria-label="reason to revoke console-made"]', "test over");
      await Promise.all([page.waitForURL(/done=revoke/), page.click('form:has(input[aria-label="reason to revoke console-made"]) button[value="revoke"]')]);
      expect(await page.textContent("#flash")).toBe("Revoked.");
      expect((await tableRows(page, "table")).find((r) => r[0] === "console-made")![1]).toBe("revoked");
      await eventually(async () => ((await chat(key)) === 401 ? true : undefined));
    } finally {
      await ctx.close();
    }
  });

  it("lists a call made just before on the Requests page, as the request log has it, pages on, and shows the call", async () => {
    const ids: string[] = [];
    for (const content of ["first plain call", "second plain call"]) {
      const res = await fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content }] }),
      });
      await res.text();
      ids.push(res.headers.get("x-request-id")!);
    }
    const [older, newer] = ids as [string, string];
    // The log is written off the request path: wait until the API lists both.
    const row = await eventually(async () => {
      const r = await stack.admin(`/admin/calls?tenant=demo&limit=50`);
      const { calls } = (await r.json()) as { calls: { requestId: string; at: number; key: string; model: string; backend: string; attempts: number; outcome: string; latencyMs: number; tokens: { input: number; output: number } }[] };
      return calls.some((c) => c.requestId === older) ? calls.find((c) => c.requestId === newer) : undefined;
    });
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    try {
      const page = await ctx.newPage();
      await signIn(page, stack.gateway.adminUrl, ADMIN_TOKEN);
      await Promise.all([page.waitForURL((u) => u.pathname === `${CONSOLE}/requests`), page.click(`header a[href="${CONSOLE}/requests"]`)]);
      const first = (await tableRows(page, "#requests > table"))[0]!;
      expect(await page.getAttribute("#requests > table tbody tr:first-child a", "title")).toBe(newer);
      expect(first.slice(1, 11)).toEqual([`${row.key}platform/playground`, "sluice-chat", expect.any(String), row.model, row.backend, String(row.attempts), row.outcome, `${row.latencyMs} ms`, "—", `${row.tokens.input} / ${row.tokens.output}`]);
      // The table fits a 1280-px window.
      expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(1280);

      // The filters are a GET form: the view is a link; a page of one links to the next (older) call.
      await page.fill('#request-filters input[name="key"]', row.key);
      await Promise.all([page.waitForURL((u) => u.searchParams.get("key") === row.key), page.click('#request-filters button[type="submit"]')]);
      await page.goto(`${page.url()}&limit=1`);
      expect(await page.getAttribute("#requests > table tbody tr a", "title")).toBe(newer);
      await Promise.all([page.waitForURL((u) => u.searchParams.has("cursor")), page.click("#next-page")]);
      expect(new URL(page.url()).searchParams.get("key")).toBe(row.key);
      expect(await page.getAttribute("#requests > table tbody tr a", "title")).toBe(older);

      // A call's own page, field by field.
      await Promise.all([page.waitForURL((u) => u.pathname === `${CONSOLE}/requests/${older}`), page.click("#requests > table tbody tr a")]);
      const fields = await page.locator("#call dl > dt").allTextContents();
      const values = await page.locator("#call dl > dd").allTextContents();
      const field = new Map(fields.map((f, i) => [f, values[i]!.trim()]));
      expect(field.get("Request")).toBe(older);
      expect(field.get("Key")).toBe(row.key);
      expect(field.get("Task")).toBe("—");
    } finally {
      await ctx.close();
    }
  });
});

// Needs the approvals API (`GET /admin/approvals`, `POST /admin/approvals/:id/approve`) and the
// `governance.approvals` config: skipped with that reason where the gateway does not serve them.
describe("the approvals inbox, clicked through end to end", () => {
  it("shows a pending approval, approves it with a reason, shows it approved, and the retried call runs", async (t) => {
    const probe = await startStack();
    let supported: boolean;
    try {
      supported = (await probe.admin("/admin/approvals?tenant=demo")).status !== 404;
    } finally {
      await probe.stop();
    }
    t.skip(!supported, "depends on the approvals API (GET /admin/approvals answers 404 on this gateway)");

    const APPROVER_TOKEN = "e2e-approver-token";
    const [sim, tools, browser] = await Promise.all([startSimulatorProcess({ apiKey: SIMULATOR_API_KEY }), startMcpTestServer(), launchChromium()]);
    const g = bundledConfig("gateway");
    g.security.egress = { allow: ["127.0.0.1"] };
    // A 2025-11-25 client needs the gateway's own MCP sessions, sealed under a secret.
    g.mcp = { servers: [{ name: "legacy", url: tools.url, era: "stateful" }], sessions: { secrets: ["MCP_SESSION_SECRET"] } };
    g.governance = { approverTokenSecret: "SLUICE_APPROVER_TOKEN", approvals: { stateSecret: "SLUICE_APPROVAL_STATE" } };
    const p = bundledConfig("publication");
    p.mcp = { policy: { revision: "console-1", rules: [{ id: "echo-approved", effect: "allow", principals: { tenants: ["demo"] }, servers: ["legacy"], names: ["echo"], approval: "required" }] } };
    const gateway = await startGateway({
      adminToken: ADMIN_TOKEN,
      secretNames: ["MCP_SESSION_SECRET", "SLUICE_APPROVER_TOKEN", "SLUICE_APPROVAL_STATE"],
      secrets: { MCP_SESSION_SECRET: "console-mcp-session-secret-0123456789", SLUICE_APPROVER_TOKEN: APPROVER_TOKEN, SLUICE_APPROVAL_STATE: "console-approval-state-secret" },
      config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) },
    });
    const admin = (path: string) => fetch(`${gateway.adminUrl}${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const client = new LegacyClient({ name: "console-e2e", version: "1.0.0" });
    const ctx = await browser.newContext();
    try {
      await client.connect(new LegacyTransport(new URL(`${gateway.publicUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${DEMO_KEY}` } } }));
      const call = () => client.callTool({ name: "legacy.echo", arguments: { text: "needs a human" } });
      // A 2025-11-25 client is told to visit the approval's URL (-32042), not held on the line.
      await expect(call()).rejects.toMatchObject({ code: -32042 });
      const pending = (await (await admin("/admin/approvals?tenant=demo&state=pending")).json()) as { approvals: { id: string; tool: string; server: string; argumentsDigest: string; principal: { tenant: string; key: string } }[] };
      expect(pending.approvals).toHaveLength(1);
      const approval = pending.approvals[0]!;

      // The approver signs in with their own token: the inbox only.
      const page = await ctx.newPage();
      await signIn(page, gateway.adminUrl, APPROVER_TOKEN);
      expect(await page.textContent("header")).toContain("approver");
      const tasks = await page.goto(`${gateway.adminUrl}${CONSOLE}/tasks`);
      expect(tasks!.status()).toBe(403);

      await page.goto(`${gateway.adminUrl}${CONSOLE}/approvals?tenant=demo&state=pending`);
      const rows = await tableRows(page, "main > table");
      const row = rows.find((r) => r[0] === approval.id);
      expect(row).toBeDefined();
      expect(row!.slice(1, 7)).toEqual(["pending", `${approval.principal.tenant} / ${approval.principal.key}`, "—", "legacy", approval.tool, approval.argumentsDigest]);

      const form = page.locator("form.decide").filter({ has: page.locator(`input[aria-label="reason for ${approval.id}"]`) });
      await form.locator('input[name="reason"]').fill("looked at it: <fine>");
      await Promise.all([page.waitForURL((u) => u.pathname === `${CONSOLE}/approvals/${approval.id}`), form.locator('button[value="approve"]').click()]);
      expect(await page.textContent("#flash")).toBe("Approved.");
      expect(await page.textContent('span.state')).toBe("approved");
      // The reason is shown as text, escaped, not as markup.
      expect(await page.locator("main").innerText()).toContain("looked at it: <fine>");

      const after = (await (await admin(`/admin/approvals/${approval.id}?tenant=demo`)).json()) as { approval: { state: string; reason?: string } };
      expect(after.approval).toMatchObject({ state: "approved", reason: "looked at it: <fine>" });

      // The client's retry is re-admitted and runs.
      expect(await call()).toMatchObject({ content: [{ type: "text", text: "needs a human" }] });
      await page.reload();
      expect(["approved", "executed"]).toContain(await page.textContent("span.state"));
    } finally {
      await client.close().catch(() => undefined);
      await ctx.close();
      await browser.close();
      await gateway.stop();
      await Promise.all([sim.stop(), tools.stop()]);
    }
  });
});

// Needs the call ledger (`GET /admin/tasks`, `GET /admin/tasks/:taskId`): skipped with that reason
// where the gateway does not serve it.
describe("a task's drill-down, checked against the ledger", () => {
  it("lists the task with the API's rollup and shows its calls and attempts", async (t) => {
    const stack = await startStack({ simulators: 1 });
    let browser: Browser | undefined;
    try {
      t.skip((await stack.admin("/admin/tasks?tenant=demo")).status === 404, "depends on the call ledger (GET /admin/tasks answers 404 on this gateway)");
      const taskId = "console-task-1";
      for (const [session, turn] of [["s1", "t1"], ["s1", "t2"], ["s2", "t1"]] as const) {
        await stack.client.chat.completions.create(
          { model: "sluice-chat", messages: [{ role: "user", content: `turn ${turn}` }] },
          { headers: { "x-sluice-task-id": taskId, "x-sluice-session-id": session, "x-sluice-turn-id": turn } },
        );
      }
      // The ledger is written off the request path: wait until it holds the three calls.
      const detail = await eventually(async () => {
        const r = await stack.admin(`/admin/tasks/${taskId}?tenant=demo`);
        if (r.status !== 200) return undefined;
        const body = (await r.json()) as { task: Record<string, unknown> & { calls: number }; calls: { callId: string; kind: string; key: string; target: string; outcome: string; costMicros: number; attempts: { attemptId: string; backend?: string; outcome: string; usage: string; costMicros: number }[] }[] };
        return body.task.calls === 3 && body.calls.length === 3 ? body : undefined;
      });

      browser = await launchChromium();
      const ctx = await browser.newContext();
      const page = await ctx.newPage();
      await signIn(page, stack.gateway.adminUrl, ADMIN_TOKEN);
      await page.goto(`${stack.gateway.adminUrl}${CONSOLE}/tasks?tenant=demo`);
      const list = await tableRows(page, "main > table");
      const listed = list.find((r) => r[0] === taskId);
      expect(listed).toBeDefined();
      const task = detail.task as { sessions: number; turns: number; calls: number; attempts: number; retries: number; fallbacks: number; unknownUsageAttempts: number; costMicros: number; currency: string; tokens: { input: number; output: number } };
      expect(listed!.slice(3, 9)).toEqual([task.sessions, task.turns, task.calls, task.attempts, task.retries, task.fallbacks].map(formatCount));
      expect(listed!.slice(9, 12)).toEqual([formatMoney(task.costMicros, task.currency), formatCount(task.tokens.input), formatCount(task.tokens.output)]);
      // The list fits a 1280-px window: nothing scrolls sideways.
      await page.setViewportSize({ width: 1280, height: 800 });
      expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(1280);

      await Promise.all([page.waitForURL((u) => u.pathname === `${CONSOLE}/tasks/${taskId}`), page.click(`main > table a[href^="${CONSOLE}/tasks/${taskId}"]`)]);
      const rollup = new Map((await tableRows(page, "#rollup > table")).map((r) => [r[0]!, r[1]!]));
      expect(rollup.get("Calls")).toBe(String(task.calls));
      expect(rollup.get("Attempts")).toBe(String(task.attempts));
      expect(rollup.get("Retries")).toBe(String(task.retries));
      expect(rollup.get("Sessions")).toBe(String(task.sessions));
      expect(rollup.get("Turns")).toBe(String(task.turns));
      expect(rollup.get("Cost (micros)")).toBe(formatCount(task.costMicros));
      expect(rollup.get("Cost")).toBe(formatMoney(task.costMicros, task.currency));
      expect(rollup.get("Tokens in")).toBe(formatCount(task.tokens.input));
      expect(rollup.get("Tokens out")).toBe(formatCount(task.tokens.output));

      // Every call, with its attempts, as the ledger has them; and the rollup is their sum.
      const callTable = page.locator("#calls > table");
      const calls = await callTable.evaluate((table: unknown) =>
        Array.from((table as DomNode).querySelectorAll(":scope > tbody > tr"), (tr) => ({
          callId: tr.children[0]!.textContent!.trim(),
          cost: tr.children[8]!.textContent!.trim(),
          attempts: Array.from(tr.children[9]!.querySelectorAll("tbody > tr"), (a) => Array.from(a.children, (td) => td.textContent!.trim())),
        })),
      );
      expect(calls).toEqual(
        detail.calls.map((c) => ({ callId: c.callId, cost: formatCount(c.costMicros), attempts: c.attempts.map((a) => [a.attemptId, a.backend ?? "—", a.outcome, a.usage, formatCount(a.costMicros)]) })),
      );
      expect(detail.calls.reduce((n, c) => n + c.attempts.length, 0)).toBe(task.attempts);
      expect(detail.calls.reduce((n, c) => n + c.costMicros, 0)).toBe(task.costMicros);

      // The task's audit events, newest first, as the audit API lists them.
      const audit = await stack.admin(`/admin/audit?tenant=demo&taskId=${taskId}&limit=100`);
      if (audit.status !== 404) {
        const { events } = (await audit.json()) as { events: { type: string }[] };
        expect(events.length).toBeGreaterThan(0);
        await page.goto(`${stack.gateway.adminUrl}${CONSOLE}/audit?tenant=demo&taskId=${taskId}`);
        expect((await tableRows(page, "main > table")).map((r) => r[1])).toEqual(events.map((e) => e.type));
        // Each event's details are fields, not a JSON blob.
        expect(await page.locator("main > table > tbody > tr > td:nth-child(3) > dl.fields").count()).toBe(events.length);
        expect(await page.locator("main > table").textContent()).not.toContain('{"');
        // An event's call opens in the request log.
        expect(await page.locator(`main > table dl.fields a[href^="${CONSOLE}/requests/"]`).count()).toBeGreaterThan(0);
      }
      await ctx.close();
    } finally {
      await browser?.close();
      await stack.stop();
    }
  });
});
