/**
 * `npm start`: the provider simulator plus the gateway on plain `workerd serve`, with the bundled
 * default config. Prints the URLs, the demo key and the admin token; Ctrl-C stops both.
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { ROOT } from "../local-stack/build.ts";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY } from "../local-stack/stack.ts";

const gatewayYaml = parse(readFileSync(join(ROOT, "config", "gateway.yaml"), "utf8")) as {
  listeners: { public: { host: string; port: number }; admin: { host: string; port: number } };
};
const adminToken = process.env.SLUICE_ADMIN_TOKEN || `sluice-admin-${randomBytes(18).toString("base64url")}`;
const generated = !process.env.SLUICE_ADMIN_TOKEN;

const simulator = await startSimulatorProcess({ port: 9901, apiKey: SIMULATOR_API_KEY });
let gateway;
try {
  gateway = await startGateway({
    publicPort: gatewayYaml.listeners.public.port,
    host: gatewayYaml.listeners.public.host,
    adminPort: gatewayYaml.listeners.admin.port,
    adminToken,
    echo: true,
  });
} catch (err) {
  await simulator.stop();
  console.error(String(err));
  process.exit(1);
}

console.log(`
Sluice is running.
  public API   ${gateway.publicUrl}/v1  (OpenAI-compatible)
  admin API    ${gateway.adminUrl}/admin  (loopback only)
  simulator    ${simulator.url}
  demo key     sk-sluice-demo
  admin token  ${adminToken}${generated ? "  (generated; set SLUICE_ADMIN_TOKEN to choose one)" : ""}

Try:
  curl ${gateway.publicUrl}/v1/chat/completions -H 'authorization: Bearer sk-sluice-demo' \\
    -H 'content-type: application/json' -d '{"model":"sluice-chat","messages":[{"role":"user","content":"Hello"}]}'
  curl ${gateway.adminUrl}/admin/status -H 'authorization: Bearer ${adminToken}'
`);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await Promise.all([gateway.stop(), simulator.stop()]);
  process.exit(0);
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
gateway.process.once("exit", (code) => {
  if (!stopping) {
    console.error(`workerd exited with code ${code}`);
    void simulator.stop().then(() => process.exit(1));
  }
});
