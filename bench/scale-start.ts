/**
 * The start and the resting memory of the gateway with the bundled config and with a scale config
 * (bench/scale-config.ts), interleaved round by round (docs/performance.md, "Scale"):
 *
 *   node bench/scale-start.ts [--rounds 3] [--base DIR]
 *
 * With `--base`, another checkout (its CLI and its own bundle) runs each config too, interleaved
 * with this one, so a change is compared within one run on one box.
 * Each round times `sluice config validate` on each directory, then runs `sluice serve` on it
 * (one prebuilt bundle for both) and times the start to the first 2xx of `/health`; after `/ready`
 * answers, and once more after a `/v1/models` for a scale key, it reads the resting RSS of the
 * workerd process. Prints one JSON line per measurement and the medians.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { buildBundle, ROOT } from "../local-stack/build.ts";
import { freePort } from "../local-stack/ports.ts";
import { median } from "./stats.ts";
import { SCALE_SIZES, scaleConfigTexts, scaleKey } from "./scale-config.ts";

const NODE = process.execPath;
const ENV = { ...process.env, SLUICE_ADMIN_TOKEN: "scale-admin-token", SIMULATOR_API_KEY: "sim-local-key" };

/** RSS of a process in MiB, from /proc (Linux). */
export function rssMiB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"));
  return Number(/(\d+)/.exec(line ?? "")?.[1] ?? Number.NaN) / 1024;
}

async function until2xx(url: string, headers: Record<string, string> = {}, timeoutMs = 120_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      const res = await fetch(url, { headers });
      await res.arrayBuffer();
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > end) throw new Error(`${url} did not answer 2xx within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Seconds `sluice config validate` (the CLI at `cli`) takes on the config directory `dir`. */
export function validateSeconds(cli: string, dir: string): number {
  const t0 = performance.now();
  const res = spawnSync(NODE, [cli, "config", "validate", "--config", dir, "--no-secrets"], { encoding: "utf8" });
  if (res.status !== 0) throw new Error(`config validate failed: ${res.stderr}`);
  return (performance.now() - t0) / 1000;
}

/**
 * `sluice serve` (the CLI at `cli`, with a prebuilt bundle) on `dir`: seconds from the launch to
 * the first 2xx of `/health`, the workerd process's RSS 3 s after `/ready`, and again after a
 * `/v1/models` for `key`. The gateway is stopped before it returns.
 */
export async function serveOnce(cli: string, dir: string, bundle: string, key: string): Promise<{ startS: number; restingMiB: number; afterModelsMiB: number }> {
  const state = mkdtempSync(join(tmpdir(), "sluice-scale-state-"));
  const [pub, admin] = [await freePort(), await freePort()];
  const t0 = performance.now();
  const child = spawn(NODE, [cli, "serve", "--config", dir, "--state", state, "--bundle", bundle, "--public", `127.0.0.1:${pub}`, "--admin", `127.0.0.1:${admin}`], { env: ENV, stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  let workerd: number | undefined;
  child.stderr.on("data", (c: Buffer) => {
    err += c.toString();
    workerd ??= Number(/workerd pid (\d+)/.exec(err)?.[1]) || undefined;
  });
  try {
    await until2xx(`http://127.0.0.1:${pub}/health`);
    const startS = (performance.now() - t0) / 1000;
    await until2xx(`http://127.0.0.1:${pub}/ready`);
    // Resting: give the isolate a moment after the start's work, as an idle gateway would have.
    await new Promise((r) => setTimeout(r, 3000));
    if (workerd === undefined) throw new Error(`no workerd pid in serve's output: ${err}`);
    const restingMiB = rssMiB(workerd);
    await until2xx(`http://127.0.0.1:${pub}/v1/models`, { authorization: `Bearer ${key}` });
    await new Promise((r) => setTimeout(r, 1000));
    return { startS, restingMiB, afterModelsMiB: rssMiB(workerd) };
  } finally {
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
    rmSync(state, { recursive: true, force: true });
  }
}

/** This checkout's CLI. */
export const THIS_CLI = join(ROOT, "cli", "main.ts");

/** Writes the scale config ({@link SCALE_SIZES}) into a new temporary directory, returned; the caller removes it. */
export function writeScaleConfigDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "sluice-scale-config-"));
  for (const [name, text] of Object.entries(scaleConfigTexts())) writeFileSync(join(dir, `${name}.yaml`), text);
  return dir;
}

/** The two configs measured: the bundled one with its demo key, and the scale one with its last key. */
export function startConfigs(scaleDir: string): { readonly name: "bundled" | "scale"; readonly dir: string; readonly key: string }[] {
  return [
    { name: "bundled", dir: join(ROOT, "config"), key: "sk-sluice-demo" },
    { name: "scale", dir: scaleDir, key: scaleKey(SCALE_SIZES.tenants - 1, SCALE_SIZES.keysPerTenant - 1) },
  ];
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { rounds: { type: "string" }, base: { type: "string" } } });
  const rounds = Number(values.rounds ?? 3);
  /** The checkouts that run: this one, and the base's when given (bundled by its own build). */
  const checkouts = [{ name: "this", cli: THIS_CLI, bundle: buildBundle() }];
  if (values.base !== undefined) {
    const build = spawnSync(NODE, ["--input-type=module", "-e", `import { buildBundle } from ${JSON.stringify(join(values.base, "local-stack", "build.ts"))}; buildBundle();`], { encoding: "utf8" });
    if (build.status !== 0) throw new Error(`the base's bundle did not build: ${build.stderr}`);
    checkouts.unshift({ name: "base", cli: join(values.base, "cli", "main.ts"), bundle: join(values.base, "dist") });
  }
  const scaleDir = writeScaleConfigDir();
  const configs = startConfigs(scaleDir);
  const results: Record<string, { validateS: number[]; startS: number[]; restingMiB: number[]; afterModelsMiB: number[] }> = {};
  try {
    for (let r = 0; r < rounds; r++) {
      for (const c of configs) {
        for (const k of checkouts) {
          const name = checkouts.length > 1 ? `${k.name}/${c.name}` : c.name;
          const validateS = validateSeconds(k.cli, c.dir);
          const served = await serveOnce(k.cli, c.dir, k.bundle, c.key);
          const row = { round: r + 1, config: name, validateS, ...served };
          process.stdout.write(`${JSON.stringify(row)}\n`);
          const into = (results[name] ??= { validateS: [], startS: [], restingMiB: [], afterModelsMiB: [] });
          into.validateS.push(validateS);
          into.startS.push(served.startS);
          into.restingMiB.push(served.restingMiB);
          into.afterModelsMiB.push(served.afterModelsMiB);
        }
      }
    }
  } finally {
    rmSync(scaleDir, { recursive: true, force: true });
  }
  for (const [name, r] of Object.entries(results)) {
    const m = (xs: number[]) => Number(median(xs).toFixed(2));
    process.stdout.write(`${JSON.stringify({ config: name, median: { validateS: m(r.validateS), startS: m(r.startS), restingMiB: m(r.restingMiB), afterModelsMiB: m(r.afterModelsMiB) } })}\n`);
  }
}
