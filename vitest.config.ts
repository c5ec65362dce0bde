import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

// Runtime tests: run inside workerd with the Worker's own bindings (Durable Objects included).
export default defineConfig({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: "./wrangler.toml" },
      miniflare: { bindings: { SLUICE_ADMIN_TOKEN: "test-admin-token" } },
    }),
  ],
  test: {
    include: ["test/runtime/**/*.test.ts"],
    // The property tests (hundreds of random splits and bodies per test) take well under a second
    // on a quiet machine and more than vitest's default 5 s on a saturated one; a hung test still fails.
    testTimeout: 30_000,
  },
});
