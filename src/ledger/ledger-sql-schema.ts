/**
 * The SQLite schema of a BudgetLedger object's books, and the moves from every older schema. Kept
 * apart from the store (`ledger-sqlite-store.ts`), which maps the ledger's store interface onto
 * these tables and says what each holds.
 */
import { LEDGER_DAY_MS } from "./ledger-types.ts";

/** The part of a Durable Object's `SqlStorage` the ledger uses: `exec` with bound values, read as plain rows. */
export interface LedgerSql {
  exec(query: string, ...bindings: (string | number | null)[]): { toArray(): Record<string, unknown>[] };
}

const TABLES = `
  CREATE TABLE IF NOT EXISTS ledger_scope_limits (scope TEXT PRIMARY KEY, configured TEXT, override TEXT);
  CREATE TABLE IF NOT EXISTS ledger_counters (
    scope TEXT NOT NULL, metric TEXT NOT NULL, window_start INTEGER NOT NULL,
    spent INTEGER NOT NULL, held INTEGER NOT NULL, pending INTEGER NOT NULL, overrun INTEGER NOT NULL,
    window_end INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, metric, window_start)
  );
  CREATE TABLE IF NOT EXISTS ledger_buckets (scope TEXT PRIMARY KEY, units INTEGER NOT NULL, at INTEGER NOT NULL);
  CREATE TABLE IF NOT EXISTS ledger_credits (scope TEXT NOT NULL, currency TEXT NOT NULL, credited INTEGER NOT NULL, PRIMARY KEY (scope, currency));
  CREATE TABLE IF NOT EXISTS ledger_top_ups (op_id TEXT PRIMARY KEY, body TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS ledger_attempts (attempt_id TEXT PRIMARY KEY, state TEXT NOT NULL, lease_expires_at INTEGER NOT NULL, body TEXT NOT NULL, created_at INTEGER NOT NULL DEFAULT 0);
  CREATE INDEX IF NOT EXISTS ledger_attempts_lease ON ledger_attempts (state, lease_expires_at);
  CREATE INDEX IF NOT EXISTS ledger_attempts_state_id ON ledger_attempts (state, attempt_id);
  CREATE TABLE IF NOT EXISTS ledger_attempt_scopes (scope TEXT NOT NULL, created_at INTEGER NOT NULL, attempt_id TEXT NOT NULL, PRIMARY KEY (scope, created_at, attempt_id)) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS ledger_audit (seq INTEGER PRIMARY KEY, body TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS ledger_settings (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
  CREATE TABLE IF NOT EXISTS ledger_refusals (scope TEXT NOT NULL, day_start INTEGER NOT NULL, reason TEXT NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (scope, day_start, reason));
  CREATE INDEX IF NOT EXISTS ledger_refusals_day ON ledger_refusals (day_start);
  CREATE TABLE IF NOT EXISTS ledger_usage_rollups (
    scope TEXT NOT NULL, day_start INTEGER NOT NULL, model TEXT NOT NULL, price_version TEXT NOT NULL, currency TEXT NOT NULL,
    attempts INTEGER NOT NULL, settled_micros INTEGER NOT NULL, settled_tokens INTEGER NOT NULL,
    PRIMARY KEY (scope, day_start, model, price_version, currency)
  ) WITHOUT ROWID;
  CREATE INDEX IF NOT EXISTS ledger_usage_rollups_day ON ledger_usage_rollups (day_start);
`;

/** Indexes on columns an older schema may lack: created once the columns exist. */
const RETENTION_INDEXES = `
  DROP INDEX IF EXISTS ledger_attempts_state_created;
  CREATE INDEX IF NOT EXISTS ledger_attempts_created ON ledger_attempts (created_at);
  CREATE INDEX IF NOT EXISTS ledger_counters_end ON ledger_counters (window_end) WHERE window_end > 0;
`;

/**
 * Creates the tables on first use and moves the books of an older schema over. Idempotent; the
 * store runs it once per object instance, outside any transaction (a rolled-back one would take
 * new tables with it).
 */
export function ensureLedgerSchema(sql: LedgerSql): void {
  const exists = (name: string) => sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", name).toArray().length > 0;
  const hasColumn = (table: string, column: string) =>
    sql.exec("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", table).toArray().some((r) => new RegExp(`\\b${column}\\b`).test(String(r.sql)));
  const hadScopeIndex = exists("ledger_attempt_scopes");
  const hadAttempts = exists("ledger_attempts");
  const hadCounters = exists("ledger_counters");
  sql.exec(TABLES);
  if (exists("ledger_limits")) {
    // The oldest schema kept only admin-set limits: they become overrides.
    sql.exec("INSERT OR IGNORE INTO ledger_scope_limits (scope, configured, override) SELECT scope, NULL, body FROM ledger_limits");
    sql.exec("DROP TABLE ledger_limits");
  }
  if (hadAttempts && !hasColumn("ledger_attempts", "created_at")) {
    sql.exec("ALTER TABLE ledger_attempts ADD COLUMN created_at INTEGER NOT NULL DEFAULT 0");
    sql.exec("UPDATE ledger_attempts SET created_at = json_extract(body, '$.createdAt')");
  }
  if (hadCounters && !hasColumn("ledger_counters", "window_end")) {
    sql.exec("ALTER TABLE ledger_counters ADD COLUMN window_end INTEGER NOT NULL DEFAULT 0");
    // Counters booked before window ends were recorded: recover the end from the scope's current
    // period. Only the current window is ever consulted for admission, so a period changed since
    // can only misdate history; a counter whose period is gone keeps 0 and is never removed.
    sql.exec(`UPDATE ledger_counters SET window_end = window_start + coalesce((
        SELECT json_extract(coalesce(l.override, l.configured), CASE WHEN ledger_counters.metric = 'tokens' THEN '$.tokens.windowMs' ELSE '$.money.periodMs' END)
        FROM ledger_scope_limits l WHERE l.scope = ledger_counters.scope), -window_start)
      WHERE window_start > 0 AND metric NOT LIKE 'balance:%'`);
  }
  sql.exec(RETENTION_INDEXES);
  if (!hadScopeIndex) {
    // Attempts booked before the scope index existed: index them once, so reports include them.
    sql.exec(`INSERT OR IGNORE INTO ledger_attempt_scopes (scope, created_at, attempt_id)
      SELECT j.value, a.created_at, a.attempt_id FROM ledger_attempts a, json_each(a.body, '$.scopes') j WHERE a.state != 'refused'`);
  }
  if (sql.exec("SELECT 1 FROM ledger_attempts WHERE state = 'refused' LIMIT 1").toArray().length > 0) {
    // Refusals were once kept as attempts: they become counts in their scope's refusal tally.
    sql.exec(
      `INSERT INTO ledger_refusals (scope, day_start, reason, count)
        SELECT json_extract(body, '$.result.scope'), created_at - created_at % ?, json_extract(body, '$.result.reason'), COUNT(*)
        FROM ledger_attempts WHERE state = 'refused' GROUP BY 1, 2, 3
        ON CONFLICT (scope, day_start, reason) DO UPDATE SET count = count + excluded.count`,
      LEDGER_DAY_MS,
    );
    sql.exec("DELETE FROM ledger_attempts WHERE state = 'refused'");
  }
  if (sql.exec("SELECT 1 FROM ledger_settings WHERE name = 'rollups_at_settle'").toArray().length === 0) {
    // Rollups were once written only for the settled attempts retention removed: the days they
    // hold are where attempts may be gone, and the settled attempts still kept are added to them,
    // as each settlement now adds its own.
    sql.exec(
      "INSERT OR IGNORE INTO ledger_settings (name, value) SELECT 'retired_before', MAX(day_start) + ? FROM ledger_usage_rollups HAVING COUNT(*) > 0",
      LEDGER_DAY_MS,
    );
    sql.exec(
      `INSERT INTO ledger_usage_rollups (scope, day_start, model, price_version, currency, attempts, settled_micros, settled_tokens)
        SELECT s.scope, a.created_at - a.created_at % ?, coalesce(json_extract(a.body, '$.meta.model'), ''), coalesce(json_extract(a.body, '$.meta.priceVersion'), ''),
          json_extract(a.body, '$.currency'), COUNT(*), SUM(json_extract(a.body, '$.settlement.actual.micros')), SUM(json_extract(a.body, '$.settlement.actual.tokens'))
        FROM ledger_attempts a JOIN ledger_attempt_scopes s ON s.attempt_id = a.attempt_id AND s.created_at = a.created_at
        WHERE a.state = 'settled' AND json_type(a.body, '$.settlement.actual') = 'object' GROUP BY 1, 2, 3, 4, 5
        ON CONFLICT DO UPDATE SET attempts = attempts + excluded.attempts, settled_micros = settled_micros + excluded.settled_micros, settled_tokens = settled_tokens + excluded.settled_tokens`,
      LEDGER_DAY_MS,
    );
    sql.exec("INSERT INTO ledger_settings (name, value) VALUES ('rollups_at_settle', 1)");
  }
}
