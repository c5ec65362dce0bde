import { spawn } from "node:child_process";
import { join } from "node:path";
import { ROOT } from "../../../local-stack/build.ts";

/** What a `sluice` command printed and how it exited. */
export interface CliRun {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs one `sluice` admin command (through its bin launcher) against `adminUrl`, with `token` as
 * the admin token; resolves when it exits. Asynchronous, so the test's own servers keep answering.
 */
export function sluiceAdmin(adminUrl: string, token: string, ...args: string[]): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(ROOT, "bin", "sluice.js"), ...args, "--admin", adminUrl], { cwd: ROOT, env: { ...process.env, SLUICE_ADMIN_TOKEN: token } });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", reject);
    child.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

/** Polls `ok` every 50 ms until it holds; resolves with how long that took, rejects after `ms`. */
export async function within(ms: number, ok: () => Promise<boolean>): Promise<number> {
  const t0 = Date.now();
  while (!(await ok())) {
    if (Date.now() - t0 > ms) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return Date.now() - t0;
}
