import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildBundle, ROOT } from "../../local-stack/build.ts";
import { freePort } from "../../local-stack/ports.ts";
import { startSimulatorProcess, SIMULATOR_API_KEY } from "../../local-stack/stack.ts";
import { fetchTrusting } from "./support/https-fetch.ts";
import { allowingSimulators, backendsFor, bundledConfig, DEMO_KEY, type Simulator } from "./support/stack.ts";
import { createTestCa } from "./support/test-ca.ts";

// No container engine here: the image's entrypoint runs natively instead, the same script on the
// same bundle with the same renderer, configured through the environment variables the image sets.
const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8");
const finalStage = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "));

describe("the Dockerfile", () => {
  it("runs the entrypoint as a non-root user, with a health check, both ports and a state volume", () => {
    expect(finalStage).toMatch(/^ENTRYPOINT \["\/app\/container\/entrypoint\.sh"\]$/m);
    expect(finalStage).toMatch(/^USER sluice$/m);
    expect(finalStage).toMatch(/^HEALTHCHECK .*CMD \["node", "\/app\/container\/healthcheck\.js"\]$/m);
    expect(finalStage).toMatch(/^EXPOSE 8080 8081$/m);
    expect(finalStage).toMatch(/^VOLUME \["\/var\/lib\/sluice"\]$/m);
    expect(finalStage).toMatch(/^STOPSIGNAL SIGTERM$/m);
    // The image's environment points the entrypoint at the image's workerd and bundle.
    expect(finalStage).toMatch(/SLUICE_WORKERD=\/usr\/local\/bin\/workerd/);
    expect(finalStage).toMatch(/SLUICE_HOME=\/app/);
  });

  it("keeps the admin listener on the container's loopback unless SLUICE_ADMIN says otherwise", () => {
    const entrypoint = readFileSync(join(ROOT, "container", "entrypoint.sh"), "utf8");
    expect(entrypoint).toContain('--admin "${SLUICE_ADMIN:-127.0.0.1:8081}"');
    expect(entrypoint).toContain('--public "${SLUICE_PUBLIC:-0.0.0.0:8080}"');
  });

  it("builds the bundle the way every other path does, on the Node the project pins", () => {
    expect(dockerfile).toMatch(/^RUN npm run build && cp node_modules\/workerd\/bin\/workerd \/workerd/m);
    const pinned = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { devDependencies: Record<string, string> }).devDependencies.node;
    expect(dockerfile).toContain(`ARG NODE_IMAGE=node:${pinned}-bookworm-slim`);
    expect(readFileSync(join(ROOT, "package.json"), "utf8")).toMatch(/"build": "node scripts\/build\.ts"/);
  });
});

describe("the image's entrypoint, run natively", () => {
  let sim: Simulator;
  let work: string;
  let bundleDir: string;

  beforeAll(async () => {
    bundleDir = buildBundle();
    sim = await startSimulatorProcess({ apiKey: SIMULATOR_API_KEY });
    work = mkdtempSync(join(tmpdir(), "sluice-entrypoint-"));
  });

  afterAll(async () => {
    await sim?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  /** The environment the image gives its entrypoint, pointed at this test's directories and ports. */
  const entrypointEnv = (config: string, state: string, publicAddress: string, adminAddress: string) => ({
    ...process.env,
    // The image's `node` is the project's Node 22; so is the one running this test.
    PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ""}`,
    SLUICE_CONFIG_DIR: config,
    SLUICE_STATE_DIR: state,
    SLUICE_PUBLIC: publicAddress,
    SLUICE_ADMIN: adminAddress,
    SLUICE_BUNDLE_DIR: bundleDir,
    SLUICE_WORKERD: join(ROOT, "node_modules", "workerd", "bin", "workerd"),
    SLUICE_DRAIN_TIMEOUT: "5s",
  });

  it("serves a request, passes the image's health check, renders no secret into its config, and drains on SIGTERM", async () => {
    const config = join(work, "etc-sluice");
    const state = join(work, "var-lib-sluice");
    mkdirSync(config);
    writeFileSync(join(config, "gateway.yaml"), stringify(allowingSimulators(bundledConfig("gateway"), sim.url)));
    writeFileSync(join(config, "publication.yaml"), stringify(bundledConfig("publication")));
    writeFileSync(join(config, "backends.yaml"), stringify(backendsFor(sim.url)));
    const publicAddress = `127.0.0.1:${await freePort()}`;
    const adminAddress = `127.0.0.1:${await freePort()}`;
    const token = "entrypoint-admin-token-value";
    const env = {
      ...entrypointEnv(config, state, publicAddress, adminAddress),
      SLUICE_EXTRA_SECRETS: "LATER_PROVIDER_KEY",
      LATER_PROVIDER_KEY: "later-value",
      SLUICE_ADMIN_TOKEN: token,
      SIMULATOR_API_KEY,
    };
    const proc = spawn(join(ROOT, "container", "entrypoint.sh"), [], { env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    proc.stdout.on("data", (c: Buffer) => (out += c.toString()));
    proc.stderr.on("data", (c: Buffer) => (out += c.toString()));
    const exit = new Promise<number | null>((done) => proc.once("exit", (code) => done(code)));
    try {
      const end = Date.now() + 60_000;
      for (;;) {
        if (proc.exitCode !== null || Date.now() > end) throw new Error(`the entrypoint did not become ready:\n${out}`);
        const ok = await fetch(`http://${publicAddress}/ready`).then((r) => r.ok, () => false);
        if (ok) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      const res = await fetch(`http://${publicAddress}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: "through the entrypoint" }] }),
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as any).choices[0].message.content.length).toBeGreaterThan(0);
      const admin = await fetch(`http://${adminAddress}/admin/status`, { headers: { authorization: `Bearer ${token}` } });
      expect(admin.status).toBe(200);
      await admin.arrayBuffer();

      const health = spawnSync(process.execPath, [join(ROOT, "container", "healthcheck.js")], { env, encoding: "utf8" });
      expect(health.status).toBe(0);

      const capnp = readFileSync(join(state, "sluice.capnp"), "utf8");
      expect(capnp).toContain(`address = "${publicAddress}"`);
      expect(capnp).toContain(`address = "${adminAddress}"`);
      for (const name of ["SLUICE_ADMIN_TOKEN", "SIMULATOR_API_KEY", "LATER_PROVIDER_KEY"]) expect(capnp).toContain(`fromEnvironment = "${name}"`);
      for (const value of [token, SIMULATOR_API_KEY, "later-value"]) expect(capnp).not.toContain(value);

      proc.kill("SIGTERM");
      expect(await exit).toBe(0);
      expect(out).toMatch(/SIGTERM: draining \(up to 5 s\)/);
      expect(out).toContain('drained: {"status":"drained"');
      // The health check fails once the gateway is gone.
      expect(spawnSync(process.execPath, [join(ROOT, "container", "healthcheck.js")], { env }).status).toBe(1);
    } finally {
      if (proc.exitCode === null) proc.kill("SIGKILL");
    }
  }, 120_000);

  it("serves both listeners over HTTPS from SLUICE_TLS_* files, drains through the admin listener's TLS, and leaves no key in its state", async () => {
    const ca = createTestCa();
    const pub = ca.issue("public", "server", "IP:127.0.0.1");
    const adm = ca.issue("admin", "server", "IP:127.0.0.1");
    const client = ca.issue("client", "client", "DNS:client");
    const config = join(work, "tls-etc-sluice");
    const state = join(work, "tls-var-lib-sluice");
    mkdirSync(config);
    writeFileSync(join(config, "gateway.yaml"), stringify(allowingSimulators(bundledConfig("gateway"), sim.url)));
    writeFileSync(join(config, "publication.yaml"), stringify(bundledConfig("publication")));
    // A backend with mTLS in no pool: its binding is rendered at start, its key read from the environment.
    const backends = backendsFor(sim.url);
    backends.backends.push({ name: "private", protocol: "openai-chat", baseUrl: "https://vllm.example.com:8443/v1", capabilities: ["chat"], tls: { binding: "PRIVATE_TLS", ca: ca.cert, clientCertificate: { certificateSecret: "PRIVATE_CERT", keySecret: "PRIVATE_KEY" } } });
    writeFileSync(join(config, "backends.yaml"), stringify(backends));
    const publicAddress = `127.0.0.1:${await freePort()}`;
    const adminAddress = `127.0.0.1:${await freePort()}`;
    const token = "entrypoint-tls-admin-token";
    const env = {
      ...entrypointEnv(config, state, publicAddress, adminAddress),
      SLUICE_TLS_CERT: pub.certFile,
      SLUICE_TLS_KEY: pub.keyFile,
      SLUICE_ADMIN_TLS_CERT: adm.certFile,
      SLUICE_ADMIN_TLS_KEY: adm.keyFile,
      PRIVATE_CERT: client.cert,
      PRIVATE_KEY: client.key,
      SLUICE_ADMIN_TOKEN: token,
      SIMULATOR_API_KEY,
    };
    const trusted = fetchTrusting(ca.cert);
    const proc = spawn(join(ROOT, "container", "entrypoint.sh"), [], { env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    proc.stdout.on("data", (c: Buffer) => (out += c.toString()));
    proc.stderr.on("data", (c: Buffer) => (out += c.toString()));
    const exit = new Promise<number | null>((done) => proc.once("exit", (code) => done(code)));
    try {
      const end = Date.now() + 60_000;
      for (;;) {
        if (proc.exitCode !== null || Date.now() > end) throw new Error(`the entrypoint did not become ready:\n${out}`);
        const ok = await trusted(`https://${publicAddress}/ready`).then((r) => r.ok, () => false);
        if (ok) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      // The banner follows readiness: wait for it, bounded.
      for (const until = Date.now() + 10_000; !out.includes("Sluice is serving.") && Date.now() < until; ) await new Promise((r) => setTimeout(r, 50));
      expect(out).toContain(`public API  https://${publicAddress}/v1`);
      const res = await trusted(`https://${publicAddress}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: "over TLS" }] }),
      });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      const admin = await trusted(`https://${adminAddress}/admin/status`, { headers: { authorization: `Bearer ${token}` } });
      expect(admin.status).toBe(200);
      await admin.arrayBuffer();
      // Plain HTTP is not served on either listener.
      await expect(fetch(`http://${publicAddress}/ready`)).rejects.toThrow();
      await expect(fetch(`http://${adminAddress}/admin/status`)).rejects.toThrow();
      expect(spawnSync(process.execPath, [join(ROOT, "container", "healthcheck.js")], { env }).status).toBe(0);

      const capnp = readFileSync(join(state, "sluice.capnp"), "utf8");
      expect(capnp).toContain("minVersion = tls1Dot2");
      expect(capnp).toContain('(name = "PRIVATE_TLS", service = "backend-tls-0")');
      expect(capnp).toContain('certificateHost = "vllm.example.com"');
      for (const secret of [client.key, client.cert, pub.key, adm.key]) expect(capnp).not.toContain(secret.trim().split("\n")[1]);
      // The client key was written for workerd to read at start, and removed once it had.
      expect(existsSync(join(state, "tls"))).toBe(false);

      proc.kill("SIGTERM");
      expect(await exit).toBe(0);
      expect(out).toContain('drained: {"status":"drained"');
    } finally {
      if (proc.exitCode === null) proc.kill("SIGKILL");
      ca.remove();
    }
  }, 120_000);
});
