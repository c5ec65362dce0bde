import { defineConfig } from "vitest/config";

// End-to-end and Node-side tests: real processes (simulator, workerd) on loopback, official clients.
export default defineConfig({
  test: {
    include: ["test/e2e/**/*.test.ts", "test/simulator/**/*.test.ts", "test/architecture/**/*.test.ts"],
    environment: "node",
    globalSetup: ["test/e2e/support/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 90_000,
    // Each e2e file starts its own gateway + simulator; two at a time fits a 2-core machine.
    maxWorkers: 2,
  },
});
