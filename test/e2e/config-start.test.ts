import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { describe, expect, it } from "vitest";
import { ROOT } from "../../local-stack/build.ts";
import { startGateway } from "../../local-stack/stack.ts";
import { ADMIN_TOKEN, bundledConfig } from "./support/stack.ts";

function configCheck(dir?: string) {
  return spawnSync(process.execPath, [join(ROOT, "cli", "main.ts"), "config", "print-effective", "--redact", ...(dir ? ["--config", dir] : [])], { cwd: ROOT, encoding: "utf8" });
}

describe("config validation at the boundaries", () => {
  it("config:check passes on the bundled config and prints it redacted", () => {
    const r = configCheck();
    expect(r.status).toBe(0);
    expect(r.stdout).toContain("sluice-chat");
    expect(r.stdout).toContain("(redacted)");
    expect(r.stdout).not.toContain("1c590839af894cf25f9a5fe06929af05b377f60efbe55508ef93d251887b9213");
  });

  it("config:check names the file and path of every problem", () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-cfg-"));
    try {
      for (const f of ["gateway", "publication", "backends"]) writeFileSync(join(dir, `${f}.yaml`), readFileSync(join(ROOT, "config", `${f}.yaml`)));
      const g = bundledConfig("gateway");
      g.traffic.retryForever = true;
      writeFileSync(join(dir, "gateway.yaml"), stringify(g));
      const b = bundledConfig("backends");
      b.pools = b.pools.filter((p: any) => p.name !== "sim-large");
      writeFileSync(join(dir, "backends.yaml"), stringify(b));
      const r = configCheck(dir);
      expect(r.status).toBe(1);
      expect(r.stderr).toContain("gateway.yaml: traffic.retryForever: unknown key");
      const g2 = bundledConfig("gateway");
      writeFileSync(join(dir, "gateway.yaml"), stringify(g2));
      const r2 = configCheck(dir);
      expect(r2.status).toBe(1);
      expect(r2.stderr).toMatch(/backends\.yaml: pools: pool "sim-large" is needed by model chat-large/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("an invalid config fails the gateway's start with a readable message", async () => {
    const p = bundledConfig("publication");
    p.entrypoints[0].default = [["no-such-model"]];
    const err = await startGateway({ adminToken: ADMIN_TOKEN, config: { publication: stringify(p) } }).then(
      async (g) => {
        await g.stop();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect(String(err)).toContain('publication.yaml: entrypoints[0].default[0][0]: unknown model "no-such-model"');
  });
});
