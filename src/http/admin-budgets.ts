import type { Hono } from "hono";
import { z } from "zod";
import { ledgerLimits, type BudgetPolicy } from "../publication/budgets.ts";
import { moneySchema, scopeLimitsSchema } from "../config/budget-schema.ts";
import { echo } from "../errors/echo.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import { stripeObjectName, sumTallies, type BudgetLedgerRpc } from "../ledger/ledger-client.ts";
import { LEDGER_DAY_MS, MAX_LEDGER_KEY_LENGTH, type AttemptRecord, type ScopeSpend, type UsageRollup } from "../ledger/ledger.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { microsAsDecimal } from "./budget-headers.ts";
import { readAdminJson } from "./admin-json.ts";

type AdminEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime } };

/** Who did it: every change to the books is audited under this name. */
const actor = z.string().min(1).max(128);
const note = z.string().max(1024).optional();

const topUpSchema = z.strictObject({
  scope: z.string().min(1).max(256),
  currency: z.string().regex(/^[A-Z]{3}$/),
  /** In currency units, up to 6 decimals; parsed into micro-units. */
  amount: moneySchema.refine((micros) => micros > 0, "a top-up must be at least one micro-unit"),
  /** Idempotency key: repeating a top-up with the same opId credits once. */
  opId: z.string().min(1).max(128),
  actor,
  note,
});
const resolveSchema = z.strictObject({
  /** The attempt's actual cost in currency units and its tokens, from the provider's own records. */
  cost: moneySchema,
  tokens: z.number().int().nonnegative().max(2 ** 50),
  actor,
  note,
});
const limitsSchema = z.strictObject({ scope: z.string().min(1).max(256), limits: scopeLimitsSchema.nullable(), actor, note });


/** The ledger objects of a tenant: stripe 0 is named after the root, stripe i after `root#i`. */
function tenantObjects(policy: BudgetPolicy, tenantId: string): { root: string; names: string[] } {
  const t = policy.tenants().find((x) => x.id === tenantId);
  if (!t) throw new GatewayError("not_found", `Tenant '${echo(tenantId)}' has no budgets.`);
  return { root: t.root, names: Array.from({ length: t.stripes }, (_, i) => stripeObjectName(t.root, i)) };
}

/**
 * The rules the publication is held to at load, for what an admin adds at run time: one currency
 * for every budget and price, and no money budget while a dispatchable revision has no price
 * (its attempts would reserve nothing and be admitted free).
 */
function checkCurrency(policy: BudgetPolicy, currency: string, param: string, budgetsMoney: boolean): void {
  if (policy.currency !== undefined && currency !== policy.currency) {
    throw new GatewayError("invalid_request", `'${param}' must be ${policy.currency}, the currency of this publication's prices and budgets.`, { param });
  }
  if (budgetsMoney && policy.unpricedModels.length > 0) {
    throw new GatewayError("invalid_request", `A money budget needs a price on every active model revision; unpriced: ${policy.unpricedModels.join(", ")}.`, { param });
  }
}

function timeParam(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const t = /^\d+$/.test(value) ? Number(value) : Date.parse(value);
  if (!Number.isSafeInteger(t) || t < 0) throw new GatewayError("invalid_request", `'${name}' must be an ISO 8601 time or epoch milliseconds, from 1970 on.`, { param: name });
  return t;
}

/** `?from=&to=` as a range, by default the last 24 hours. */
function rangeParams(from: string | undefined, to: string | undefined, now: number): { from: number; to: number } {
  const range = { from: timeParam(from, "from", now - 86_400_000), to: timeParam(to, "to", now + 1) };
  if (range.to < range.from) throw new GatewayError("invalid_request", "'to' must not be before 'from'.", { param: "to" });
  return range;
}

/** A ledger key (scope name, attempt id) from the query: the ledger refuses anything else. */
function keyParam(value: string | undefined, name: string): string | undefined {
  if (value !== undefined && (value.length === 0 || value.length > MAX_LEDGER_KEY_LENGTH)) {
    throw new GatewayError("invalid_request", `'${name}' must be 1 to ${MAX_LEDGER_KEY_LENGTH} characters.`, { param: name });
  }
  return value;
}


/** Money per currency, as the admin API answers it (decimal and micro-units), sorted by currency. */
function costList(byCurrency: ReadonlyMap<string, number>) {
  return [...byCurrency.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([currency, micros]) => ({ currency, amount: microsAsDecimal(micros, "fixed"), micros }));
}

/** The kind of a scope, from its name (`tenant:`, `team:`, `project:`, `key:`, `user:`). */
function kindOf(scope: string): string {
  const cut = scope.indexOf(":");
  return cut < 0 ? "other" : scope.slice(0, cut);
}

/**
 * Every scope's spend over the range, most first: stripes' parts added up per scope, model and
 * currency. Ordered by the first currency's amount (a tenant's books are in one currency).
 */
function spendRows(parts: readonly ScopeSpend[]) {
  const scopes = new Map<string, { models: Map<string, { model: string; currency: string; requests: number; tokens: number; micros: number }>; requests: number; tokens: number; costs: Map<string, number> }>();
  for (const p of parts) {
    let s = scopes.get(p.scope);
    if (s === undefined) scopes.set(p.scope, (s = { models: new Map(), requests: 0, tokens: 0, costs: new Map() }));
    const k = `${p.model}\u0000${p.currency}`;
    const m = s.models.get(k) ?? { model: p.model, currency: p.currency, requests: 0, tokens: 0, micros: 0 };
    m.requests += p.attempts;
    m.tokens += p.settledTokens;
    m.micros += p.settledMicros;
    s.models.set(k, m);
    s.requests += p.attempts;
    s.tokens += p.settledTokens;
    s.costs.set(p.currency, (s.costs.get(p.currency) ?? 0) + p.settledMicros);
  }
  const total = (costs: ReadonlyMap<string, number>) => [...costs.values()].reduce((a, b) => a + b, 0);
  return [...scopes.entries()]
    .sort(([an, a], [bn, b]) => total(b.costs) - total(a.costs) || b.requests - a.requests || (an < bn ? -1 : 1))
    .map(([scope, s]) => ({
      scope,
      kind: kindOf(scope),
      requests: s.requests,
      tokens: s.tokens,
      cost: costList(s.costs),
      models: [...s.models.values()]
        .sort((a, b) => b.micros - a.micros || (a.model < b.model ? -1 : 1))
        .map((m) => ({ model: m.model, currency: m.currency, requests: m.requests, tokens: m.tokens, amount: microsAsDecimal(m.micros, "fixed"), micros: m.micros })),
    }));
}

const SCOPE_KINDS: readonly string[] = ["tenant", "team", "project", "key", "user"];

/** One model's settled usage on one day, in one currency. */
interface DayModel {
  model: string;
  currency: string;
  requests: number;
  tokens: number;
  micros: number;
}

/**
 * The stripes' daily rollups as per-day rows, oldest first: each day's totals per currency and
 * its models (price versions summed); days without settled usage are left out.
 */
function dailyRows(rollups: readonly UsageRollup[], model: string | undefined) {
  const days = new Map<number, Map<string, DayModel>>();
  for (const r of rollups) {
    if (model !== undefined && r.model !== model) continue;
    let day = days.get(r.dayStart);
    if (day === undefined) days.set(r.dayStart, (day = new Map()));
    const k = `${r.model}\u0000${r.currency}`;
    const m = day.get(k) ?? { model: r.model, currency: r.currency, requests: 0, tokens: 0, micros: 0 };
    m.requests += r.attempts;
    m.tokens += r.settledTokens;
    m.micros += r.settledMicros;
    day.set(k, m);
  }
  return [...days.entries()]
    .sort(([a], [b]) => a - b)
    .map(([dayStart, models]) => {
      const list = [...models.values()].sort((a, b) => (a.model < b.model ? -1 : a.model > b.model ? 1 : a.currency < b.currency ? -1 : a.currency > b.currency ? 1 : 0));
      const costs = new Map<string, number>();
      for (const m of list) costs.set(m.currency, (costs.get(m.currency) ?? 0) + m.micros);
      return {
        day: new Date(dayStart).toISOString().slice(0, 10),
        dayStart,
        requests: list.reduce((a, m) => a + m.requests, 0),
        tokens: list.reduce((a, m) => a + m.tokens, 0),
        cost: costList(costs),
        models: list.map((m) => ({ model: m.model, requests: m.requests, tokens: m.tokens, currency: m.currency, amount: microsAsDecimal(m.micros, "fixed"), micros: m.micros })),
      };
    });
}

function requiredScope(value: string | undefined): string {
  const scope = keyParam(value, "scope");
  if (!scope) throw new GatewayError("invalid_request", "Name the scope: ?scope=project:team/project.", { param: "scope" });
  return scope;
}

function limitParam(value: string | undefined): number {
  if (value === undefined) return 100;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 1000) throw new GatewayError("invalid_request", "'limit' must be an integer from 1 to 1000.", { param: "limit" });
  return n;
}

/**
 * The books, for operators: balances, usage by model, refusals, pending reconciliations (and
 * resolving them), top-ups, limit overrides and the audit trail. Every change names its actor and
 * is audited by the ledger itself. Striped tenants are summed over their stripes. Every parameter
 * is checked here, so the ledger's admin methods never see one they would reject.
 */
export function registerBudgetRoutes(app: Hono<AdminEnv>, objectFor: (env: Env, name: string) => BudgetLedgerRpc): void {
  // Every read or change of the books first writes what this isolate has queued and returns its
  // idle leases, so the answer includes this isolate's own latest work.
  app.use("/budgets/:tenant/*", async (c, next) => {
    await c.var.runtime.ledger.settleNow(true);
    await next();
  });

  app.get("/budgets", (c) => c.json({ tenants: c.var.runtime.publication.budgets.tenants().map((t) => ({ tenant: t.id, root: t.root, stripes: t.stripes, retentionMs: t.retentionMs, scopes: t.scopes })) }));

  app.get("/budgets/:tenant/balance", async (c) => {
    const rt = c.var.runtime;
    const { root } = tenantObjects(rt.publication.budgets, c.req.param("tenant"));
    const declared = rt.publication.budgets.tenants().find((t) => t.root === root)!.scopes.map((s) => s.name);
    const scopes = c.req.queries("scope") ?? declared;
    for (const s of scopes) keyParam(s, "scope");
    return c.json({ balances: await Promise.all(scopes.map((s) => rt.ledger.balance(root, s))) });
  });

  app.get("/budgets/:tenant/usage", async (c) => {
    const rt = c.var.runtime;
    const { root, names } = tenantObjects(rt.publication.budgets, c.req.param("tenant"));
    const by = c.req.query("by");
    if (by !== undefined && by !== "day") throw new GatewayError("invalid_request", "'by' must be day (or left out for usage by model over the range).", { param: "by" });
    if (by === "day") {
      // The daily rollups: whole UTC days, by default the last 30 (today included), of the tenant unless a scope is named.
      const scope = keyParam(c.req.query("scope"), "scope") ?? root;
      const now = rt.clock.now();
      const today = now - (now % LEDGER_DAY_MS);
      const { from, to } = rangeParams(c.req.query("from") ?? String(today - 29 * LEDGER_DAY_MS), c.req.query("to"), now);
      const model = keyParam(c.req.query("model"), "model");
      const parts = await Promise.all(names.map((n) => objectFor(c.env, n).dailyUsage(scope, from, to)));
      const historyMs = rt.publication.budgets.tenants().find((t) => t.root === root)!.historyMs;
      return c.json({ scope, from, to, by, historyMs, ...(model !== undefined ? { model } : {}), days: dailyRows(parts.flat(), model) });
    }
    const scope = requiredScope(c.req.query("scope"));
    const { from, to } = rangeParams(c.req.query("from"), c.req.query("to"), rt.clock.now());
    const parts = await Promise.all(names.map((n) => objectFor(c.env, n).usageReport(scope, from, to)));
    const cut = parts.find((p) => !p.ok);
    if (cut && !cut.ok) {
      // Old settled attempts are kept as daily totals: a range can only take such a day whole.
      const day = new Date(cut.dayStart).toISOString();
      const param = from >= cut.dayStart && from < cut.dayStart + 86_400_000 ? "from" : "to";
      throw new GatewayError("invalid_request", `'${param}' cuts through the UTC day starting ${day}, whose usage is kept only as a daily total. Start and end the range at 00:00 UTC.`, { param });
    }
    // Stripes report the same models apart: add them up per model and price version.
    const rows = new Map<string, { model: string; priceVersion: string; attempts: number; settledMicros: number; settledTokens: number; pendingMicros: number; pendingTokens: number }>();
    for (const row of parts.flatMap((p) => (p.ok ? p.rows : []))) {
      const k = `${row.model}\u0000${row.priceVersion}`;
      const r = rows.get(k) ?? { model: row.model, priceVersion: row.priceVersion, attempts: 0, settledMicros: 0, settledTokens: 0, pendingMicros: 0, pendingTokens: 0 };
      r.attempts += row.attempts;
      r.settledMicros += row.settledMicros;
      r.settledTokens += row.settledTokens;
      r.pendingMicros += row.pendingMicros;
      r.pendingTokens += row.pendingTokens;
      rows.set(k, r);
    }
    return c.json({ scope, from, to, models: [...rows.values()] });
  });

  // Every scope's settled spend over whole UTC days (by default the last 30, today included), most first.
  app.get("/budgets/:tenant/spend", async (c) => {
    const rt = c.var.runtime;
    const { names } = tenantObjects(rt.publication.budgets, c.req.param("tenant"));
    const now = rt.clock.now();
    const today = now - (now % LEDGER_DAY_MS);
    const { from, to } = rangeParams(c.req.query("from") ?? String(today - 29 * LEDGER_DAY_MS), c.req.query("to"), now);
    const kind = c.req.query("kind");
    if (kind !== undefined && !SCOPE_KINDS.includes(kind)) throw new GatewayError("invalid_request", `'kind' must be one of ${SCOPE_KINDS.join(", ")}.`, { param: "kind" });
    const parts = await Promise.all(names.map((n) => objectFor(c.env, n).spendByScope(from, to)));
    const rows = spendRows(parts.flat());
    return c.json({ from, to, scopes: kind === undefined ? rows : rows.filter((r) => r.kind === kind) });
  });

  app.get("/budgets/:tenant/refusals", async (c) => {
    const rt = c.var.runtime;
    const { names } = tenantObjects(rt.publication.budgets, c.req.param("tenant"));
    const scope = requiredScope(c.req.query("scope"));
    const { from, to } = rangeParams(c.req.query("from"), c.req.query("to"), rt.clock.now());
    const parts = await Promise.all(names.map((n) => objectFor(c.env, n).refusals(scope, from, to)));
    return c.json({ scope, from, to, days: sumTallies(parts.flat()) });
  });

  app.get("/budgets/:tenant/reconciliations", async (c) => {
    const { names } = tenantObjects(c.var.runtime.publication.budgets, c.req.param("tenant"));
    const limit = limitParam(c.req.query("limit"));
    const after = keyParam(c.req.query("after"), "after");
    const parts = await Promise.all(names.map((n) => objectFor(c.env, n).pendingReconciliations(limit, after)));
    return c.json({ pending: parts.flat().sort((a, b) => a.attemptId.localeCompare(b.attemptId)).slice(0, limit) });
  });

  app.get("/budgets/:tenant/attempts", async (c) => {
    const { names } = tenantObjects(c.var.runtime.publication.budgets, c.req.param("tenant"));
    const state = c.req.query("state");
    if (state === "refused") {
      throw new GatewayError(
        "invalid_request",
        "Refused reservations are not kept as attempts. GET /admin/budgets/{tenant}/refusals?scope=… counts them per scope, day and reason; the balance shows today's.",
        { param: "state" },
      );
    }
    if (state !== "held" && state !== "pending_reconciliation") throw new GatewayError("invalid_request", "'state' must be held or pending_reconciliation.", { param: "state" });
    const limit = limitParam(c.req.query("limit"));
    const after = keyParam(c.req.query("after"), "after");
    const parts = await Promise.all(names.map((n) => objectFor(c.env, n).attemptsIn(state, limit, after)));
    return c.json({ attempts: parts.flat().sort((a, b) => a.attemptId.localeCompare(b.attemptId)).slice(0, limit) });
  });

  /** The stripe holding an admitted attempt (refusals leave no record, so at most one holds it). */
  const findAttempt = async (env: Env, names: readonly string[], id: string): Promise<{ object: string; attempt: AttemptRecord } | undefined> => {
    for (const n of names) {
      const rec = await objectFor(env, n).attempt(id);
      if (rec) return { object: n, attempt: rec };
    }
    return undefined;
  };
  const notFound = (id: string) =>
    new GatewayError("not_found", `No attempt '${echo(id)}' in this tenant's ledger: it was refused (refusals are only counted), never reserved, or finished longer ago than the retention.`);

  app.get("/budgets/:tenant/attempts/:attemptId", async (c) => {
    const { names } = tenantObjects(c.var.runtime.publication.budgets, c.req.param("tenant"));
    const id = c.req.param("attemptId");
    const found = await findAttempt(c.env, names, id);
    if (!found) throw notFound(id);
    return c.json(found);
  });

  app.post("/budgets/:tenant/reconciliations/:attemptId/resolve", async (c) => {
    const { names } = tenantObjects(c.var.runtime.publication.budgets, c.req.param("tenant"));
    const id = c.req.param("attemptId");
    const body = await readAdminJson(c.req.raw, resolveSchema);
    const found = await findAttempt(c.env, names, id);
    if (!found) throw notFound(id);
    const result = await objectFor(c.env, found.object).resolve(id, { micros: body.cost, tokens: body.tokens }, { actor: body.actor, ...(body.note ? { note: body.note } : {}) });
    if (!result.ok) throw new GatewayError("invalid_request", `Attempt '${echo(id)}' is not pending reconciliation (it is ${result.state ?? "unknown"}).`);
    return c.json(result);
  });

  app.post("/budgets/:tenant/top-ups", async (c) => {
    const rt = c.var.runtime;
    const { root } = tenantObjects(rt.publication.budgets, c.req.param("tenant"));
    const b = await readAdminJson(c.req.raw, topUpSchema);
    checkCurrency(rt.publication.budgets, b.currency, "currency", false);
    return c.json(await rt.ledger.topUp(root, b.scope, { currency: b.currency, micros: b.amount }, { opId: b.opId, actor: b.actor, ...(b.note ? { note: b.note } : {}) }));
  });

  app.put("/budgets/:tenant/limits", async (c) => {
    const rt = c.var.runtime;
    const { root } = tenantObjects(rt.publication.budgets, c.req.param("tenant"));
    const b = await readAdminJson(c.req.raw, limitsSchema);
    if (b.limits?.money) checkCurrency(rt.publication.budgets, b.limits.money.currency, "limits.money.currency", true);
    if (b.limits?.balance) checkCurrency(rt.publication.budgets, b.limits.balance.currency, "limits.balance.currency", true);
    await rt.ledger.setLimits(root, b.scope, b.limits === null ? null : ledgerLimits(b.limits), { actor: b.actor, ...(b.note ? { note: b.note } : {}) });
    return c.json({ scope: b.scope, balance: await rt.ledger.balance(root, b.scope) });
  });

  app.get("/budgets/:tenant/audit", async (c) => {
    const { names } = tenantObjects(c.var.runtime.publication.budgets, c.req.param("tenant"));
    const limit = limitParam(c.req.query("limit"));
    // Sequence numbers are per ledger object: `after` pages each object's log alike.
    const afterSeq = c.req.query("after");
    if (afterSeq !== undefined && !/^\d{1,15}$/.test(afterSeq)) throw new GatewayError("invalid_request", "'after' must be a sequence number.", { param: "after" });
    const parts = await Promise.all(names.map(async (n) => (await objectFor(c.env, n).audit(limit, afterSeq === undefined ? undefined : Number(afterSeq))).map((r) => ({ object: n, ...r }))));
    return c.json({ audit: parts.flat().sort((a, b) => a.at - b.at).slice(0, limit) });
  });
}
