import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildBundle, ROOT } from "../../local-stack/build.ts";
import { freePort } from "../../local-stack/ports.ts";
import { startSimulatorProcess, SIMULATOR_API_KEY } from "../../local-stack/stack.ts";
import { freshFetch } from "./support/raw-http.ts";
import { readValidatedConfig } from "../../src/config/validated-config.ts";
import { allowingSimulators, backendsFor, bundledConfig, DEMO_KEY, type Simulator } from "./support/stack.ts";

const TOKEN = "cli-e2e-admin-token";

/** A test that runs many `sluice` commands: each is a Node start-up, seconds apiece on a busy machine. */
const CLI_RUNS_TIMEOUT = 120_000;

/** These tests leave the gateway idle for seconds at a time (a CLI command runs, a gateway restarts): each request takes a fresh connection. */
const fetch = freshFetch;
const CLI = join(ROOT, "bin", "sluice.js");

/** Runs the `sluice` command (through its bin launcher) to completion. */
function sluice(args: readonly string[], env: Record<string, string | undefined> = {}) {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd: ROOT, encoding: "utf8", env: { ...process.env, SLUICE_ADMIN_TOKEN: TOKEN, ...env }, timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Runs many `sluice` command lines at once (each is a Node start-up: one after another they take long on a busy machine). */
function sluiceAll(runs: readonly (readonly [readonly string[], Record<string, string | undefined>?])[]): Promise<{ status: number | null; stdout: string; stderr: string }[]> {
  return Promise.all(
    runs.map(
      ([args, env = {}]) =>
        new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve, reject) => {
          const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, env: { ...process.env, SLUICE_ADMIN_TOKEN: TOKEN, ...env } });
          let stdout = "";
          let stderr = "";
          child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
          child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
          child.on("error", reject);
          child.on("close", (status) => resolve({ status, stdout, stderr }));
        }),
    ),
  );
}

/** A running `sluice serve`: its process, its output so far, and a way to wait for its exit. */
interface Served {
  readonly proc: ChildProcess;
  readonly publicUrl: string;
  readonly adminUrl: string;
  output(): string;
  exit: Promise<number | null>;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe("the sluice CLI against a real gateway", () => {
  let sim: Simulator;
  let work: string;
  let configDir: string;
  let stateDir: string;
  let publicPort: number;
  let adminPort: number;
  let served: Served | undefined;
  let bundleDir: string;

  function serve(extraEnv: Record<string, string | undefined> = {}, args: readonly string[] = []): Served {
    const proc = spawn(
      process.execPath,
      [CLI, "serve", "--config", configDir, "--state", stateDir, "--public", `127.0.0.1:${publicPort}`, "--admin", `127.0.0.1:${adminPort}`, "--bundle", bundleDir, "--drain-timeout", "10s", ...args],
      // Its own process group, so that a forced stop takes the workerd it started along with it.
      { cwd: work, env: { ...process.env, SLUICE_ADMIN_TOKEN: TOKEN, SIMULATOR_API_KEY, ...extraEnv }, stdio: ["ignore", "pipe", "pipe"], detached: true },
    );
    let out = "";
    proc.stdout!.on("data", (c: Buffer) => (out += c.toString()));
    proc.stderr!.on("data", (c: Buffer) => (out += c.toString()));
    const exit = new Promise<number | null>((done) => proc.once("exit", (code) => done(code)));
    return { proc, publicUrl: `http://127.0.0.1:${publicPort}`, adminUrl: `http://127.0.0.1:${adminPort}`, output: () => out, exit };
  }

  async function ready(s: Served): Promise<void> {
    await until("the gateway to be ready", async () => {
      if (s.proc.exitCode !== null) throw new Error(`serve exited early:\n${s.output()}`);
      const r = await fetch(`${s.publicUrl}/ready`);
      await r.arrayBuffer();
      return r.ok ? true : undefined;
    }).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${s.output()}`);
    });
  }

  /** Kills `sluice serve` and every process it started (its workerd); nothing when they are gone. */
  function killGroup(s: Served): void {
    try {
      process.kill(-s.proc.pid!, "SIGKILL");
    } catch {
      // ESRCH: the group has already exited.
    }
  }

  async function stop(s: Served): Promise<number | null> {
    s.proc.kill("SIGTERM");
    // Bounded: a stop that hangs fails the test that waits for it, not the whole file's cleanup.
    const killer = setTimeout(() => killGroup(s), 40_000);
    try {
      return await s.exit;
    } finally {
      clearTimeout(killer);
    }
  }

  const chat = (content: string) =>
    fetch(`http://127.0.0.1:${publicPort}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content }] }),
    });

  const adminJson = async (path: string) => {
    const r = await fetch(`http://127.0.0.1:${adminPort}/admin${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(r.status).toBe(200);
    return (await r.json()) as any;
  };

  beforeAll(async () => {
    bundleDir = buildBundle();
    sim = await startSimulatorProcess({ apiKey: SIMULATOR_API_KEY });
    work = mkdtempSync(join(tmpdir(), "sluice-cli-"));
    configDir = join(work, "my-config");
    stateDir = join(work, "my-state");
    mkdirSync(configDir);
    writeFileSync(join(configDir, "gateway.yaml"), stringify(allowingSimulators(bundledConfig("gateway"), sim.url)));
    writeFileSync(join(configDir, "publication.yaml"), stringify(bundledConfig("publication")));
    writeFileSync(join(configDir, "backends.yaml"), stringify(backendsFor(sim.url)));
    publicPort = await freePort();
    adminPort = await freePort();
    served = serve();
    await ready(served);
  });

  afterAll(async () => {
    try {
      if (served && served.proc.exitCode === null) await stop(served);
    } finally {
      // Whatever happened above (a test that timed out mid-drain included), no workerd outlives the file.
      if (served) killGroup(served);
      await sim?.stop();
      if (work) rmSync(work, { recursive: true, force: true });
    }
  }, 60_000);

  const admin = () => ["--admin", `http://127.0.0.1:${adminPort}`];

  it("prints its version, the workerd version and the compatibility date", () => {
    const r = sluice(["version", "--json"]);
    expect(r.status).toBe(0);
    const v = JSON.parse(r.stdout);
    expect(v.sluice).toMatch(/^\d+\.\d+\.\d+/);
    expect(v.workerd).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(v.compatibilityDate).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    // On a Node without type stripping (system Node 20, say) the launcher re-runs the CLI on the
    // project's Node 22 and passes its exit code on.
    const old = spawnSync(process.execPath, ["--no-experimental-strip-types", CLI, "version", "--json"], { cwd: ROOT, encoding: "utf8" });
    expect(old.status).toBe(0);
    expect(JSON.parse(old.stdout)).toEqual(v);
    expect(spawnSync(process.execPath, ["--no-experimental-strip-types", CLI, "no-such-command"], { cwd: ROOT }).status).toBe(2);
  });

  it("answers usage errors with exit 2 and --help with 0 on every command", async () => {
    const helps = [["serve"], ["config"], ["status"], ["backends", "list"], ["routes", "list"], ["drain"], ["resume"], ["budgets", "balance"], ["publish"], ["publication", "history"], ["publication", "rollback"], ["publication", "canary", "promote"], ["keys", "list"], ["keys", "create"], ["keys", "rotate"], ["version"]];
    const [none, unknown, bad, serve, badPublic, badTimeout, noTenant, noBackend, ...helped] = await sluiceAll([
      [[]],
      [["frobnicate"]],
      [["status", "--bogus"]],
      [["serve"]],
      [["serve", "--config", configDir, "--public", "localhost"]],
      [["drain", ...admin(), "--timeout", "soon"]],
      [["budgets", "balance", ...admin()]],
      [["backends", "show", ...admin()]],
      ...helps.map((cmd) => [[...cmd, "--help"]] as const),
    ]);
    expect(none!.status).toBe(2);
    expect(unknown!.status).toBe(2);
    expect(bad!.status).toBe(2);
    expect(bad!.stderr).toContain("'--bogus'");
    expect(serve!.stderr).toContain("--config DIR is required");
    expect(badPublic!.status).toBe(2);
    expect(badTimeout!.status).toBe(2);
    expect(noTenant!.status).toBe(2);
    expect(noBackend!.status).toBe(2);
    helps.forEach((cmd, i) => {
      expect(helped[i]!.status, cmd.join(" ")).toBe(0);
      expect(helped[i]!.stdout, cmd.join(" ")).toMatch(/^Usage: sluice /);
    });
  }, CLI_RUNS_TIMEOUT);

  it("validates a config directory, naming file and path of every problem, and prints it redacted", () => {
    const ok = sluice(["config", "validate", "--config", configDir], { SIMULATOR_API_KEY });
    expect(ok.status).toBe(0);
    expect(ok.stdout).toContain("config OK");
    // The secrets the config names must be set, as serve requires; --no-secrets skips that (CI).
    const unset = sluice(["config", "validate", "--config", configDir], { SIMULATOR_API_KEY: "", SLUICE_ADMIN_TOKEN: undefined });
    expect(unset.status).toBe(1);
    expect(unset.stderr).toMatch(/^gateway\.yaml: security\.adminTokenSecret: secret SLUICE_ADMIN_TOKEN is not set in the environment$/m);
    expect(unset.stderr).toMatch(/^backends\.yaml: backends\[0\]\.credential\.secret \(sim-local\): secret SIMULATOR_API_KEY is not set in the environment$/m);
    expect(unset.stderr).toContain("--no-secrets");
    const skipped = sluice(["config", "validate", "--config", configDir, "--no-secrets"], { SIMULATOR_API_KEY: "", SLUICE_ADMIN_TOKEN: undefined });
    expect(skipped.status).toBe(0);
    // A backend's TLS client certificate and key are read by serve at start: validate names them too.
    const tlsDir = join(work, "tls-config");
    mkdirSync(tlsDir, { recursive: true });
    writeFileSync(join(tlsDir, "gateway.yaml"), stringify(allowingSimulators(bundledConfig("gateway"), sim.url)));
    writeFileSync(join(tlsDir, "publication.yaml"), stringify(bundledConfig("publication")));
    const withTls = backendsFor(sim.url);
    const tls = { binding: "PRIVATE_TLS", clientCertificate: { certificateSecret: "PRIVATE_CLIENT_CERT", keySecret: "PRIVATE_CLIENT_KEY" } };
    withTls.backends.push({ name: "private", protocol: "openai-chat", baseUrl: `${sim.url.replace("http:", "https:")}/v1`, capabilities: ["chat"], tls });
    withTls.pools.push({ name: "private", members: [{ backend: "private", model: "llama" }] });
    writeFileSync(join(tlsDir, "backends.yaml"), stringify(withTls));
    const tlsUnset = sluice(["config", "validate", "--config", tlsDir], { SIMULATOR_API_KEY, PRIVATE_CLIENT_CERT: "x" });
    expect(tlsUnset.status, tlsUnset.stderr).toBe(1);
    expect(tlsUnset.stderr).toMatch(/^backends\.yaml: backends\[\d+\]\.tls\.clientCertificate\.keySecret \(private\): secret PRIVATE_CLIENT_KEY is not set in the environment$/m);
    expect(tlsUnset.stderr).not.toContain("PRIVATE_CLIENT_CERT");
    const eff = sluice(["config", "print-effective", "--config", configDir, "--json"]);
    expect(eff.status).toBe(0);
    const effective = JSON.parse(eff.stdout);
    expect(effective.gateway.listeners.admin).toEqual({ host: "127.0.0.1", port: 8788 });
    expect(JSON.stringify(effective)).toContain("(redacted)");
    const broken = join(work, "broken");
    mkdirSync(broken, { recursive: true });
    const g = bundledConfig("gateway");
    g.traffic.retryForever = true;
    writeFileSync(join(broken, "gateway.yaml"), stringify(g));
    writeFileSync(join(broken, "publication.yaml"), stringify(bundledConfig("publication")));
    const missing = sluice(["config", "validate", "--config", broken]);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(/^backends\.yaml: \(file\): cannot read .*backends\.yaml: ENOENT$/m);
    const b = backendsFor(sim.url);
    b.pools = b.pools.filter((p: any) => p.name !== "sim-large");
    writeFileSync(join(broken, "backends.yaml"), stringify(b));
    const r = sluice(["config", "validate", "--config", broken]);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^gateway\.yaml: traffic\.retryForever: unknown key$/m);
    // serve refuses the same directory before starting anything.
    const s = sluice(["serve", "--config", broken, "--public", "127.0.0.1:1", "--admin", "127.0.0.1:2"]);
    expect(s.status).toBe(1);
    expect(s.stderr).toContain("gateway.yaml: traffic.retryForever: unknown key");
  }, CLI_RUNS_TIMEOUT);

  it("refuses to serve while a secret the config names is unset, naming it and where it is named", () => {
    const r = sluice(["serve", "--config", configDir, "--state", join(work, "unused"), "--public", "127.0.0.1:1", "--admin", "127.0.0.1:2", "--bundle", bundleDir, "--secret", "EXTRA_PROVIDER_KEY"], {
      SIMULATOR_API_KEY: "",
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("missing secret SIMULATOR_API_KEY (named by backends.yaml: backends[0].credential.secret (sim-local))");
    expect(r.stderr).toContain("missing secret EXTRA_PROVIDER_KEY (named by --secret)");
  });

  it("hands workerd the config it validated, so the Worker does not parse and check the YAML again", async () => {
    const capnp = readFileSync(join(stateDir, "sluice.capnp"), "utf8");
    expect(capnp).toContain(`(name = "SLUICE_VALIDATED_CONFIG", text = embed "validated-config.json")`);
    const handed = readValidatedConfig(readFileSync(join(stateDir, "validated-config.json"), "utf8"));
    // What the running gateway serves is that config: its entrypoints are the validated ones.
    const models = (await (await fetch(`http://127.0.0.1:${publicPort}/v1/models`, { headers: { authorization: `Bearer ${DEMO_KEY}` } })).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id).sort()).toEqual(handed.config.publication.entrypoints.map((e) => e.name).sort());
  });

  it("status, backends list and routes list read the running gateway, as tables and as JSON", () => {
    const st = sluice(["status", ...admin()]);
    expect(st.status).toBe(0);
    expect(st.stdout).toMatch(/^state\s+serving$/m);
    expect(JSON.parse(sluice(["status", ...admin(), "--json"]).stdout)).toMatchObject({ draining: false, snapshot: { revision: 1 } });
    const b = sluice(["backends", "list", ...admin()]);
    expect(b.status).toBe(0);
    expect(b.stdout).toMatch(/^sim-local\s+openai-chat\s+http:\/\/127\.0\.0\.1:\d+\/v1\s+SIMULATOR_API_KEY \(bearer\)/m);
    expect(JSON.parse(sluice(["backends", "list", ...admin(), "--json"]).stdout).snapshot.backends.map((x: any) => x.name)).toEqual(["sim-local"]);
    const r = sluice(["routes", "list", ...admin()]);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^sluice-chat\s+\(default\)\s+1\s+chat-small\s+sim-small\s+sim-local:sim-small\s+yes$/m);
  }, CLI_RUNS_TIMEOUT);

  it("finds the admin listener in gateway.yaml of --config when no --admin is given", () => {
    const g = bundledConfig("gateway");
    g.listeners.admin = { host: "127.0.0.1", port: adminPort };
    const dir = join(work, "admin-from-config");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "gateway.yaml"), stringify(g));
    const r = sluice(["status", "--config", dir, "--json"], { SLUICE_ADMIN_URL: undefined });
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout).draining).toBe(false);
  });

  it("fails with exit 1 and the cause when the admin API is unreachable or refuses the token; 2 without a token", async () => {
    const closed = await freePort();
    const down = sluice(["status", "--admin", `http://127.0.0.1:${closed}`]);
    expect(down.status).toBe(1);
    // The whole URL it tried, so a wrong port or path is plain.
    expect(down.stderr).toContain(`cannot reach the admin API: GET http://127.0.0.1:${closed}/admin/status: ECONNREFUSED`);
    const denied = sluice(["status", ...admin()], { SLUICE_ADMIN_TOKEN: "wrong-token" });
    expect(denied.status).toBe(1);
    expect(denied.stderr).toContain(`refused the token in SLUICE_ADMIN_TOKEN: GET http://127.0.0.1:${adminPort}/admin/status: 401 admin_unauthorized`);
    const none = sluice(["status", ...admin()], { SLUICE_ADMIN_TOKEN: "" });
    expect(none.status).toBe(2);
    // Every admin command fails the same way, and a refused drain changes nothing.
    const cmds = [["backends", "list"], ["routes", "list"], ["drain", "--timeout", "1s"], ["resume"], ["budgets", "balance", "demo"]];
    const results = await sluiceAll(cmds.flatMap((cmd) => [[[...cmd, "--admin", `http://127.0.0.1:${closed}`]], [[...cmd, ...admin()], { SLUICE_ADMIN_TOKEN: "wrong-token" }]] as const));
    cmds.forEach((cmd, i) => {
      const d = results[2 * i]!;
      expect(d.status, cmd.join(" ")).toBe(1);
      expect(d.stderr, cmd.join(" ")).toContain(`cannot reach the admin API: ${cmd[0] === "drain" || cmd[0] === "resume" ? "POST" : "GET"} http://127.0.0.1:${closed}/admin/`);
      const t = results[2 * i + 1]!;
      expect(t.status, cmd.join(" ")).toBe(1);
      expect(t.stderr, cmd.join(" ")).toContain("refused the token");
    });
    expect((await fetch(`http://127.0.0.1:${publicPort}/ready`)).status).toBe(200);
    const unknown = sluice(["budgets", "balance", "no-such-tenant", ...admin()]);
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toContain(`GET http://127.0.0.1:${adminPort}/admin/budgets/no-such-tenant/balance failed: 404`);
  }, CLI_RUNS_TIMEOUT);

  it("budgets balance shows what requests spent", async () => {
    const res = await chat("hello");
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const json = await until("the settlement to reach the ledger", async () => {
      const r = sluice(["budgets", "balance", "demo", ...admin(), "--json"]);
      expect(r.status).toBe(0);
      const b = JSON.parse(r.stdout);
      return b.balances.some((s: any) => (s.money?.spent ?? 0) > 0) ? b : undefined;
    });
    const tenant = json.balances.find((s: any) => s.scope === "tenant:demo");
    expect(tenant.money.spent).toBeGreaterThan(0);
    const table = sluice(["budgets", "balance", "demo", ...admin()]);
    expect(table.stdout).toMatch(/^tenant:demo\s+money:USD\s+\d+\.\d{6} USD\s+\d+\.\d{6} USD/m);
  });

  it("drain stops admission and resume restores it", async () => {
    const d = sluice(["drain", ...admin(), "--timeout", "5s", "--json"]);
    expect(d.status).toBe(0);
    expect(JSON.parse(d.stdout)).toMatchObject({ status: "drained", cancelled: 0 });
    expect((await fetch(`http://127.0.0.1:${publicPort}/ready`)).status).toBe(503);
    expect(JSON.parse(sluice(["status", ...admin(), "--json"]).stdout).draining).toBe(true);
    const r = sluice(["resume", ...admin()]);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain("resumed: serving");
    expect((await fetch(`http://127.0.0.1:${publicPort}/ready`)).status).toBe(200);
  });

  it("SIGTERM drains (a request in flight finishes), and a restart on the same state keeps spend and pending reconciliations", async () => {
    // One attempt whose usage never arrives: it waits in reconciliation, which must survive the restart.
    const unknown = await chat("no usage please [[sim fault=omit-usage]]");
    expect(unknown.status).toBe(200);
    await unknown.arrayBuffer();
    const before = await until("the unknown-usage attempt to reach reconciliation", async () => {
      const rec = await adminJson("/budgets/demo/reconciliations");
      return rec.pending.length > 0 ? rec : undefined;
    });
    const balanceBefore = (await adminJson("/budgets/demo/balance")).balances;

    const slow = chat("slow one [[sim latency-ms=1500]]");
    await until("the slow request to be in flight", async () => ((await adminJson("/status")).inFlight > 0 ? true : undefined));
    served!.proc.kill("SIGTERM");
    const answered = await slow;
    expect(answered.status).toBe(200);
    expect(((await answered.json()) as any).choices[0].message.content.length).toBeGreaterThan(0);
    expect(await served!.exit).toBe(0);
    expect(served!.output()).toContain("SIGTERM: draining");
    expect(served!.output()).toMatch(/drained: .*"inFlightAtStart":1,"finished":1,"cancelled":0/);

    served = serve();
    await ready(served);
    const after = await adminJson("/budgets/demo/reconciliations");
    expect(after).toEqual(before);
    const balanceAfter = (await adminJson("/budgets/demo/balance")).balances;
    // The slow request settled during the drain: everything spent before it is still there, and
    // nothing is held any more.
    for (const s of balanceBefore) {
      const a = balanceAfter.find((x: any) => x.scope === s.scope);
      if (s.money) {
        expect(a.money.spent, s.scope).toBeGreaterThan(s.money.spent);
        expect(a.money.pending, s.scope).toBe(s.money.pending);
        expect(a.money.held, s.scope).toBe(a.money.pending);
      }
    }
    expect(balanceBefore.some((s: any) => s.money && s.money.pending > 0)).toBe(true);
  }, 120_000);
});
