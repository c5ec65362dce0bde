/**
 * `npm start`: the two-command demo. The provider simulator plus the gateway, started the way
 * `sluice serve` starts it, with the bundled config. Prints the URLs, the demo key and the admin
 * token; Ctrl-C drains and stops both.
 *
 *   npm start [-- --simulator-port N] [--state DIR]
 *
 * The simulator listens on 9901 unless `--simulator-port` (or SLUICE_SIMULATOR_PORT) says
 * otherwise; the demo's backends are pointed at it. State is a fresh temporary directory unless
 * `--state DIR` is given: the demo starts clean, `sluice serve` is for state that must last.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { constants as osConstants, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { parse, stringify } from "yaml";
import { ROOT } from "../local-stack/build.ts";
import { startSimulatorProcess, SIMULATOR_API_KEY } from "../local-stack/stack.ts";
import { watchParent } from "../local-stack/parent-watch.ts";
import { readConfigDir } from "../cli/config-dir.ts";
import { CliError } from "../cli/cli-error.ts";
import { DEFAULT_DRAIN_MS, startServe } from "../cli/commands/serve.ts";

const DEFAULT_SIMULATOR_PORT = 9901;

let flags;
try {
  flags = parseArgs({ options: { "simulator-port": { type: "string" }, state: { type: "string" } }, strict: true }).values;
} catch (err) {
  console.error(`npm start: ${(err as Error).message}`);
  process.exit(2);
}
const portText = flags["simulator-port"] ?? process.env.SLUICE_SIMULATOR_PORT ?? String(DEFAULT_SIMULATOR_PORT);
const simulatorPort = Number(portText);
if (!Number.isInteger(simulatorPort) || simulatorPort < 1 || simulatorPort > 65535) {
  console.error(`npm start: the simulator port must be an integer from 1 to 65535, got '${portText}'`);
  process.exit(2);
}
const adminToken = process.env.SLUICE_ADMIN_TOKEN || `sluice-admin-${randomBytes(18).toString("base64url")}`;
const generated = !process.env.SLUICE_ADMIN_TOKEN;
const work = mkdtempSync(join(tmpdir(), "sluice-demo-"));
const cleanUp = () => rmSync(work, { recursive: true, force: true });

let simulator;
try {
  simulator = await startSimulatorProcess({ port: simulatorPort, apiKey: SIMULATOR_API_KEY });
} catch (err) {
  console.error(`npm start: the provider simulator did not start on port ${simulatorPort}: ${(err as Error).message}`);
  console.error("Choose another port with: npm start -- --simulator-port N");
  cleanUp();
  process.exit(1);
}

// The bundled config, with the demo backends pointed at the simulator's port, and the egress
// allowlist naming that port instead of the default one.
const configDir = join(work, "config");
mkdirSync(configDir);
writeFileSync(join(configDir, "publication.yaml"), readFileSync(join(ROOT, "config", "publication.yaml")));
const gatewayConfig = parse(readFileSync(join(ROOT, "config", "gateway.yaml"), "utf8")) as { security: { egress: { allow: string[] } } };
const egress = gatewayConfig.security.egress;
egress.allow = egress.allow.map((h) => (h === `127.0.0.1:${DEFAULT_SIMULATOR_PORT}` ? `127.0.0.1:${simulatorPort}` : h));
writeFileSync(join(configDir, "gateway.yaml"), stringify(gatewayConfig));
const backends = parse(readFileSync(join(ROOT, "config", "backends.yaml"), "utf8")) as { backends: { baseUrl: string }[] };
for (const b of backends.backends) b.baseUrl = b.baseUrl.replace(`://127.0.0.1:${DEFAULT_SIMULATOR_PORT}/`, `://127.0.0.1:${simulatorPort}/`);
writeFileSync(join(configDir, "backends.yaml"), stringify(backends));

let gateway;
try {
  const config = await readConfigDir(configDir);
  gateway = await startServe({
    config,
    stateDir: flags.state ?? join(work, "state"),
    publicAddress: config.config.gateway.listeners.public,
    adminAddress: config.config.gateway.listeners.admin,
    env: { ...process.env, SIMULATOR_API_KEY, [config.config.gateway.security.adminTokenSecret]: adminToken },
  });
} catch (err) {
  await simulator.stop();
  cleanUp();
  console.error(`npm start: ${err instanceof CliError ? err.message : String(err)}`);
  process.exit(1);
}

console.log(`
Sluice is running.
  public API   ${gateway.publicUrl}/v1  (OpenAI-compatible)
  admin API    ${gateway.adminUrl}/admin
  console      ${gateway.adminUrl}/admin/console  (sign in with the admin token)
  metrics      ${gateway.metricsUrl}${gateway.metricsUrl.endsWith("/admin/metrics") ? "  (admin token as bearer)" : "  (Prometheus text)"}
  simulator    ${simulator.url}
  demo key     sk-sluice-demo
  admin token  ${adminToken}${generated ? "  (generated; set SLUICE_ADMIN_TOKEN to choose one)" : ""}

Try:
  curl ${gateway.publicUrl}/v1/chat/completions -H 'authorization: Bearer sk-sluice-demo' \\
    -H 'content-type: application/json' -d '{"model":"sluice-chat","messages":[{"role":"user","content":"Hello"}]}'
  SLUICE_ADMIN_TOKEN=${adminToken} npx sluice status
`);

let stopping = false;
// Ctrl-C reaches this process only (the gateway and the simulator run in their own process
// groups): the first drains, then stops both; a second stops both at once.
const stop = async (signal: NodeJS.Signals | number) => {
  if (stopping) {
    if (typeof signal === "number") return;
    console.error(`${signal} again: stopping now`);
    await Promise.all([gateway.kill(), simulator.stop()]);
    cleanUp();
    process.exit(128 + osConstants.signals[signal]);
  }
  stopping = true;
  stopWatchingParent();
  if (typeof signal === "number") console.error(`the process that started npm start (pid ${signal}) has exited: stopping`);
  const drained = await gateway.stop(DEFAULT_DRAIN_MS);
  await simulator.stop();
  cleanUp();
  process.exit(drained ? 0 : 1);
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
const stopWatchingParent = watchParent(stop);
void gateway.exited.then(async (code) => {
  if (stopping) return;
  stopWatchingParent();
  console.error(`workerd exited with code ${code}`);
  await simulator.stop();
  cleanUp();
  process.exit(1);
});
