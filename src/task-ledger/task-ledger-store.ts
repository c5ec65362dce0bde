import type { AuditEvent, AuditEventType } from "../audit/audit-event.ts";
import type { CallRecord, LedgerCall } from "./call-record.ts";
import type { RequestLogRow, RequestPage, RequestQuery } from "./request-log.ts";
import { addCall, emptyTotals, rollupOf, rollupTask, type TaskHead, type TaskOutcome, type TaskRollup, type TaskTotals } from "./task-rollup.ts";

/** The SQL part of a Durable Object's storage the store uses. */
export interface TaskLedgerSql {
  exec(query: string, ...bindings: (string | number | null)[]): { toArray(): Record<string, unknown>[] };
}

/** The part of a Durable Object's storage (`ctx.storage`) the store uses. */
export interface TaskLedgerStorage {
  readonly sql: TaskLedgerSql;
  transactionSync<T>(fn: () => T): T;
}

/** One write from the gateway: the calls and audit events of finished requests (one tenant's). */
export interface TaskLedgerBatch {
  /** Minted per batch by the writer: a batch delivered twice is stored once. */
  readonly batchId: string;
  /** When the writer sent it (epoch ms): how long its id is remembered follows the retention. */
  readonly at: number;
  readonly calls: readonly LedgerCall[];
  readonly events: readonly AuditEvent[];
  /** How long records are kept (gateway.yaml `governance.retentionDays`), carried with every write. */
  readonly retentionMs: number;
  /** The request log's rows: every finished request of the tenant, attributed to a task or not (absent from an older writer). */
  readonly requests?: readonly RequestLogRow[] | undefined;
  /** Request-log rows kept at most (gateway.yaml `governance.requestLog.maxCalls`), carried with every write. */
  readonly maxRequests?: number | undefined;
}

/** Filters of a task list. */
export interface TaskQuery {
  /** Only tasks this key made calls in; their rollups count only its calls when `onlyKey` is set. */
  readonly key?: string | undefined;
  readonly onlyKey?: boolean | undefined;
  /** Tasks last seen at or after `since`, first seen at or before `until` (epoch ms). */
  readonly since?: number | undefined;
  readonly until?: number | undefined;
  /** `recent` (default): last seen first. `spend`: the task's whole cost first (its totals, whatever `onlyKey`). */
  readonly order?: "recent" | "spend" | undefined;
  readonly limit: number;
}

/** Filters of the audit trail. */
export interface AuditQuery {
  readonly type?: AuditEventType | undefined;
  readonly taskId?: string | undefined;
  readonly limit: number;
}

/** Rows removed per table in one retention batch (one alarm run), so no run holds the object long. */
export const RETENTION_BATCH = 500;
const DAY_MS = 86_400_000;
/** Kept when no write has said otherwise yet. */
export const DEFAULT_RETENTION_MS = 30 * DAY_MS;
/** Request-log rows kept when no write has said otherwise yet. */
export const DEFAULT_MAX_REQUESTS = 100_000;

/**
 * Every request's model completion is an audit event, so `model.completed` rows are most of the
 * table on model traffic. They are kept out of the type index (a query for them walks the table
 * newest first, where they are most of what it meets) and unattributed events out of the task
 * index: the row itself is then the only B-tree an ordinary request's event is written to. Events
 * are numbered in arrival order (`seq`), which retention walks oldest first instead of an index on
 * `at`; a batch's id, not an index on each event's id, keeps a batch delivered twice from being
 * stored twice. (Measured in docs/performance.md: each of those indexes cost a budgeted request
 * more than the event's own work.)
 */
const UNINDEXED_TYPE = "type <> 'model.completed'";

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS tl_tasks (
    task_id TEXT PRIMARY KEY, parent_task_id TEXT, first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL, outcome TEXT
  );
  CREATE INDEX IF NOT EXISTS tl_tasks_last_seen ON tl_tasks (last_seen);
  CREATE INDEX IF NOT EXISTS tl_tasks_parent ON tl_tasks (parent_task_id);
  CREATE TABLE IF NOT EXISTS tl_calls (call_id TEXT PRIMARY KEY, task_id TEXT NOT NULL, key TEXT NOT NULL, at INTEGER NOT NULL, body TEXT NOT NULL);
  CREATE INDEX IF NOT EXISTS tl_calls_task ON tl_calls (task_id, at);
  CREATE INDEX IF NOT EXISTS tl_calls_key ON tl_calls (key, task_id);
  CREATE INDEX IF NOT EXISTS tl_calls_at ON tl_calls (at);
  CREATE TABLE IF NOT EXISTS tl_audit (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, at INTEGER NOT NULL, type TEXT NOT NULL, task_id TEXT, body TEXT NOT NULL);
  DROP INDEX IF EXISTS tl_audit_at;
  DROP INDEX IF EXISTS tl_audit_task;
  DROP INDEX IF EXISTS tl_audit_type;
  CREATE INDEX IF NOT EXISTS tl_audit_by_task ON tl_audit (task_id, seq) WHERE task_id IS NOT NULL;
  CREATE INDEX IF NOT EXISTS tl_audit_by_type ON tl_audit (type, seq) WHERE ${UNINDEXED_TYPE};
  CREATE TABLE IF NOT EXISTS tl_batches (batch_id TEXT PRIMARY KEY, at INTEGER NOT NULL);
  CREATE TABLE IF NOT EXISTS tl_settings (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
  CREATE TABLE IF NOT EXISTS tl_totals (task_id TEXT PRIMARY KEY, body TEXT NOT NULL, cost_micros INTEGER NOT NULL DEFAULT 0);
  CREATE TABLE IF NOT EXISTS tl_sessions (task_id TEXT NOT NULL, session_id TEXT NOT NULL, PRIMARY KEY (task_id, session_id)) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS tl_requests (
    seq INTEGER PRIMARY KEY, request_id TEXT NOT NULL, at INTEGER NOT NULL, key TEXT, project TEXT, entrypoint TEXT, model TEXT,
    decision TEXT, outcome TEXT NOT NULL, code TEXT, task_id TEXT, body TEXT NOT NULL
  );
  CREATE INDEX IF NOT EXISTS tl_requests_at ON tl_requests (at);
  CREATE INDEX IF NOT EXISTS tl_requests_id ON tl_requests (request_id);
  CREATE TABLE IF NOT EXISTS tl_turns (task_id TEXT NOT NULL, session_id TEXT NOT NULL, turn_id TEXT NOT NULL, PRIMARY KEY (task_id, session_id, turn_id)) WITHOUT ROWID;
`;

type TaskRow = { task_id: string; parent_task_id: string | null; first_seen: number; last_seen: number; outcome: string | null };

/**
 * One tenant's call ledger and audit trail in its Durable Object's SQLite storage: a row per task
 * (first and last seen, parent, outcome), a row per call (its record as JSON, attempts inside),
 * and the audit events in arrival order. Each task's totals ({@link TaskTotals}) and its distinct
 * sessions and turns are kept as its calls arrive, in the same transaction as the call rows and
 * by the same {@link addCall} a rollup summed from calls uses, so reading a task costs the same
 * however many calls it made; a key's own view of a task is summed from that key's calls.
 * Every method runs inside the caller's transaction.
 */
export class TaskLedgerStore {
  readonly #sql: TaskLedgerSql;

  constructor(storage: TaskLedgerStorage) {
    this.#sql = storage.sql;
    this.#sql.exec(SCHEMA);
    // A task's cost beside its totals' JSON, indexed, so "costliest first" walks an index instead
    // of reading every task's totals. Tables made before it get the column, filled from the JSON once.
    const columns = this.#sql.exec("SELECT name FROM pragma_table_info('tl_totals')").toArray().map((r) => String(r.name));
    if (!columns.includes("cost_micros")) {
      this.#sql.exec("ALTER TABLE tl_totals ADD COLUMN cost_micros INTEGER NOT NULL DEFAULT 0");
      this.#sql.exec("UPDATE tl_totals SET cost_micros = COALESCE(json_extract(body, '$.costMicros'), 0)");
    }
    this.#sql.exec("CREATE INDEX IF NOT EXISTS tl_totals_cost ON tl_totals (cost_micros)");
  }

  /** Writes a batch; a call already written (a retried batch) is not counted twice. */
  write(batch: TaskLedgerBatch): void {
    const fresh = this.#sql.exec("INSERT OR IGNORE INTO tl_batches (batch_id, at) VALUES (?, ?) RETURNING batch_id", batch.batchId, batch.at).toArray().length > 0;
    if (!fresh) return;
    this.#sql.exec("INSERT INTO tl_settings (name, value) VALUES ('retention_ms', ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value", batch.retentionMs);
    // One read and one write of a task's totals per batch, however many of its calls the batch holds.
    const totals = new Map<string, TaskTotals>();
    for (const c of batch.calls) {
      const fresh = this.#sql.exec("INSERT OR IGNORE INTO tl_calls (call_id, task_id, key, at, body) VALUES (?, ?, ?, ?, ?) RETURNING call_id", c.callId, c.taskId, c.key, c.at, JSON.stringify(c)).toArray().length > 0;
      if (!fresh) continue;
      this.#distinct(c);
      const known = totals.get(c.taskId);
      if (known) addCall(known, c);
      // A task without stored totals (written before they were kept) gets them from its calls, this one included.
      else totals.set(c.taskId, this.#storedTotals(c.taskId, c) ?? this.#backfill(c.taskId));
      this.#sql.exec(
        `INSERT INTO tl_tasks (task_id, parent_task_id, first_seen, last_seen) VALUES (?, ?, ?, ?)
         ON CONFLICT (task_id) DO UPDATE SET first_seen = MIN(first_seen, excluded.first_seen), last_seen = MAX(last_seen, excluded.last_seen),
           parent_task_id = COALESCE(parent_task_id, excluded.parent_task_id)`,
        c.taskId,
        c.parentTaskId ?? null,
        c.at,
        c.endedAt,
      );
    }
    for (const [taskId, t] of totals) {
      this.#sql.exec("INSERT INTO tl_totals (task_id, body, cost_micros) VALUES (?, ?, ?) ON CONFLICT (task_id) DO UPDATE SET body = excluded.body, cost_micros = excluded.cost_micros", taskId, JSON.stringify(t), t.costMicros);
    }
    for (const e of batch.events) {
      this.#sql.exec("INSERT INTO tl_audit (id, at, type, task_id, body) VALUES (?, ?, ?, ?, ?)", e.id, e.at, e.type, e.taskId ?? null, JSON.stringify(e));
    }
    this.#writeRequests(batch);
  }

  /**
   * Appends the batch's request-log rows, then trims the oldest arrivals beyond the row bound: as
   * many as were added (and a few more, so a lowered bound catches up; the alarm does the rest).
   * Rows are numbered in arrival order and only the oldest go, so the newest `max` numbers are
   * the rows kept.
   */
  #writeRequests(batch: TaskLedgerBatch): void {
    const rows = batch.requests ?? [];
    if (batch.maxRequests !== undefined) this.#sql.exec("INSERT INTO tl_settings (name, value) VALUES ('max_requests', ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value", batch.maxRequests);
    for (const r of rows) {
      this.#sql.exec(
        "INSERT INTO tl_requests (request_id, at, key, project, entrypoint, model, decision, outcome, code, task_id, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        r.requestId,
        r.at,
        r.key ?? null,
        r.project ?? null,
        r.entrypoint ?? null,
        r.model ?? null,
        r.decision ?? null,
        r.outcome,
        r.errorCode ?? null,
        r.taskId ?? null,
        JSON.stringify(r),
      );
    }
    if (rows.length > 0) this.#trimRequests(rows.length + 16);
  }

  /** Removes up to `batch` of the oldest request-log rows beyond the bound; how many went. */
  #trimRequests(batch: number): number {
    const bound = this.maxRequests();
    return this.#sql
      .exec("DELETE FROM tl_requests WHERE seq IN (SELECT seq FROM tl_requests WHERE seq <= (SELECT MAX(seq) FROM tl_requests) - ? ORDER BY seq LIMIT ?) RETURNING 1", bound, batch)
      .toArray().length;
  }

  /** Request-log rows kept at most: the last write's bound, or the default before any said one. */
  maxRequests(): number {
    const row = this.#sql.exec("SELECT value FROM tl_settings WHERE name = 'max_requests'").toArray()[0];
    return row ? Number(row.value) : DEFAULT_MAX_REQUESTS;
  }

  /** A page of the request log, newest first (by receipt, then arrival). */
  requests(q: RequestQuery): RequestPage {
    const where: string[] = [];
    const args: (string | number)[] = [];
    const eq = (column: string, value: string | undefined) => {
      if (value === undefined) return;
      where.push(`${column} = ?`);
      args.push(value);
    };
    eq("key", q.key);
    eq("project", q.project);
    eq("entrypoint", q.entrypoint);
    eq("model", q.model);
    eq("decision", q.decision);
    eq("outcome", q.outcome);
    eq("code", q.errorCode);
    eq("task_id", q.taskId);
    if (q.since !== undefined) {
      where.push("at >= ?");
      args.push(q.since);
    }
    if (q.until !== undefined) {
      where.push("at <= ?");
      args.push(q.until);
    }
    if (q.cursor !== undefined) {
      where.push("(at < ? OR (at = ? AND seq < ?))");
      args.push(q.cursor.at, q.cursor.at, q.cursor.seq);
    }
    // One row beyond the page says whether another page follows.
    const rows = this.#sql
      .exec(`SELECT seq, at, body FROM tl_requests ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY at DESC, seq DESC LIMIT ?`, ...args, q.limit + 1)
      .toArray();
    const page = rows.slice(0, q.limit);
    const last = page.at(-1);
    return {
      calls: page.map((r) => JSON.parse(String(r.body)) as RequestLogRow),
      ...(rows.length > q.limit && last ? { next: { at: Number(last.at), seq: Number(last.seq) } } : {}),
    };
  }

  /** One request-log row by request id; undefined when it is not kept (never made, or past the bounds). */
  request(requestId: string): RequestLogRow | undefined {
    const row = this.#sql.exec("SELECT body FROM tl_requests WHERE request_id = ? ORDER BY seq DESC LIMIT 1", requestId).toArray()[0];
    return row ? (JSON.parse(String(row.body)) as RequestLogRow) : undefined;
  }

  /** Tasks, most recently seen first, or costliest first. */
  tasks(tenant: string, q: TaskQuery): TaskRollup[] {
    const where: string[] = [];
    const args: (string | number)[] = [];
    if (q.key !== undefined) {
      where.push("EXISTS (SELECT 1 FROM tl_calls c WHERE c.key = ? AND c.task_id = t.task_id)");
      args.push(q.key);
    }
    if (q.since !== undefined) {
      where.push("t.last_seen >= ?");
      args.push(q.since);
    }
    if (q.until !== undefined) {
      where.push("t.first_seen <= ?");
      args.push(q.until);
    }
    const filter = where.length ? `WHERE ${where.join(" AND ")}` : "";
    // By spend the cost index is walked from the top until the page is full: no rollup is built,
    // and no task's totals read, for a task not shown. A task whose totals were never stored (one
    // written before they were kept and not read since) is not in that index: it is listed by
    // spend once it has been read or called again.
    const query =
      q.order === "spend"
        ? `SELECT t.* FROM tl_totals s JOIN tl_tasks t ON t.task_id = s.task_id ${filter} ORDER BY s.cost_micros DESC, t.last_seen DESC, t.task_id LIMIT ?`
        : `SELECT * FROM tl_tasks t ${filter} ORDER BY t.last_seen DESC, t.task_id LIMIT ?`;
    const rows = this.#sql.exec(query, ...args, q.limit).toArray() as TaskRow[];
    return rows.map((r) => this.#rollup(tenant, r, q.onlyKey ? q.key : undefined));
  }

  /** One task with its calls (oldest first); only `key`'s calls and figures when given. Undefined: unknown task (or none of its calls are the key's). */
  task(tenant: string, taskId: string, key?: string): { task: TaskRollup; calls: CallRecord[] } | undefined {
    const row = this.#sql.exec("SELECT * FROM tl_tasks WHERE task_id = ?", taskId).toArray()[0] as TaskRow | undefined;
    if (!row) return undefined;
    const calls = this.#calls(taskId, key);
    if (key !== undefined && calls.length === 0) return undefined;
    return { task: this.#rollup(tenant, row, key, calls), calls: calls.map(publicCall) };
  }

  /** Attaches a verifier's outcome (replacing an earlier one); false when the task is unknown. */
  setOutcome(taskId: string, outcome: TaskOutcome): boolean {
    return this.#sql.exec("UPDATE tl_tasks SET outcome = ? WHERE task_id = ? RETURNING task_id", JSON.stringify(outcome), taskId).toArray().length > 0;
  }

  /** Audit events, newest first. */
  audit(q: AuditQuery): AuditEvent[] {
    const where: string[] = [];
    const args: (string | number)[] = [];
    if (q.type !== undefined) {
      where.push("type = ?");
      args.push(q.type);
      // Spelled out so SQLite may use the partial type index (it matches the index's own term).
      if (q.type !== "model.completed") where.push(UNINDEXED_TYPE);
    }
    if (q.taskId !== undefined) {
      where.push("task_id = ?");
      args.push(q.taskId);
    }
    const rows = this.#sql.exec(`SELECT body FROM tl_audit ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY seq DESC LIMIT ?`, ...args, q.limit).toArray();
    return rows.map((r) => JSON.parse(String(r.body)) as AuditEvent);
  }

  retentionMs(): number {
    const row = this.#sql.exec("SELECT value FROM tl_settings WHERE name = 'retention_ms'").toArray()[0];
    return row ? Number(row.value) : DEFAULT_RETENTION_MS;
  }

  /**
   * One retention batch: calls, request-log rows, audit events, batch ids and tasks older than the
   * retention go, and request-log rows beyond their bound, at most {@link RETENTION_BATCH} of each. A task goes once it has not been seen within the
   * retention. Audit events and batch ids are looked at oldest first by arrival (no index on their
   * times): an event that arrived after a younger one (a long request's) waits for it, never
   * longer than a request lasts. `more`: a table may still have older rows (run again at once).
   */
  retain(now: number): { more: boolean } {
    const cutoff = now - this.retentionMs();
    const removed = (query: string, ...args: number[]) => this.#sql.exec(query, ...args).toArray().length;
    const counts = [
      removed("DELETE FROM tl_calls WHERE rowid IN (SELECT rowid FROM tl_calls WHERE at < ? LIMIT ?) RETURNING 1", cutoff, RETENTION_BATCH),
      removed("DELETE FROM tl_audit WHERE seq IN (SELECT seq FROM (SELECT seq, at FROM tl_audit ORDER BY seq LIMIT ?) WHERE at < ?) RETURNING 1", RETENTION_BATCH, cutoff),
      removed("DELETE FROM tl_batches WHERE rowid IN (SELECT rowid FROM (SELECT rowid, at FROM tl_batches ORDER BY rowid LIMIT ?) WHERE at < ?) RETURNING 1", RETENTION_BATCH, cutoff),
      this.#retainTasks(cutoff),
      removed("DELETE FROM tl_requests WHERE seq IN (SELECT seq FROM tl_requests WHERE at < ? LIMIT ?) RETURNING 1", cutoff, RETENTION_BATCH),
      this.#trimRequests(RETENTION_BATCH),
    ];
    return { more: counts.some((n) => n === RETENTION_BATCH) };
  }

  /** When retention next has work (the oldest row's expiry), or undefined when the store is empty. */
  nextRetention(): number | undefined {
    const row = this.#sql
      .exec(
        `SELECT MIN(m) AS m FROM (SELECT MIN(at) AS m FROM tl_calls UNION ALL SELECT MIN(at) FROM tl_requests UNION ALL SELECT (SELECT at FROM tl_audit ORDER BY seq LIMIT 1)
           UNION ALL SELECT (SELECT at FROM tl_batches ORDER BY rowid LIMIT 1) UNION ALL SELECT MIN(last_seen) FROM tl_tasks)`,
      )
      .toArray()[0];
    const oldest = row?.m;
    return typeof oldest === "number" ? oldest + this.retentionMs() + 1 : undefined;
  }

  /** Removes up to a batch of tasks not seen within the retention, with their totals and distinct sessions and turns. */
  #retainTasks(cutoff: number): number {
    const gone = this.#sql.exec("DELETE FROM tl_tasks WHERE rowid IN (SELECT rowid FROM tl_tasks WHERE last_seen < ? LIMIT ?) RETURNING task_id", cutoff, RETENTION_BATCH).toArray();
    for (const r of gone) for (const table of ["tl_totals", "tl_sessions", "tl_turns"]) this.#sql.exec(`DELETE FROM ${table} WHERE task_id = ?`, String(r.task_id));
    return gone.length;
  }

  /** Records a call's session and turn among its task's distinct ones. */
  #distinct(c: LedgerCall): void {
    if (c.sessionId !== undefined) this.#sql.exec("INSERT OR IGNORE INTO tl_sessions (task_id, session_id) VALUES (?, ?)", c.taskId, c.sessionId);
    if (c.turnId !== undefined) this.#sql.exec("INSERT OR IGNORE INTO tl_turns (task_id, session_id, turn_id) VALUES (?, ?, ?)", c.taskId, c.sessionId ?? "", c.turnId);
  }

  /** A task's stored totals, with `adding` added; undefined when none are stored. */
  #storedTotals(taskId: string, adding?: LedgerCall): TaskTotals | undefined {
    const row = this.#sql.exec("SELECT body FROM tl_totals WHERE task_id = ?", taskId).toArray()[0];
    if (!row) return undefined;
    const t = JSON.parse(String(row.body)) as TaskTotals;
    if (adding) addCall(t, adding);
    return t;
  }

  /** Totals summed from every stored call of a task, with its distinct sessions and turns recorded (kept from then on). */
  #backfill(taskId: string): TaskTotals {
    const t = emptyTotals();
    for (const c of this.#calls(taskId)) {
      addCall(t, c);
      this.#distinct(c);
    }
    return t;
  }

  #calls(taskId: string, key?: string): LedgerCall[] {
    const rows = key === undefined ? this.#sql.exec("SELECT body FROM tl_calls WHERE task_id = ? ORDER BY at, call_id", taskId).toArray() : this.#sql.exec("SELECT body FROM tl_calls WHERE task_id = ? AND key = ? ORDER BY at, call_id", taskId, key).toArray();
    return rows.map((r) => JSON.parse(String(r.body)) as LedgerCall);
  }

  /** A task's rollup: from its kept totals, or, for a key's own view, summed from that key's calls (`calls`, when already read). */
  #rollup(tenant: string, row: TaskRow, key: string | undefined, calls?: readonly LedgerCall[]): TaskRollup {
    const own = key === undefined ? undefined : (calls ?? this.#calls(row.task_id, key));
    // A key's own view names only the children it made calls in.
    const children = (
      key === undefined
        ? this.#sql.exec("SELECT task_id FROM tl_tasks WHERE parent_task_id = ? ORDER BY first_seen, task_id", row.task_id)
        : this.#sql.exec("SELECT t.task_id FROM tl_tasks t WHERE t.parent_task_id = ? AND EXISTS (SELECT 1 FROM tl_calls c WHERE c.key = ? AND c.task_id = t.task_id) ORDER BY t.first_seen, t.task_id", row.task_id, key)
    )
      .toArray()
      .map((r) => String(r.task_id));
    // A key's own view counts only the approvals of its own calls.
    const ids = new Set(own?.map((c) => c.callId));
    const events = (this.#sql.exec("SELECT body FROM tl_audit WHERE task_id = ? AND type LIKE 'approval.%'", row.task_id).toArray().map((r) => JSON.parse(String(r.body))) as AuditEvent[]).filter(
      (e) => key === undefined || e.subject === key || (e.callId !== undefined && ids.has(e.callId)),
    );
    const head: TaskHead = {
      taskId: row.task_id,
      tenant,
      parentTaskId: row.parent_task_id ?? undefined,
      children,
      firstSeen: row.first_seen,
      lastSeen: row.last_seen,
      outcome: row.outcome === null ? undefined : (JSON.parse(row.outcome) as TaskOutcome),
    };
    if (own) return rollupTask(head, own, events);
    let totals = this.#storedTotals(row.task_id);
    if (!totals) {
      totals = this.#backfill(row.task_id);
      this.#sql.exec("INSERT INTO tl_totals (task_id, body, cost_micros) VALUES (?, ?, ?)", row.task_id, JSON.stringify(totals), totals.costMicros);
    }
    const count = (table: string) => Number(this.#sql.exec(`SELECT COUNT(*) AS n FROM ${table} WHERE task_id = ?`, row.task_id).toArray()[0]!.n);
    return rollupOf(head, totals, { sessions: count("tl_sessions"), turns: count("tl_turns") }, events);
  }
}

/** A stored call in the admin API's shape (without the figures only rollups read). */
export function publicCall(c: LedgerCall): CallRecord {
  return {
    callId: c.callId,
    at: c.at,
    endedAt: c.endedAt,
    kind: c.kind,
    key: c.key,
    ...(c.chargeTo !== undefined ? { chargeTo: c.chargeTo } : {}),
    ...(c.sessionId !== undefined ? { sessionId: c.sessionId } : {}),
    ...(c.turnId !== undefined ? { turnId: c.turnId } : {}),
    ...(c.workload !== undefined ? { workload: c.workload } : {}),
    target: c.target,
    outcome: c.outcome,
    ...(c.errorCode !== undefined ? { errorCode: c.errorCode } : {}),
    costMicros: c.costMicros,
    attempts: c.attempts,
    ...(c.decision !== undefined ? { decision: c.decision } : {}),
    ...(c.parentCallId !== undefined ? { parentCallId: c.parentCallId } : {}),
    ...(c.looper !== undefined ? { looper: c.looper } : {}),
    ...(c.cache !== undefined ? { cache: c.cache } : {}),
  };
}
