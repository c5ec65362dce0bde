/**
 * The shell of a bench driver (`run.ts`, `ledger.ts`): its command line, and its process life (run
 * main, and on every way out, done, failed or SIGINT/SIGTERM, stop each process it started first).
 */
import { parseArgs, type ParseArgsOptionsConfig } from "node:util";
import { ShuttingDown, stopAll } from "./children.ts";

/** A failure the bench reports by its message alone (bad options, a refused check, a broken run). */
export class BenchError extends Error {
  override name = "BenchError";
}

type StrictConfig<T extends ParseArgsOptionsConfig> = { options: T; strict: true; allowPositionals: false };
/** The flags' values, typed from their declarations. */
export type Flags<T extends ParseArgsOptionsConfig> = ReturnType<typeof parseArgs<StrictConfig<T>>>["values"];

/**
 * Parses the command line strictly (no positionals) against `options`, which declare `--help`:
 * prints `usage` and exits 0 on `--help`; throws a {@link BenchError} ending in `usage` on a bad flag.
 */
export function parseFlags<const T extends ParseArgsOptionsConfig & { readonly help: { readonly type: "boolean" } }>(options: T, usage: string): Flags<T> {
  let values: Flags<T>;
  try {
    values = parseArgs<StrictConfig<T>>({ options, strict: true, allowPositionals: false }).values;
  } catch (err) {
    throw new BenchError(`${(err as Error).message}\n${usage}`);
  }
  if ((values as { help?: boolean }).help) {
    console.log(usage);
    process.exit(0);
  }
  return values;
}

/**
 * The number given as `--flag` (`text`), or `fallback` when the flag is absent. Throws a
 * {@link BenchError} when it is not a number in [`min`, `max`], or not an integer where one is wanted.
 */
export function numberFlag(flag: string, text: string | undefined, fallback: number, min: number, max: number, integer: boolean): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) {
    throw new BenchError(`--${flag} must be ${integer ? "an integer" : "a number"} between ${min} and ${max}, got '${text}'`);
  }
  return n;
}

/**
 * Runs `main` and exits with its code once every child is stopped. A throw prints `BENCH FAILED`
 * and exits 1; SIGINT/SIGTERM stop everything and exit 130/143. Never returns.
 */
export async function runBench(main: () => Promise<number>): Promise<never> {
  let exiting: Promise<never> | undefined;
  // The first caller's exit code wins: an interrupt during a failing run still exits 130/143.
  const shutdown = (code: number): Promise<never> => (exiting ??= stopAll().then(() => process.exit(code)));

  let interrupted = false;
  for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
    process.on(signal, () => {
      if (interrupted) return;
      interrupted = true;
      console.error(`\n${signal}: stopping every process the bench started …`);
      void shutdown(code);
    });
  }

  try {
    return await shutdown(await main());
  } catch (err) {
    // After an interrupt, whatever failed did so because its processes were being stopped.
    if (!interrupted && !(err instanceof ShuttingDown)) {
      // Plain errors (a process that did not start, a refused request) are reports; anything else is a bug here.
      const plain = err instanceof BenchError || (err instanceof Error && err.constructor === Error);
      console.error(`\nBENCH FAILED: ${plain ? (err as Error).message : err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    }
    return await shutdown(1);
  }
}
