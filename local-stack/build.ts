import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

/** Repository root (this file lives one folder below it). */
export const ROOT = join(import.meta.dirname, "..");

/**
 * Environment for wrangler on a machine without internet access. The banner is off because
 * printing it is where wrangler asks the npm registry for a newer version.
 */
export const OFFLINE_ENV = { WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false", WRANGLER_HIDE_BANNER: "true" } as const;

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

/**
 * Bundles the Worker exactly as it would deploy (`wrangler deploy --dry-run`), into `outDir`.
 * Skipped when the bundle is newer than every source and config file.
 */
export function buildBundle(outDir = join(ROOT, "dist")): string {
  return bundleReport(outDir).dir;
}

/** {@link buildBundle}, saying whether the bundle already there was reused. */
export function bundleReport(outDir = join(ROOT, "dist")): { readonly dir: string; readonly reused: boolean } {
  const bundle = join(outDir, "index.js");
  if (existsSync(bundle)) {
    const sources = Math.max(
      ...["src", "durable-objects", "config"].map((d) => newestMtime(join(ROOT, d))),
      statSync(join(ROOT, "wrangler.toml")).mtimeMs,
      statSync(join(ROOT, "package-lock.json")).mtimeMs,
    );
    if (statSync(bundle).mtimeMs > sources) return { dir: outDir, reused: true };
  }
  const wrangler = join(ROOT, "node_modules", ".bin", "wrangler");
  const res = spawnSync(wrangler, ["deploy", "--dry-run", "--outdir", outDir], {
    cwd: ROOT,
    env: { ...process.env, ...OFFLINE_ENV },
    encoding: "utf8",
  });
  if (res.status !== 0) throw new Error(`bundling failed:\n${res.stdout}\n${res.stderr}`);
  return { dir: outDir, reused: false };
}
