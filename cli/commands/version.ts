import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../../local-stack/build.ts";
import { parseFlags } from "../args.ts";
import { compatibilitySettings } from "../workerd-config.ts";

export const VERSION_HELP = `Usage: sluice version [--json] [--workerd PATH]

The package version, the workerd version serve runs, and the compatibility date and flags the
Worker is built and run with.
`;

/** `sluice version`. */
export function versionCommand(argv: readonly string[]): number {
  const args = parseFlags(argv, { json: { type: "boolean" }, workerd: { type: "string" } }, { min: 0, max: 0, names: "" });
  if (args.help) {
    process.stdout.write(VERSION_HELP);
    return 0;
  }
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
  const workerd = (args.values.workerd as string | undefined) ?? process.env.SLUICE_WORKERD ?? join(ROOT, "node_modules", ".bin", "workerd");
  const res = spawnSync(workerd, ["--version"], { encoding: "utf8" });
  // workerd prints `workerd 2026-08-15` (its build's newest compatibility date).
  const workerdVersion = res.status === 0 ? res.stdout.trim().replace(/^workerd\s+/, "") : null;
  const compat = compatibilitySettings();
  const info = { sluice: pkg.version, workerd: workerdVersion, compatibilityDate: compat.date, compatibilityFlags: compat.flags };
  if (args.values.json === true) process.stdout.write(`${JSON.stringify(info, null, 2)}\n`);
  else process.stdout.write(`sluice ${info.sluice}\nworkerd ${info.workerd ?? `(not found at ${workerd})`}\ncompatibility date ${info.compatibilityDate}${compat.flags.length ? ` (flags: ${compat.flags.join(", ")})` : ""}\n`);
  return workerdVersion === null ? 1 : 0;
}
