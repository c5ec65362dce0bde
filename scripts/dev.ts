/**
 * `npm run dev`: the simulator plus the gateway under `wrangler dev` (live reload). The public and
 * admin APIs listen where config/gateway.yaml's listeners say; the admin API through a dev-only
 * proxy Worker (wrangler dev serves one entrypoint per port). For benchmarks and production-like
 * runs use `npm start` or `sluice serve` (plain workerd).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { OFFLINE_ENV, ROOT } from "../local-stack/build.ts";
import { waitForHttp } from "../local-stack/ports.ts";
import { startSimulatorProcess, SIMULATOR_API_KEY } from "../local-stack/stack.ts";
import { readConfigDir } from "../cli/config-dir.ts";
import { localUrl } from "../cli/address.ts";

const adminToken = process.env.SLUICE_ADMIN_TOKEN || `sluice-admin-${randomBytes(18).toString("base64url")}`;
const wrangler = join(ROOT, "node_modules", ".bin", "wrangler");
const env = { ...process.env, ...OFFLINE_ENV };

const { listeners } = (await readConfigDir(join(ROOT, "config"))).config.gateway;
const simulator = await startSimulatorProcess({ port: 9901, apiKey: SIMULATOR_API_KEY });
const children: ChildProcess[] = [
  spawn(wrangler, ["dev", "--ip", listeners.public.host, "--port", String(listeners.public.port), "--var", `SLUICE_ADMIN_TOKEN:${adminToken}`, "--inspector-port", "9229"], {
    cwd: ROOT,
    env,
    stdio: "inherit",
  }),
  spawn(wrangler, ["dev", "-c", "dev-admin-proxy/wrangler.toml", "--ip", listeners.admin.host, "--port", String(listeners.admin.port), "--inspector-port", "9230"], {
    cwd: ROOT,
    env,
    stdio: "inherit",
  }),
];

const stop = async () => {
  for (const c of children) c.kill("SIGTERM");
  await simulator.stop();
  process.exit(0);
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
for (const c of children) c.once("exit", (code) => code !== 0 && code !== null && void stop());

await waitForHttp(`${localUrl(listeners.public)}/ready`, 60_000);
console.log(`
Sluice (wrangler dev) is running.
  public API   ${localUrl(listeners.public)}/v1
  admin API    ${localUrl(listeners.admin)}/admin
  demo key     sk-sluice-demo
  admin token  ${adminToken}
`);
