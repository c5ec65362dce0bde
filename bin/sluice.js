#!/usr/bin/env node
// The `sluice` command. The CLI is TypeScript run by Node's type stripping (Node >= 22.18); on an
// older Node it re-runs itself on the Node 22 the project installs, forwarding signals so that
// SIGTERM still drains the gateway, and exits with its code.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { constants } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const cli = join(root, "cli", "main.ts");

if (process.features.typescript) {
  await import(cli);
} else {
  const node = join(root, "node_modules", "node", "bin", "node");
  if (!existsSync(node)) {
    process.stderr.write(`sluice: needs Node >= 22.18, or the project's Node 22 (run npm install in ${root})\n`);
    process.exit(1);
  }
  // Its own process group: Ctrl-C reaches the child once, through this process, not twice (a
  // second signal means "stop now, skip the drain").
  // Tools it runs with `#!/usr/bin/env node` (wrangler) need the same Node: it goes first on PATH.
  const env = { ...process.env, PATH: `${dirname(node)}${delimiter}${process.env.PATH ?? ""}` };
  const child = spawn(node, [cli, ...process.argv.slice(2)], { stdio: "inherit", detached: true, env });
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => child.kill(signal));
  child.on("exit", (code, signal) => process.exit(code ?? 128 + (constants.signals[signal] ?? 0)));
}
