/**
 * `npm run bench:overview`: what the console's overview costs the gateway for a tenant with a
 * month of history. See docs/performance.md.
 *
 *   npm run bench:overview -- [--tasks 10000] [--days 30] [--keys 50] [--models 5] [--runs 5]
 *                             [--requests 20] [--out FILE]
 *
 * 1. Sluice on workerd (persistent state in a temporary directory) and the provider simulator; a
 *    few real calls with task ids, so the demo tenant's budget ledger and call ledger exist with
 *    their real schema and real rows.
 * 2. The gateway stops; the bench writes a month into those Durable Objects' SQLite files, copying
 *    the real rows as templates: daily usage rollups for `--days` days for every scope (the
 *    tenant, team, project, demo key and `--keys` more keys) and `--models` models, and `--tasks`
 *    tasks spread over the days, each with its totals, a call, a request-log row and an audit event.
 * 3. The gateway starts again on that state. Signed in to the console, the bench asks for the
 *    overview of the seeded tenant and of a tenant without history, interleaved, `--requests`
 *    sequential pages per cell and run; the serving workerd process's CPU time (user + system,
 *    every Durable Object included: they run in that process) is read around each cell.
 *
 * Reports the median CPU per page over the runs for both tenants, and the wall time per page.
 * Everything runs on loopback and is stopped at the end, on error and on SIGINT/SIGTERM.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { DatabaseSync } from "node:sqlite";
import { stopOne } from "./children.ts";
import { BenchError, numberFlag, parseFlags, runBench } from "./entry.ts";
import { clockTicksPerSecond, cpuTicks, procAvailable, resolveWorkerPid } from "./proc.ts";
import { DEMO_KEY, DEMO_TENANT, PUBLIC_MODEL, startBenchGateway, startBenchSimulator } from "./sluice-config.ts";
import { median } from "./stats.ts";

const USAGE = `Usage: npm run bench:overview -- [options]
  --tasks N       tasks written into the seeded tenant's call ledger (default 10000)
  --days N        days of usage rollups written, today included (default 30)
  --keys N        keys with spend besides the demo key (default 50)
  --models N      models with spend each day (default 5)
  --runs N        interleaved runs; the median is reported (default 5)
  --requests N    overview pages per tenant and run (default 20)
  --out FILE      where the JSON results go (default: the OS temp directory)
  --help          show this text`;

const DAY = 86_400_000;
/** The shipped publication's tenant without budgets: an overview with no history of its own. */
const QUIET_TENANT = "bench-open";
/** The target of issue 29: the overview in under this much gateway CPU. */
const TARGET_MS = 200;

type Row = Record<string, string | number | null>;

/** Every SQLite file under `dir` (workerd keeps one per Durable Object). */
function sqliteFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...sqliteFiles(p));
    else if (name.endsWith(".sqlite")) out.push(p);
  }
  return out;
}

/** The object's database holding `table` with at least one row matching `where`. */
function objectWith(files: readonly string[], table: string, where: string, ...args: (string | number)[]): DatabaseSync {
  for (const f of files) {
    const db = new DatabaseSync(f);
    const has = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(table);
    if (has && db.prepare(`SELECT 1 FROM ${table} WHERE ${where} LIMIT 1`).get(...args)) return db;
    db.close();
  }
  throw new BenchError(`no Durable Object's database has ${table} rows where ${where}: did the warm-up calls reach the ledgers?`);
}

/** A small deterministic generator, so two runs seed the same books. */
function rng(seed: number): () => number {
  let s = seed;
  return () => ((s = (s * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
}

/** Writes `days` of usage rollups for every scope the warm-up charged plus `keys` more, `models` models each. */
function seedRollups(db: DatabaseSync, o: { days: number; keys: number; models: number; now: number }): number {
  const template = db.prepare("SELECT * FROM ledger_usage_rollups LIMIT 1").get() as Row | undefined;
  if (!template) throw new BenchError("the budget ledger has no rollup to copy");
  const scopes = [...new Set((db.prepare("SELECT DISTINCT scope FROM ledger_usage_rollups").all() as Row[]).map((r) => String(r.scope)))];
  for (let k = 0; k < o.keys; k++) scopes.push(`key:bench-key-${k}`);
  const models = [String(template.model), ...Array.from({ length: o.models - 1 }, (_, i) => `bench-model-${i}@1`)];
  const today = o.now - (o.now % DAY);
  const rand = rng(29);
  const put = db.prepare(
    "INSERT OR REPLACE INTO ledger_usage_rollups (scope, day_start, model, price_version, currency, attempts, settled_micros, settled_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
  );
  let rows = 0;
  db.exec("BEGIN");
  for (let d = 1; d < o.days; d++) {
    for (const scope of scopes) {
      for (const model of models) {
        const attempts = 1 + Math.floor(rand() * 400);
        put.run(scope, today - d * DAY, model, String(template.price_version), String(template.currency), attempts, attempts * (20 + Math.floor(rand() * 2_000)), attempts * (50 + Math.floor(rand() * 900)));
        rows++;
      }
    }
  }
  db.exec("COMMIT");
  return rows;
}

/** Writes `tasks` tasks over the last `days` days, copying a real task's rows (totals, call, request-log row, audit event). */
function seedTasks(db: DatabaseSync, o: { tasks: number; days: number; now: number }): void {
  const task = db.prepare("SELECT * FROM tl_tasks LIMIT 1").get() as Row | undefined;
  if (!task) throw new BenchError("the call ledger has no task to copy");
  const id = String(task.task_id);
  const totals = db.prepare("SELECT body FROM tl_totals WHERE task_id = ?").get(id) as Row | undefined;
  const call = db.prepare("SELECT * FROM tl_calls WHERE task_id = ? LIMIT 1").get(id) as Row | undefined;
  const logRow = db.prepare("SELECT * FROM tl_requests WHERE task_id = ? LIMIT 1").get(id) as Row | undefined;
  const event = db.prepare("SELECT * FROM tl_audit WHERE task_id = ? LIMIT 1").get(id) as Row | undefined;
  if (!totals || !call || !logRow || !event) throw new BenchError(`task ${id} lacks totals, a call, a request-log row or an audit event to copy`);
  const baseTotals = JSON.parse(String(totals.body)) as { costMicros: number; calls: number };
  const rand = rng(7);
  const putTask = db.prepare("INSERT INTO tl_tasks (task_id, parent_task_id, first_seen, last_seen, outcome) VALUES (?, NULL, ?, ?, NULL)");
  const putTotals = db.prepare("INSERT INTO tl_totals (task_id, body, cost_micros) VALUES (?, ?, ?)");
  const putCall = db.prepare("INSERT INTO tl_calls (call_id, task_id, key, at, body) VALUES (?, ?, ?, ?, ?)");
  const putLog = db.prepare("INSERT INTO tl_requests (request_id, at, key, project, entrypoint, model, decision, outcome, code, task_id, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  const putEvent = db.prepare("INSERT INTO tl_audit (id, at, type, task_id, body) VALUES (?, ?, ?, ?, ?)");
  db.exec("BEGIN");
  for (let i = 0; i < o.tasks; i++) {
    const taskId = `bench-task-${i}`;
    const at = o.now - Math.floor(rand() * o.days * DAY);
    const callId = `req_bench_${i}`;
    putTask.run(taskId, at - 60_000, at);
    const costMicros = Math.floor(rand() * 5_000_000);
    putTotals.run(taskId, JSON.stringify({ ...baseTotals, costMicros, calls: 1 + Math.floor(rand() * 40) }), costMicros);
    putCall.run(callId, taskId, String(call.key), at, String(call.body));
    putLog.run(callId, at, logRow.key ?? null, logRow.project ?? null, logRow.entrypoint ?? null, logRow.model ?? null, logRow.decision ?? null, String(logRow.outcome), logRow.code ?? null, taskId, String(logRow.body));
    putEvent.run(`evt_bench_${i}`, at, String(event.type), taskId, String(event.body));
  }
  db.exec("COMMIT");
}

/** Signs in to the console with the admin token; the session cookie. */
async function signIn(adminUrl: string, token: string): Promise<string> {
  const res = await fetch(`${adminUrl}/admin/console/login`, { method: "POST", redirect: "manual", headers: { "content-type": "application/x-www-form-urlencoded", origin: adminUrl }, body: new URLSearchParams({ token }) });
  const cookie = res.headers.get("set-cookie")?.split(";")[0];
  if (res.status !== 303 || !cookie) throw new BenchError(`console sign-in answered ${res.status}`);
  return cookie;
}

/** One overview page; throws unless it rendered whole. */
async function overview(adminUrl: string, cookie: string, tenant: string): Promise<void> {
  const res = await fetch(`${adminUrl}/admin/console/overview?tenant=${tenant}`, { headers: { cookie } });
  const text = await res.text();
  if (res.status !== 200 || !text.includes('id="pending"') || text.includes('class="error"')) throw new BenchError(`the overview of ${tenant} answered ${res.status}${text.includes('class="error"') ? " with an API failure on the page" : ""}`);
}

async function main(): Promise<number> {
  const flags = parseFlags(
    {
      tasks: { type: "string" },
      days: { type: "string" },
      keys: { type: "string" },
      models: { type: "string" },
      runs: { type: "string" },
      requests: { type: "string" },
      out: { type: "string" },
      help: { type: "boolean" },
    },
    USAGE,
  );
  if (!procAvailable()) throw new BenchError("bench:overview reads the gateway's CPU time from /proc: Linux only");
  const tasks = numberFlag("tasks", flags.tasks, 10_000, 1, 1_000_000, true);
  const days = numberFlag("days", flags.days, 30, 2, 365, true);
  const keys = numberFlag("keys", flags.keys, 50, 0, 10_000, true);
  const models = numberFlag("models", flags.models, 5, 1, 100, true);
  const runs = numberFlag("runs", flags.runs, 5, 1, 50, true);
  const requests = numberFlag("requests", flags.requests, 20, 1, 1_000, true);
  const out = flags.out ?? join(tmpdir(), `sluice-bench-overview-${Date.now()}.json`);

  const stateDir = mkdtempSync(join(tmpdir(), "sluice-overview-state-"));
  try {
    const sim = await startBenchSimulator();
    try {
      // 1. Real rows, written by the gateway itself.
      let gw = await startBenchGateway(sim.url, { name: "sluice", accessLog: false, stateDir });
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${gw.publicUrl}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json", "x-sluice-task-id": `warm-${i}` },
          body: JSON.stringify({ model: PUBLIC_MODEL, messages: [{ role: "user", content: `warm-up ${i}` }] }),
        });
        if (res.status !== 200) throw new BenchError(`warm-up call answered ${res.status}: ${await res.text()}`);
      }
      // The call ledger is written off the request path: wait until it has the tasks.
      const until = Date.now() + 15_000;
      for (;;) {
        const r = (await (await fetch(`${gw.adminUrl}/admin/tasks?tenant=${DEMO_TENANT}`, { headers: { authorization: `Bearer ${gw.adminToken}` } })).json()) as { tasks?: unknown[] };
        if ((r.tasks?.length ?? 0) >= 3) break;
        if (Date.now() > until) throw new BenchError("the call ledger did not show the warm-up tasks");
        await new Promise((r) => setTimeout(r, 100));
      }
      // Settle what the isolate holds, so the ledger's rollups have today's row.
      await fetch(`${gw.adminUrl}/admin/budgets/${DEMO_TENANT}/balance`, { headers: { authorization: `Bearer ${gw.adminToken}` } });
      await stopOne(gw);

      // 2. A month of history in the same objects.
      const now = Date.now();
      const files = sqliteFiles(stateDir);
      const ledger = objectWith(files, "ledger_usage_rollups", "scope = ?", `tenant:${DEMO_TENANT}`);
      const rollups = seedRollups(ledger, { days, keys, models, now });
      ledger.close();
      const calls = objectWith(files, "tl_tasks", "1 = 1");
      seedTasks(calls, { tasks, days, now });
      calls.close();
      process.stdout.write(`seeded ${rollups} usage rollups over ${days} days and ${tasks} tasks into tenant ${DEMO_TENANT}\n`);

      // 3. The same state, served again; the overview of both tenants, interleaved.
      gw = await startBenchGateway(sim.url, { name: "sluice", accessLog: false, stateDir });
      const pid = resolveWorkerPid(gw.process.pid!, "workerd");
      const cookie = await signIn(gw.adminUrl, gw.adminToken);
      for (const t of [DEMO_TENANT, QUIET_TENANT]) for (let i = 0; i < 3; i++) await overview(gw.adminUrl, cookie, t);
      const tick = 1000 / clockTicksPerSecond();
      const cells: Record<string, { cpuMs: number[]; wallMs: number[] }> = { [DEMO_TENANT]: { cpuMs: [], wallMs: [] }, [QUIET_TENANT]: { cpuMs: [], wallMs: [] } };
      for (let run = 0; run < runs; run++) {
        const order = run % 2 === 0 ? [DEMO_TENANT, QUIET_TENANT] : [QUIET_TENANT, DEMO_TENANT];
        for (const t of order) {
          const cpu0 = cpuTicks(pid);
          const t0 = performance.now();
          for (let i = 0; i < requests; i++) await overview(gw.adminUrl, cookie, t);
          cells[t]!.wallMs.push((performance.now() - t0) / requests);
          cells[t]!.cpuMs.push(((cpuTicks(pid) - cpu0) * tick) / requests);
        }
      }
      await stopOne(gw);

      const seeded = { cpuMs: median(cells[DEMO_TENANT]!.cpuMs), wallMs: median(cells[DEMO_TENANT]!.wallMs) };
      const quiet = { cpuMs: median(cells[QUIET_TENANT]!.cpuMs), wallMs: median(cells[QUIET_TENANT]!.wallMs) };
      process.stdout.write(
        [
          "",
          `overview page, gateway CPU (workerd user+system, Durable Objects included), median of ${runs} runs x ${requests} pages:`,
          `  ${DEMO_TENANT.padEnd(12)} ${days} days, ${tasks} tasks   ${seeded.cpuMs.toFixed(1).padStart(7)} ms CPU   ${seeded.wallMs.toFixed(1).padStart(7)} ms wall`,
          `  ${QUIET_TENANT.padEnd(12)} no history           ${quiet.cpuMs.toFixed(1).padStart(7)} ms CPU   ${quiet.wallMs.toFixed(1).padStart(7)} ms wall`,
          `  ratio ${(seeded.cpuMs / quiet.cpuMs).toFixed(2)}x; target ${TARGET_MS} ms CPU: ${seeded.cpuMs < TARGET_MS ? "met" : "NOT met"}`,
          "",
        ].join("\n"),
      );
      mkdirSync(dirname(out), { recursive: true });
      writeFileSync(out, JSON.stringify({ tasks, days, keys, models, runs, requests, rollups, cells, seeded, quiet, targetMs: TARGET_MS }, null, 2));
      process.stdout.write(`results: ${out}\n`);
      return seeded.cpuMs < TARGET_MS ? 0 : 1;
    } finally {
      await stopOne(sim);
    }
  } finally {
    rmSync(stateDir, { recursive: true, force: true });
  }
}

await runBench(main);
