/**
 * Fetch handler of the bench-only ledger Worker: each request makes the ledger calls the gateway
 * makes for one upstream attempt, through the real {@link budgetLedgerClient} and the real
 * BudgetLedger Durable Object, so the bench measures the ledger and nothing else.
 *
 * Routes (every POST answers a chat-completion-shaped body so the bench's load generator, which
 * checks that shape, can drive it unchanged; any other outcome is a non-2xx status):
 * - `GET /ready`: readiness probe.
 * - `POST /baseline`: answers without touching the ledger (the floor the ledger's cost is read from).
 * - `POST /reserve/T/N`: one reservation for tenant T striped over N objects, left held.
 * - `POST /reserve-settle/T/N`: one reservation, then its settlement.
 * - `GET /books/T/N`: the tenant's key-scope token counters summed over stripes and windows, so the
 *   bench can check every answered request was booked exactly once.
 *
 * Tenant and stripes are path segments because the load generator sends the URL's path only.
 *
 * Written against web-standard types only, so tsconfig.node.json (which covers bench/) checks it.
 */
import { budgetLedgerClient, MAX_LEDGER_STRIPES, stripeObjectName, type BudgetLedgerRpc } from "../../src/ledger/ledger-client.ts";
import type { LedgerAmount, ScopeRef } from "../../src/ledger/ledger.ts";

/** The bindings the bench's workerd config gives this Worker. */
export interface LedgerBenchEnv {
  readonly BUDGET_LEDGER: { getByName(name: string): BudgetLedgerRpc };
}

/** Key-scope totals of one tenant, as `GET /books` answers them. */
export interface LedgerBooks {
  readonly spentTokens: number;
  readonly heldTokens: number;
  readonly pendingTokens: number;
}

/** The priced worst case of one small buffered chat attempt (about 60 input tokens, a 64-token cap). */
export const RESERVE_AMOUNT: LedgerAmount = { micros: 50, tokens: 130 };
/** Its actual cost once the provider reported usage. */
export const SETTLE_AMOUNT: LedgerAmount = { micros: 12, tokens: 30 };

const DAY_MS = 86_400_000;
// Large enough never to refuse in a bench (the ledger caps amounts at 2^50 and rates at 2^30),
// yet every scope carries a limit, so every reservation checks and books all four.
const HUGE = 2 ** 50;
const HUGE_RATE = 2 ** 30;

/** The gateway's path for a key charged to a project: tenant → team → project → key. */
export function benchScopes(tenant: string): ScopeRef[] {
  return [
    { name: `tenant:${tenant}`, limits: { money: { currency: "USD", limitMicros: HUGE, periodMs: 30 * DAY_MS } } },
    { name: "team:platform", limits: { tokens: { limit: HUGE, windowMs: 3_600_000 } } },
    { name: "project:platform/playground", limits: { money: { currency: "USD", limitMicros: HUGE, periodMs: DAY_MS } } },
    { name: "key:bench", limits: { requests: { perMinute: HUGE_RATE, burst: HUGE_RATE } } },
  ];
}

/** Scope whose (unlimited, hence lifetime) token counter `GET /books` reads. */
const BOOKS_SCOPE = "key:bench";

const OK_BODY = JSON.stringify({ object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }] });
const ok = () => new Response(OK_BODY, { headers: { "content-type": "application/json" } });
const fail = (status: number, detail: unknown) => new Response(JSON.stringify({ error: detail }), { status, headers: { "content-type": "application/json" } });

function target(url: URL): { route: string; tenant: string; stripes: number } | Response {
  const m = /^\/([a-z-]+)\/([a-z0-9-]{1,64})\/([0-9]{1,2})$/.exec(url.pathname);
  if (m === null) return fail(404, "no such route: want /<route>/<tenant of [a-z0-9-]>/<stripes>");
  const stripes = Number(m[3]);
  if (stripes < 1 || stripes > MAX_LEDGER_STRIPES) return fail(400, `stripes must be an integer in 1..${MAX_LEDGER_STRIPES}`);
  return { route: m[1]!, tenant: m[2]!, stripes };
}

async function books(env: LedgerBenchEnv, tenant: string, stripes: number): Promise<LedgerBooks> {
  const parts = await Promise.all(Array.from({ length: stripes }, (_, i) => env.BUDGET_LEDGER.getByName(stripeObjectName(`tenant:${tenant}`, i)).usage(BOOKS_SCOPE)));
  const tokens = parts.flat().filter((c) => c.metric === "tokens");
  const sum = (k: "spent" | "held" | "pending") => tokens.reduce((n, c) => n + c[k], 0);
  return { spentTokens: sum("spent"), heldTokens: sum("held"), pendingTokens: sum("pending") };
}

/** The Worker's fetch handler. */
export default {
  async fetch(request: Request, env: LedgerBenchEnv): Promise<Response> {
    const url = new URL(request.url);
    if (request.method === "GET" && url.pathname === "/ready") return new Response("ok\n");
    // Every POST consumes its body alike, so the baseline differs from the ledger routes only by the ledger.
    if (request.method === "POST") await request.arrayBuffer();
    if (request.method === "POST" && url.pathname === "/baseline") return ok();
    const t = target(url);
    if (t instanceof Response) return t;
    if (request.method === "GET" && t.route === "books") return Response.json(await books(env, t.tenant, t.stripes));
    const settle = t.route === "reserve-settle";
    if (request.method !== "POST" || !(settle || t.route === "reserve")) return fail(404, "no such route");

    try {
      // The gateway builds one client per isolate; building one here costs a few closures, far
      // below what is measured, and keeps the stripe count a per-request choice.
      const ledger = budgetLedgerClient((name) => env.BUDGET_LEDGER.getByName(name), { stripes: () => t.stripes });
      const attemptId = crypto.randomUUID();
      const { result, handle } = await ledger.reserve(attemptId, {
        scopes: benchScopes(t.tenant),
        currency: "USD",
        amount: RESERVE_AMOUNT,
        countsRequest: true,
        // Longer than any bench cell, so no hold expires before the bench has read the books.
        leaseMs: 3_600_000,
        meta: { requestId: attemptId, model: "chat-small@1", priceVersion: "2026-11" },
      });
      if (!result.ok) return fail(409, result);
      if (!settle) return ok();
      const settled = await ledger.settle(handle, attemptId, SETTLE_AMOUNT, { usage: { inputTokens: 14, outputTokens: 16 } });
      return settled.ok && settled.state === "settled" ? ok() : fail(409, settled);
    } catch (err) {
      return fail(500, String(err));
    }
  },
};
