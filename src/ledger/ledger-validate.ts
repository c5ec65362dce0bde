/**
 * Argument checks of the ledger. Every argument may have come over RPC from anywhere, so nothing
 * is assumed about its type: each check names the bad field, before anything is read or written.
 * The request-path checks (`…Problems`) list the problems, which the ledger answers as an
 * `invalid_argument` result; the admin-path checks (`validate…`) throw them as a RangeError.
 */
import {
  LEDGER_DAY_MS,
  MAX_HISTORY_MS,
  MAX_LEASE_MS,
  MAX_LEDGER_AMOUNT,
  MAX_RETENTION_MS,
  MIN_RETENTION_MS,
  MAX_LEDGER_KEY_LENGTH,
  MAX_LEDGER_PAGE,
  MAX_NOTE_LENGTH,
  MAX_REQUEST_RATE,
  MAX_SCOPE_DEPTH,
  MAX_USAGE_ENTRIES,
  type LedgerActor,
  type LedgerAmount,
  type ScopeLimits,
  type TopUpAmount,
  type TopUpBy,
} from "./ledger-types.ts";

const CURRENCY = /^[A-Z]{3}$/;

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);
const isAmount = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0 && (n as number) <= MAX_LEDGER_AMOUNT;
const isRate = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0 && (n as number) <= MAX_REQUEST_RATE;
const isPositiveMs = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) > 0;
const isTime = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;

/** A non-empty string of at most {@link MAX_LEDGER_KEY_LENGTH} chars. */
export const isLedgerKey = (s: unknown): s is string => typeof s === "string" && s.length > 0 && s.length <= MAX_LEDGER_KEY_LENGTH;
/** An ISO 4217 code (3 capital letters). */
export const isCurrency = (s: unknown): s is string => typeof s === "string" && CURRENCY.test(s);

const keyRule = `a string of 1..${MAX_LEDGER_KEY_LENGTH} chars`;

function fail(what: string, bad: string[]): void {
  if (bad.length > 0) throw new RangeError(`invalid ledger ${what}: ${bad.join("; ")}`);
}

/** Problems of a limits object, each naming its field under `at`. */
export function limitsProblems(limits: unknown, at: string): string[] {
  if (!isObject(limits)) return [`${at} must be an object`];
  const bad: string[] = [];
  const { money: m, tokens: t, requests: r, balance: b } = limits;
  if (m !== undefined) {
    if (!isObject(m)) bad.push(`${at}.money must be an object`);
    else {
      if (!isCurrency(m.currency)) bad.push(`${at}.money.currency must be an ISO 4217 code (3 capital letters)`);
      if (!isAmount(m.limitMicros)) bad.push(`${at}.money.limitMicros must be an integer in 0..2^50, got ${String(m.limitMicros)}`);
      if (!isPositiveMs(m.periodMs)) bad.push(`${at}.money.periodMs must be a positive integer, got ${String(m.periodMs)}`);
    }
  }
  if (t !== undefined) {
    if (!isObject(t)) bad.push(`${at}.tokens must be an object`);
    else {
      if (!isAmount(t.limit)) bad.push(`${at}.tokens.limit must be an integer in 0..2^50, got ${String(t.limit)}`);
      if (!isPositiveMs(t.windowMs)) bad.push(`${at}.tokens.windowMs must be a positive integer, got ${String(t.windowMs)}`);
    }
  }
  if (r !== undefined) {
    if (!isObject(r)) bad.push(`${at}.requests must be an object`);
    else {
      if (!isRate(r.perMinute)) bad.push(`${at}.requests.perMinute must be an integer in 0..2^30, got ${String(r.perMinute)}`);
      if (!isRate(r.burst)) bad.push(`${at}.requests.burst must be an integer in 0..2^30, got ${String(r.burst)}`);
    }
  }
  if (b !== undefined && !(isObject(b) && isCurrency(b.currency))) bad.push(`${at}.balance.currency must be an ISO 4217 code (3 capital letters)`);
  return bad;
}

/** @throws RangeError naming every bad field. */
export function validateLimits(scope: string, limits: ScopeLimits | null): void {
  const bad: string[] = [];
  if (!isLedgerKey(scope)) bad.push(`scope must be ${keyRule}`);
  if (limits !== null) bad.push(...limitsProblems(limits, "limits"));
  fail("limits", bad);
}

/**
 * The limits as plain data in a fixed key order, unknown fields dropped: its JSON is canonical, so
 * two limits are the same exactly when their `JSON.stringify(canonicalLimits(…))` are equal.
 */
export function canonicalLimits(l: ScopeLimits): ScopeLimits {
  return {
    ...(l.money ? { money: { currency: l.money.currency, limitMicros: l.money.limitMicros, periodMs: l.money.periodMs } } : {}),
    ...(l.tokens ? { tokens: { limit: l.tokens.limit, windowMs: l.tokens.windowMs } } : {}),
    ...(l.requests ? { requests: { perMinute: l.requests.perMinute, burst: l.requests.burst } } : {}),
    ...(l.balance ? { balance: { currency: l.balance.currency } } : {}),
  };
}

/** Problems of an amount, each naming its field under `at`. */
export function amountProblems(a: unknown, at: string): string[] {
  if (!isObject(a)) return [`${at} must be an object { micros, tokens }`];
  const bad: string[] = [];
  if (!isAmount(a.micros)) bad.push(`${at}.micros must be an integer in 0..2^50, got ${String(a.micros)}`);
  if (!isAmount(a.tokens)) bad.push(`${at}.tokens must be an integer in 0..2^50, got ${String(a.tokens)}`);
  return bad;
}

function nowProblems(now: unknown): string[] {
  return isTime(now) ? [] : [`now must be a non-negative integer (epoch ms), got ${String(now)}`];
}

/** A retention the ledger accepts (ms). */
/** A usage history: whole UTC days, 1 to 3650 of them. */
export const isHistory = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) % LEDGER_DAY_MS === 0 && (n as number) >= LEDGER_DAY_MS && (n as number) <= MAX_HISTORY_MS;
export const isRetention = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= MIN_RETENTION_MS && (n as number) <= MAX_RETENTION_MS;

/** Every problem of a reservation, each naming its field; empty when it is valid. */
export function reserveProblems(attemptId: unknown, req: unknown): string[] {
  const bad: string[] = [];
  if (!isLedgerKey(attemptId)) bad.push(`attemptId must be ${keyRule}`);
  if (!isObject(req)) return [...bad, "the reservation must be an object"];
  const s: unknown = req.scopes;
  if (!Array.isArray(s) || s.length === 0 || s.length > MAX_SCOPE_DEPTH) bad.push(`scopes must be 1..${MAX_SCOPE_DEPTH} scope refs { name, limits? }, root first`);
  else {
    s.forEach((ref: unknown, i) => {
      if (!isObject(ref) || !isLedgerKey(ref.name)) bad.push(`scopes[${i}].name must be ${keyRule}`);
      else if (ref.limits !== undefined) bad.push(...limitsProblems(ref.limits, `scopes[${i}].limits`));
    });
    const names = s.map((ref: unknown) => (isObject(ref) ? ref.name : undefined));
    if (new Set(names).size !== names.length) bad.push("scopes must name distinct scopes");
  }
  if (!isCurrency(req.currency)) bad.push("currency must be an ISO 4217 code (3 capital letters)");
  bad.push(...amountProblems(req.amount, "amount"), ...nowProblems(req.now));
  if (req.leaseMs !== undefined && !(isPositiveMs(req.leaseMs) && req.leaseMs <= MAX_LEASE_MS)) bad.push(`leaseMs must be an integer in 1..${MAX_LEASE_MS}`);
  if (req.retentionMs !== undefined && !isRetention(req.retentionMs)) bad.push(`retentionMs must be an integer in ${MIN_RETENTION_MS}..${MAX_RETENTION_MS} (7 to 3650 days)`);
  if (req.historyMs !== undefined && !isHistory(req.historyMs)) bad.push(`historyMs must be a whole number of days in ms, ${LEDGER_DAY_MS}..${MAX_HISTORY_MS} (1 to 3650 days)`);
  if (req.countsRequest !== undefined && typeof req.countsRequest !== "boolean") bad.push("countsRequest must be a boolean");
  const meta: unknown = req.meta;
  if (meta !== undefined) {
    if (!isObject(meta)) bad.push("meta must be an object");
    else for (const k of ["requestId", "model", "priceVersion"] as const) if (meta[k] !== undefined && !isLedgerKey(meta[k])) bad.push(`meta.${k} must be ${keyRule}`);
  }
  return bad;
}

/** Every problem of a settlement, each naming its field; empty when it is valid. */
export function settleProblems(attemptId: unknown, actual: unknown, now: unknown, detail: unknown): string[] {
  const bad: string[] = [];
  if (!isLedgerKey(attemptId)) bad.push(`attemptId must be ${keyRule}`);
  if (actual !== "unknown") bad.push(...amountProblems(actual, "actual"));
  bad.push(...nowProblems(now));
  if (detail !== undefined) {
    if (!isObject(detail)) bad.push("detail must be an object");
    else {
      if (detail.estimate !== undefined) bad.push(...amountProblems(detail.estimate, "detail.estimate"));
      const u: unknown = detail.usage;
      if (u !== undefined) {
        if (!isObject(u) || Object.keys(u).length > MAX_USAGE_ENTRIES) bad.push(`detail.usage must be an object of at most ${MAX_USAGE_ENTRIES} entries`);
        else for (const [k, v] of Object.entries(u)) if (!isLedgerKey(k) || !isAmount(v)) bad.push(`detail.usage.${k.slice(0, 64)} must be an integer in 0..2^50`);
      }
    }
  }
  return bad;
}

/** The problems of a key and a clock reading. */
export function keyAndNowProblems(field: string, key: unknown, now: unknown): string[] {
  return [...(isLedgerKey(key) ? [] : [`${field} must be ${keyRule}`]), ...nowProblems(now)];
}

/** Problems of who did an admin act. */
export function actorProblems(by: unknown, at: string): string[] {
  if (!isObject(by)) return [`${at} must be an object { actor, note? }`];
  const bad: string[] = [];
  if (!isLedgerKey(by.actor)) bad.push(`${at}.actor must be ${keyRule}`);
  if (by.note !== undefined && !(typeof by.note === "string" && by.note.length <= MAX_NOTE_LENGTH)) bad.push(`${at}.note must be a string of at most ${MAX_NOTE_LENGTH} chars`);
  return bad;
}

/** @throws RangeError naming every bad field. */
export function validateKeyAndNow(what: string, field: string, key: unknown, now: unknown): void {
  fail(what, keyAndNowProblems(field, key, now));
}

/** @throws RangeError naming every bad field. */
export function validateSetLimits(scope: string, limits: ScopeLimits | null, now: number, by: LedgerActor | undefined): void {
  validateLimits(scope, limits);
  fail("limits", [...nowProblems(now), ...(by === undefined ? [] : actorProblems(by, "by"))]);
}

/** @throws RangeError naming every bad field. */
export function validateTopUp(scope: string, amount: TopUpAmount, by: TopUpBy, now: number): void {
  const bad: string[] = [];
  if (!isLedgerKey(scope)) bad.push(`scope must be ${keyRule}`);
  if (!isObject(amount)) bad.push("amount must be an object { currency, micros }");
  else {
    if (!isCurrency(amount.currency)) bad.push("amount.currency must be an ISO 4217 code (3 capital letters)");
    if (!(isAmount(amount.micros) && amount.micros >= 1)) bad.push(`amount.micros must be an integer in 1..2^50, got ${String(amount.micros)}`);
  }
  bad.push(...actorProblems(by, "by"));
  if (isObject(by) && !isLedgerKey(by.opId)) bad.push(`by.opId must be ${keyRule}`);
  fail("top-up", [...bad, ...nowProblems(now)]);
}

/** @throws RangeError naming every bad field. */
export function validateResolve(attemptId: string, actual: LedgerAmount, by: LedgerActor, now: number): void {
  const bad = [...(isLedgerKey(attemptId) ? [] : [`attemptId must be ${keyRule}`]), ...amountProblems(actual, "actual"), ...actorProblems(by, "by"), ...nowProblems(now)];
  fail("resolution", bad);
}

/** @throws RangeError naming every bad field. */
export function validatePage(limit: number, after: unknown, afterField: string, afterOk: (v: unknown) => boolean): void {
  const bad: string[] = [];
  if (!(Number.isSafeInteger(limit) && limit >= 1 && limit <= MAX_LEDGER_PAGE)) bad.push(`limit must be an integer in 1..${MAX_LEDGER_PAGE}, got ${String(limit)}`);
  if (after !== undefined && !afterOk(after)) bad.push(`${afterField} is invalid`);
  fail("page", bad);
}

/** @throws RangeError naming every bad field. */
export function validateReport(scope: string, fromMs: number, toMs: number, what = "usage report"): void {
  const bad: string[] = [];
  if (!isLedgerKey(scope)) bad.push(`scope must be ${keyRule}`);
  if (!isTime(fromMs)) bad.push(`fromMs must be a non-negative integer (epoch ms), got ${String(fromMs)}`);
  if (!isTime(toMs) || (isTime(fromMs) && toMs < fromMs)) bad.push(`toMs must be an integer (epoch ms) not before fromMs, got ${String(toMs)}`);
  fail(what, bad);
}

/** A non-negative safe integer (audit `seq`). */
export const isSeq = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
