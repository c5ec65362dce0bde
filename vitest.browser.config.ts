import { defineConfig } from "vitest/config";

// Browser tests: the admin console driven in a real headless Chromium (Debian's `chromium`, through
// playwright-core) against real gateway processes. Separate from `npm test`, which needs only Node.
export default defineConfig({
  test: {
    include: ["test/browser/**/*.test.ts"],
    environment: "node",
    globalSetup: ["test/e2e/support/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 90_000,
    // One gateway and one browser at a time.
    maxWorkers: 1,
  },
});
