import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildBundle, ROOT } from "../../local-stack/build.ts";
import { freePort } from "../../local-stack/ports.ts";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { sluiceAdmin, within } from "./support/admin-cli.ts";
import { createTestCa } from "./support/test-ca.ts";
import { ADMIN_TOKEN, allowingSimulators, backendsFor, bundledConfig, DEMO_KEY, expectNothingLeft, LIMITED_KEY, type Simulator } from "./support/stack.ts";

/** The bound this test runs with; docs/publication.md states the default's. */
const TTL_MS = 1000;
const ADDED_KEY = "sk-sluice-added-at-runtime";

let sim: Simulator;
let gateway: RunningGateway;
const stateDir = mkdtempSync(join(tmpdir(), "sluice-publication-"));
const gatewayConfig = () => {
  const g = allowingSimulators(bundledConfig("gateway"), sim.url);
  g.breaker = { enabled: false };
  g.traffic = { ...g.traffic, publicationCacheTtlMs: TTL_MS };
  return g;
};
const start = () => startGateway({ adminToken: ADMIN_TOKEN, stateDir, config: { gateway: stringify(gatewayConfig()), backends: stringify(backendsFor(sim.url)) } });

beforeAll(async () => {
  sim = await startSimulatorProcess({ apiKey: SIMULATOR_API_KEY });
  gateway = await start();
});
afterAll(async () => {
  try {
    if (gateway) await expectNothingLeft(gateway.adminUrl);
  } finally {
    await Promise.all([gateway?.stop(), sim?.stop()]);
    rmSync(stateDir, { recursive: true, force: true });
  }
});

const admin = (path: string, init: RequestInit = {}) => fetch(`${gateway.adminUrl}${path}`, { ...init, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(init.headers ?? {}) } });
const chat = (key: string, content: string, stream = false) =>
  fetch(`${gateway.publicUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "sluice-chat", stream, messages: [{ role: "user", content }] }),
  });
const accessLine = (requestId: string) =>
  gateway
    .output()
    .split("\n")
    .filter((l) => l.startsWith('{"kind":"request"'))
    .map((l) => JSON.parse(l) as { requestId: string; publicationRevision: string })
    .find((l) => l.requestId === requestId);
const status = async () => (await (await admin("/admin/status")).json()) as { publicationRevision: string };

/** Revision 2: one more key, charged to the tenant alone; the limited key's request budget cut to a burst of 2. */
function revision2(): any {
  const p = bundledConfig("publication");
  p.revision = "demo-2";
  p.tenants[0].apiKeys.push({ id: "added", sha256: createHash("sha256").update(ADDED_KEY).digest("hex"), entrypoints: ["*"] });
  p.tenants[0].apiKeys[1].limits = { requests: { perMinute: 1, burst: 2 } };
  return p;
}

describe("publication at runtime", () => {
  it("publishes a revision that adds a key and lowers a budget while a slow stream finishes under the old one", async () => {
    expect((await status()).publicationRevision).toBe("demo-1@1");
    const slow = await chat(DEMO_KEY, "slow one [[sim tokens=40 token-interval-ms=50]]", true);
    expect(slow.status).toBe(200);
    const slowId = slow.headers.get("x-request-id")!;
    const slowText = slow.text();
    expect((await chat(ADDED_KEY, "before")).status).toBe(401);
    const before = await chat(LIMITED_KEY, "under the old budget");
    expect(before.status).toBe(200);
    await before.text();

    const put = await admin("/admin/publication", { method: "PUT", headers: { "content-type": "application/yaml" }, body: stringify(revision2()) });
    expect(put.status).toBe(200);
    expect(await put.json()).toMatchObject({ status: "activated", revision: 2, previous: 1 });

    // The new key works within the stated bound.
    let addedId = "";
    const took = await within(TTL_MS + 2000, async () => {
      const r = await chat(ADDED_KEY, "new key");
      await r.text();
      addedId = r.headers.get("x-request-id") ?? "";
      return r.status === 200;
    });
    expect(took).toBeLessThanOrEqual(TTL_MS + 2000);

    // The lowered budget refuses at its new limit: a burst of 2, then 429.
    const answers: number[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await chat(LIMITED_KEY, `limited ${i}`);
      answers.push(r.status);
      const body = (await r.json()) as { error?: { code?: string } };
      if (r.status === 429) expect(body.error?.code).toBe("request_rate_exceeded");
    }
    expect(answers).toEqual([200, 200, 429, 429]);

    // The stream that began under revision 1 finished under it.
    expect(await slowText).toContain("data: [DONE]");
    await within(5000, async () => accessLine(slowId) !== undefined && accessLine(addedId) !== undefined);
    expect(accessLine(slowId)!.publicationRevision).toBe("demo-1@1");
    expect(accessLine(addedId)!.publicationRevision).toBe("demo-2@2");
    expect((await status()).publicationRevision).toBe("demo-2@2");
  });

  it("refuses an invalid revision, naming every issue, and changes nothing", async () => {
    const bad = revision2();
    bad.revision = "demo-bad";
    bad.tenants[0].apiKeys[0].entrypoints = ["no-such-entrypoint"];
    bad.entrypoints[0].default = [["no-such-model"]];
    bad.models[0].revisions[0].pool = "no-such-pool";
    const res = await admin("/admin/publication", { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify(bad) });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { error: { code: string; details: { file: string; path: string; message: string }[] } };
    expect(body.error.code).toBe("publication_rejected");
    const paths = body.error.details.map((d) => d.path);
    expect(paths).toContain("tenants[0].apiKeys[0].entrypoints[0]");
    expect(paths).toContain("entrypoints[0].default[0][0]");
    expect(body.error.details.find((d) => d.path === "models[0]")?.message).toContain('pool "no-such-pool"');
    expect(body.error.details.every((d) => d.file === "publication.yaml" && d.message.length > 0)).toBe(true);

    const active = (await (await admin("/admin/publication")).json()) as { revision: number; label: string };
    expect(active).toMatchObject({ revision: 2, label: "demo-2" });
    const r = await chat(ADDED_KEY, "still revision 2");
    expect(r.status).toBe(200);
    await r.text();
    const history = (await (await admin("/admin/publication/history")).json()) as { events: { kind: string }[]; lastKnownGood: number };
    expect(history.events.map((e) => e.kind).slice(0, 3)).toEqual(["rejected", "activated", "seeded"]);
    expect(history.lastKnownGood).toBe(1);
  });

  it("rolls back to the last-known-good revision", async () => {
    const rb = await admin("/admin/publication/rollback", { method: "POST" });
    expect(await rb.json()).toMatchObject({ status: "activated", revision: 1, previous: 2 });
    await within(TTL_MS + 2000, async () => {
      const r = await chat(ADDED_KEY, "after rollback");
      await r.text();
      return r.status === 401;
    });
    expect((await status()).publicationRevision).toBe("demo-1@1");
    const missing = await admin("/admin/publication/rollback", { method: "POST", body: JSON.stringify({ revision: 99 }) });
    expect(missing.status).toBe(404);
  });

  it("keeps the active revision across a restart", async () => {
    const put = await admin("/admin/publication", { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify(revision2()) });
    // The same content as revision 2 re-activates that number.
    expect(await put.json()).toMatchObject({ status: "activated", revision: 2, previous: 1 });
    await expectNothingLeft(gateway.adminUrl);
    await gateway.stop();
    gateway = await start();
    expect((await status()).publicationRevision).toBe("demo-2@2");
    const r = await chat(ADDED_KEY, "after the restart");
    expect(r.status).toBe(200);
    await r.text();
  });

  it("publishes, lists and rolls back from the CLI; a rejected file prints every issue as file: path: reason", async () => {
    const dir = join(stateDir, "cli-config");
    mkdirSync(dir, { recursive: true });
    const cli = (...args: string[]) => sluiceAdmin(gateway.adminUrl, ADMIN_TOKEN, ...args);
    const bad = revision2();
    bad.revision = "demo-cli-bad";
    bad.tenants[0].apiKeys[0].entrypoints = ["no-such-entrypoint"];
    bad.entrypoints[0].default = [["no-such-model"]];
    writeFileSync(join(dir, "publication.yaml"), stringify(bad));
    const rejected = await cli("publish", "--config", dir);
    expect(rejected.status).toBe(1);
    expect(rejected.stderr).toContain('publication.yaml: tenants[0].apiKeys[0].entrypoints[0]: unknown entrypoint "no-such-entrypoint"');
    expect(rejected.stderr).toContain('publication.yaml: entrypoints[0].default[0][0]: unknown model "no-such-model"');

    const good = revision2();
    good.revision = "demo-3";
    writeFileSync(join(dir, "publication.yaml"), stringify(good));
    const published = await cli("publish", "--config", dir);
    expect(published.stderr).toBe("");
    expect(published.status).toBe(0);
    expect(published.stdout).toMatch(/^activated revision 3 \(sha256:[0-9a-f]+\); previous 2/);

    const history = await cli("publication", "history", "--json");
    expect(history.status).toBe(0);
    expect(JSON.parse(history.stdout)).toMatchObject({ active: 3, lastKnownGood: 2 });
    const rolled = await cli("publication", "rollback");
    expect(rolled.status).toBe(0);
    expect(rolled.stdout).toContain("activated revision 2");
    await within(TTL_MS + 2000, async () => (await status()).publicationRevision === "demo-2@2");
  }, 60_000);
});

describe("sluice serve --watch", () => {
  it("publishes publication.yaml when it changes and on SIGHUP, to an admin listener on TLS with a private CA; an invalid file keeps the running revision and prints every issue", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-watch-"));
    // The admin listener's certificate comes from a CA nothing on this machine trusts: the watcher must trust exactly that certificate.
    const ca = createTestCa();
    const adminCert = ca.issue("gateway-admin", "server", "IP:127.0.0.1");
    const [publicPort, adminPort] = [await freePort(), await freePort()];
    const cfg = join(dir, "config");
    mkdirSync(cfg);
    writeFileSync(join(cfg, "gateway.yaml"), stringify(gatewayConfig()));
    writeFileSync(join(cfg, "backends.yaml"), stringify(backendsFor(sim.url)));
    writeFileSync(join(cfg, "publication.yaml"), stringify(bundledConfig("publication")));
    const proc = spawn(
      process.execPath,
      [join(ROOT, "bin", "sluice.js"), "serve", "--config", cfg, "--state", join(dir, "state"), "--public", `127.0.0.1:${publicPort}`, "--admin", `127.0.0.1:${adminPort}`, "--admin-tls-cert", adminCert.certFile, "--admin-tls-key", adminCert.keyFile, "--bundle", buildBundle(), "--drain-timeout", "5s", "--watch"],
      { cwd: dir, env: { ...process.env, SLUICE_ADMIN_TOKEN: ADMIN_TOKEN, SIMULATOR_API_KEY }, stdio: ["ignore", "pipe", "pipe"], detached: true },
    );
    let out = "";
    proc.stdout!.on("data", (c: Buffer) => (out += c.toString()));
    proc.stderr!.on("data", (c: Buffer) => (out += c.toString()));
    const exit = new Promise<number | null>((done) => proc.once("exit", (code) => done(code)));
    const served = (key: string) =>
      fetch(`http://127.0.0.1:${publicPort}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: "watch" }] }),
      }).then(async (r) => (await r.arrayBuffer(), r.status));
    try {
      await within(60_000, async () => out.includes("Sluice is serving."));
      expect(out).toContain(`admin API   https://127.0.0.1:${adminPort}/admin`);
      expect(out).toContain(`console     https://127.0.0.1:${adminPort}/admin/console`);
      expect(out).toContain(`metrics     https://127.0.0.1:${adminPort}/admin/metrics`);
      expect(await served(ADDED_KEY)).toBe(401);

      // A change is published: the new key serves within the bound.
      writeFileSync(join(cfg, "publication.yaml"), stringify(revision2()));
      await within(TTL_MS + 10_000, async () => (await served(ADDED_KEY)) === 200);
      expect(out).toContain("publication revision 2 activated");

      // An invalid file: nothing changes, every issue printed.
      const bad = revision2();
      bad.tenants[0].apiKeys[0].entrypoints = ["no-such-entrypoint"];
      bad.entrypoints[0].default = [["no-such-model"]];
      writeFileSync(join(cfg, "publication.yaml"), stringify(bad));
      await within(10_000, async () => out.includes("rejected (2 issues)"));
      expect(out).toContain('publication.yaml: tenants[0].apiKeys[0].entrypoints[0]: unknown entrypoint "no-such-entrypoint"');
      expect(out).toContain('publication.yaml: entrypoints[0].default[0][0]: unknown model "no-such-model"');
      expect(await served(ADDED_KEY)).toBe(200);

      // SIGHUP publishes the file as it is now: checked again, refused again.
      proc.kill("SIGHUP");
      await within(10_000, async () => out.includes("SIGHUP: publishing") && out.split("rejected (2 issues)").length === 3);
      expect(await served(ADDED_KEY)).toBe(200);
    } finally {
      proc.kill("SIGTERM");
      const killer = setTimeout(() => {
        try {
          process.kill(-proc.pid!, "SIGKILL");
        } catch {
          // Already gone.
        }
      }, 30_000);
      await exit;
      clearTimeout(killer);
      rmSync(dir, { recursive: true, force: true });
      ca.remove();
    }
  }, 120_000);
});
