/**
 * `npm run docs:screenshots`: rewrites the console's pictures in docs/console/ for
 * docs/console.md. It runs the browser tests' tour of the console (test/browser/console-tour.test.ts)
 * with SLUICE_SCREENSHOTS set, so the pictures are taken by the tests that check the pages, on a
 * gateway and simulator the tour starts on loopback and stops; it needs Debian's chromium, as
 * `npm run test:browser` does. Pictures of pages the tour no longer visits are removed first.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../local-stack/build.ts";

const FOLDER = join("docs", "console");
const dir = join(ROOT, FOLDER);
mkdirSync(dir, { recursive: true });
for (const f of readdirSync(dir)) if (f.endsWith(".png")) rmSync(join(dir, f));

const run = spawnSync(process.execPath, [join(ROOT, "node_modules", "vitest", "vitest.mjs"), "run", "--config", "vitest.browser.config.ts", "test/browser/console-tour.test.ts"], {
  cwd: ROOT,
  stdio: "inherit",
  env: { ...process.env, SLUICE_SCREENSHOTS: FOLDER, WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false" },
});
if (run.status !== 0) {
  console.error(`docs:screenshots: the console tour failed (exit ${run.status ?? run.signal}); ${FOLDER} may be incomplete`);
  process.exit(1);
}
const written = readdirSync(dir).filter((f) => f.endsWith(".png")).sort();
console.log(`docs:screenshots: ${written.length} pictures in ${FOLDER}: ${written.join(", ")}`);
