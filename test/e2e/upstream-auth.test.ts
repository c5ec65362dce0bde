import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildBundle, ROOT } from "../../local-stack/build.ts";
import { freePort } from "../../local-stack/ports.ts";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { ADMIN_TOKEN, allowingSimulators, backendsFor, bundledConfig, DEMO_KEY, type Simulator } from "./support/stack.ts";

// A wrong provider key, as an operator meets it: the client hears the gateway's credential was
// refused (not an outage), and status names the backend.
describe("a provider that refuses the gateway's key", () => {
  let sim: Simulator;
  let gateway: RunningGateway;

  beforeAll(async () => {
    sim = await startSimulatorProcess({ apiKey: SIMULATOR_API_KEY });
    gateway = await startGateway({
      adminToken: ADMIN_TOKEN,
      secrets: { SIMULATOR_API_KEY: "not-the-simulator-key" },
      config: { backends: stringify(backendsFor(sim.url)), gateway: stringify(allowingSimulators(bundledConfig("gateway"), sim.url)) },
    });
  });

  afterAll(async () => {
    await gateway?.stop();
    await sim?.stop();
  });

  it("answers 502 upstream_auth_failed once (no retry), and status shows the backend as credential_rejected", async () => {
    const statusBefore = (await (await fetch(`${gateway.adminUrl}/admin/status`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as any;
    expect(statusBefore.backends).toContainEqual(expect.objectContaining({ name: "sim-local", credential: "not_used", inFlight: 0, latencyMs: null }));
    await fetch(`${sim.url}/__sim/reset`, { method: "POST" });
    const res = await fetch(`${gateway.publicUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: "Hello" }] }),
    });
    expect(res.status).toBe(502);
    expect(res.headers.get("x-sluice-error-code")).toBe("upstream_auth_failed");
    const body = (await res.json()) as { error: { code: string; type: string; message: string } };
    expect(body.error).toMatchObject({ code: "upstream_auth_failed", type: "server_error" });
    expect(body.error.message).not.toContain("not-the-simulator-key");
    const sent = (await (await fetch(`${sim.url}/__sim/requests?limit=50`)).json()) as any;
    expect((Array.isArray(sent) ? sent : sent.requests).filter((r: any) => r.path.endsWith("/chat/completions"))).toHaveLength(1);

    const status = (await (await fetch(`${gateway.adminUrl}/admin/status`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as any;
    const backend = status.backends.find((b: any) => b.name === "sim-local");
    expect(backend).toMatchObject({ credential: "credential_rejected", status: 401 });
    expect(Date.parse(backend.since)).toBeGreaterThan(0);

    const cli = spawnSync(process.execPath, [join(ROOT, "bin", "sluice.js"), "status", "--admin", gateway.adminUrl], { encoding: "utf8", env: { ...process.env, SLUICE_ADMIN_TOKEN: ADMIN_TOKEN }, timeout: 60_000 });
    expect(cli.status).toBe(0);
    expect(cli.stdout).toMatch(/backend sim-local\s+credential_rejected \(the provider answered 401 at /);
  }, 90_000);

  it("serve --check-credentials names the refused key and does not start", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-check-"));
    try {
      writeFileSync(join(dir, "gateway.yaml"), stringify(allowingSimulators(bundledConfig("gateway"), sim.url)));
      writeFileSync(join(dir, "publication.yaml"), stringify(bundledConfig("publication")));
      writeFileSync(join(dir, "backends.yaml"), stringify(backendsFor(sim.url)));
      const r = spawnSync(
        process.execPath,
        [join(ROOT, "bin", "sluice.js"), "serve", "--config", dir, "--state", join(dir, "state"), "--public", `127.0.0.1:${await freePort()}`, "--admin", `127.0.0.1:${await freePort()}`, "--bundle", buildBundle(), "--check-credentials"],
        { encoding: "utf8", env: { ...process.env, SLUICE_ADMIN_TOKEN: ADMIN_TOKEN, SIMULATOR_API_KEY: "not-the-simulator-key" }, timeout: 60_000 },
      );
      expect(r.status).toBe(1);
      expect(r.stderr).toMatch(/credential check: sim-local \(SIMULATOR_API_KEY\): refused: 401 GET http:\/\/127\.0\.0\.1:\d+\/v1\/models/);
      expect(r.stderr).toContain("cannot start: the provider refused the key of backend sim-local (secret SIMULATOR_API_KEY)");
      expect(r.stderr).not.toContain("not-the-simulator-key");
      expect(r.stderr).not.toContain("Sluice is serving");
      expect(r.stderr).not.toContain("workerd pid");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
