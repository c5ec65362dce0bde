/**
 * A bench Worker on plain `workerd serve`, from a config the caller has written: started,
 * registered with `children.ts` (so the bench stops it on success, error and interrupt) and
 * waited for until it answers.
 */
import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../local-stack/build.ts";
import { waitForHttp } from "../local-stack/ports.ts";
import { captureOutput, register, stopOne, type Stoppable } from "./children.ts";

const WORKERD = join(ROOT, "node_modules", ".bin", "workerd");

/** What to run, and where. */
export interface WorkerdOptions {
  /** What the Worker is, for reports: `<label> (workerd)` as the child's name, `<label> did not start` on failure. */
  readonly label: string;
  /** The Cap'n Proto config, listening on 127.0.0.1:`port` and answering `GET /ready`. */
  readonly configPath: string;
  readonly port: number;
  /** Scratch directory (config, bundle, state), removed once the process has stopped. */
  readonly workDir: string;
}

/** A Worker running on workerd. */
export interface RunningWorkerd extends Stoppable {
  readonly url: string;
  readonly pid: number;
  readonly alive: () => boolean;
  readonly output: () => string;
}

/**
 * Starts `workerd serve` on `o.configPath` and resolves once `/ready` answers (30 s at most); on
 * failure the process is stopped, `o.workDir` removed, and the error carries workerd's output.
 */
export async function startWorkerd(o: WorkerdOptions): Promise<RunningWorkerd> {
  // Same flags as the gateway's launcher, so every workerd process of the bench runs alike.
  const proc = spawn(WORKERD, ["serve", o.configPath, "--experimental", "--verbose"], { stdio: ["ignore", "pipe", "pipe"] });
  const output = captureOutput(proc);
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    proc.once("exit", () => {
      exited = true;
      resolve();
    }),
  );
  const stop = async () => {
    if (!exited) {
      proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 5000);
      await exit;
      clearTimeout(timer);
    }
    rmSync(o.workDir, { recursive: true, force: true });
  };
  const url = `http://127.0.0.1:${o.port}`;
  const worker = register({ name: `${o.label} (workerd)`, process: proc, url, pid: proc.pid ?? 0, alive: () => !exited, output, stop });
  try {
    await waitForHttp(`${url}/ready`, 30_000, () => !exited);
  } catch (err) {
    await stopOne(worker);
    throw new Error(`${o.label} did not start: ${String(err)}\n${output()}`);
  }
  return worker;
}
