import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { buildBundle, ROOT } from "../../local-stack/build.ts";
import { bindProblem, freePort } from "../../local-stack/ports.ts";
import { startSimulatorProcess, SIMULATOR_API_KEY } from "../../local-stack/stack.ts";
import { freshFetch } from "./support/raw-http.ts";
import { allowingSimulators, backendsFor, bundledConfig, DEMO_KEY, type Simulator } from "./support/stack.ts";

// `sluice serve` as a user runs it: its own process, signalled the ways a terminal, a shell that
// goes away and an orchestrator signal it. "Nothing left" means: workerd's pid is gone and both
// ports can be bound again.

const TOKEN = "lifecycle-admin-token";
const CLI = join(ROOT, "bin", "sluice.js");
const fetch = freshFetch;

/** A started `sluice serve` (or a shell around it): its process, its output, its exit. */
interface Served {
  readonly proc: ChildProcess;
  readonly publicPort: number;
  readonly adminPort: number;
  output(): string;
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 60_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const v = await Promise.resolve().then(probe).catch(() => undefined);
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** True while `pid` runs (a zombie nobody reaped yet counts as gone: it holds no port and runs nothing). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = `/proc/${pid}/stat`;
  if (!existsSync(stat)) return true;
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(stat, "utf8"));
  } catch {
    return false;
  }
}

describe("sluice serve as a process", () => {
  let sim: Simulator;
  let work: string;
  let configDir: string;
  let bundleDir: string;
  const started: Served[] = [];
  const workerdPids: number[] = [];
  const blockers: Server[] = [];

  beforeAll(async () => {
    bundleDir = buildBundle();
    sim = await startSimulatorProcess({ apiKey: SIMULATOR_API_KEY });
    work = mkdtempSync(join(tmpdir(), "sluice-lifecycle-"));
    configDir = join(work, "config");
    mkdirSync(configDir);
    writeFileSync(join(configDir, "gateway.yaml"), stringify(allowingSimulators(bundledConfig("gateway"), sim.url)));
    writeFileSync(join(configDir, "publication.yaml"), stringify(bundledConfig("publication")));
    writeFileSync(join(configDir, "backends.yaml"), stringify(backendsFor(sim.url)));
  });

  afterEach(async () => {
    for (const b of blockers.splice(0)) await new Promise((r) => b.close(r));
  });

  afterAll(async () => {
    // Whatever a failed test left: every process this file started, by its own pid or group.
    for (const s of started) {
      try {
        process.kill(-s.proc.pid!, "SIGKILL");
      } catch {
        // already gone
      }
    }
    for (const pid of workerdPids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    await sim?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  /**
   * Starts `sluice serve` in its own process group (as a terminal's foreground job is), directly
   * or under `wrapper` (a command line taking the serve command as "$@").
   */
  async function serve(options: { wrapper?: string; publicPort?: number; args?: readonly string[] } = {}): Promise<Served> {
    const publicPort = options.publicPort ?? (await freePort());
    const adminPort = await freePort();
    const state = mkdtempSync(join(work, "state-"));
    const argv = [process.execPath, CLI, "serve", "--config", configDir, "--state", state, "--public", `127.0.0.1:${publicPort}`, "--admin", `127.0.0.1:${adminPort}`, "--bundle", bundleDir, "--drain-timeout", "10s", ...(options.args ?? [])];
    const [command, ...args] = options.wrapper === undefined ? argv : ["/bin/sh", "-c", options.wrapper, "sh", ...argv];
    const proc = spawn(command!, args, {
      cwd: work,
      env: { ...process.env, SLUICE_ADMIN_TOKEN: TOKEN, SIMULATOR_API_KEY },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let out = "";
    proc.stdout!.on("data", (c: Buffer) => (out += c.toString()));
    proc.stderr!.on("data", (c: Buffer) => (out += c.toString()));
    const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => proc.once("exit", (code, signal) => done({ code, signal })));
    const s: Served = { proc, publicPort, adminPort, output: () => out, exit };
    started.push(s);
    return s;
  }

  /** Waits until the gateway answers /ready; the pid of its workerd, as serve prints it. */
  async function ready(s: Served): Promise<number> {
    await until("the gateway to be ready", async () => {
      if (s.proc.exitCode !== null) throw new Error(`serve exited early:\n${s.output()}`);
      const r = await fetch(`http://127.0.0.1:${s.publicPort}/ready`);
      await r.arrayBuffer();
      return r.ok ? true : undefined;
    }).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${s.output()}`);
    });
    // Serve has seen it too: from here on a signal means "drain, then stop".
    await until("the success banner", () => (s.output().includes("Sluice is serving") ? true : undefined), 10_000);
    const pid = Number(/workerd pid (\d+)/.exec(s.output())?.[1]);
    expect(pid).toBeGreaterThan(1);
    expect(running(pid)).toBe(true);
    workerdPids.push(pid);
    return pid;
  }

  /** Nothing of the gateway is left: workerd is gone and both ports can be bound again. */
  async function expectNothingLeft(s: Served, workerd: number): Promise<void> {
    await until("workerd to be gone", () => (running(workerd) ? undefined : true), 20_000);
    expect(await bindProblem({ host: "127.0.0.1", port: s.publicPort })).toBeUndefined();
    expect(await bindProblem({ host: "127.0.0.1", port: s.adminPort })).toBeUndefined();
  }

  const slowChat = (s: Served) =>
    fetch(`http://127.0.0.1:${s.publicPort}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: "slow one [[sim latency-ms=1500]]" }] }),
    });

  const inFlight = async (s: Served) => {
    const r = await fetch(`http://127.0.0.1:${s.adminPort}/admin/status`, { headers: { authorization: `Bearer ${TOKEN}` } });
    return ((await r.json()) as { inFlight: number }).inFlight > 0 ? true : undefined;
  };

  it("Ctrl-C (SIGINT to the whole process group) drains — a request in flight finishes — then exits, leaving nothing", async () => {
    const s = await serve();
    const workerd = await ready(s);
    const slow = slowChat(s);
    await until("the slow request to be in flight", () => inFlight(s));
    process.kill(-s.proc.pid!, "SIGINT");
    const answered = await slow;
    expect(answered.status).toBe(200);
    expect(((await answered.json()) as any).choices[0].message.content.length).toBeGreaterThan(0);
    const { code } = await s.exit;
    expect([0, 130]).toContain(code);
    expect(s.output()).toContain("SIGINT: draining");
    expect(s.output()).toMatch(/drained: .*"inFlightAtStart":1,"finished":1,"cancelled":0/);
    expect(s.output()).not.toContain("drain failed");
    await expectNothingLeft(s, workerd);
  }, 120_000);

  it("a second Ctrl-C stops at once, leaving nothing", async () => {
    const s = await serve();
    const workerd = await ready(s);
    const slow = slowChat(s).catch(() => undefined);
    await until("the slow request to be in flight", () => inFlight(s));
    process.kill(-s.proc.pid!, "SIGINT");
    await until("the drain to begin", () => (s.output().includes("draining") ? true : undefined));
    process.kill(-s.proc.pid!, "SIGINT");
    const { code } = await s.exit;
    expect(code).toBe(130);
    expect(s.output()).toContain("SIGINT again: stopping now");
    await slow;
    await expectNothingLeft(s, workerd);
  }, 120_000);

  it("SIGTERM to the launcher's pid only stops workerd too (started after checking the backend's key)", async () => {
    const s = await serve({ args: ["--check-credentials"] });
    const workerd = await ready(s);
    expect(s.output()).toMatch(/credential check: sim-local \(SIMULATOR_API_KEY\): accepted: 200 GET http:\/\/127\.0\.0\.1:\d+\/v1\/models/);
    s.proc.kill("SIGTERM");
    expect((await s.exit).code).toBe(0);
    expect(s.output()).toContain("SIGTERM: draining");
    await expectNothingLeft(s, workerd);
  }, 120_000);

  it("SIGKILL to the launcher leaves no workerd behind (it watches a pipe the launcher holds)", async () => {
    const s = await serve();
    const workerd = await ready(s);
    s.proc.kill("SIGKILL");
    expect((await s.exit).signal).toBe("SIGKILL");
    await expectNothingLeft(s, workerd);
  }, 120_000);

  it("SIGTERM to a shell that started serve and dies without passing it on (as npx's does) stops serve and workerd", async () => {
    // `; exit $?` keeps the shell from exec'ing serve: it stays serve's parent, as npm's shell does.
    const s = await serve({ wrapper: '"$@"; exit $?' });
    const workerd = await ready(s);
    const servePid = parentOf(workerd);
    expect(servePid).not.toBe(s.proc.pid);
    s.proc.kill("SIGTERM");
    expect((await s.exit).signal).toBe("SIGTERM");
    await until("serve to notice its parent is gone and stop", () => (running(servePid) ? undefined : true), 30_000);
    expect(s.output()).toMatch(/the process that started sluice serve \(pid \d+\) has exited: draining/);
    await expectNothingLeft(s, workerd);
  }, 120_000);

  it("a taken port fails the start naming the port: non-zero exit, no success banner, no native stack trace", async () => {
    const blocker = createServer();
    blockers.push(blocker);
    const port = await new Promise<number>((resolve) =>
      blocker.listen(0, "127.0.0.1", () => resolve((blocker.address() as { port: number }).port)),
    );
    const s = await serve({ publicPort: port });
    const { code } = await s.exit;
    expect(code).not.toBe(0);
    expect(s.output()).toMatch(new RegExp(`public listener's port ${port} \\(127\\.0\\.0\\.1:${port}\\) is already in use`));
    expect(s.output()).not.toContain("Sluice is serving");
    expect(s.output()).not.toContain("kj::");
    expect(s.output()).not.toMatch(/stack|exception/i);
    expect(s.output()).not.toContain("workerd pid");
  }, 60_000);
});

/** The parent pid of `pid`, from /proc. */
function parentOf(pid: number): number {
  // The command name is in parentheses and may hold spaces: the fields after the last ')' are fixed.
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
}
