import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, backendsFor, bundledConfig, DEMO_KEY, startStack, type Simulator, type Stack } from "./support/stack.ts";

let stack: Stack;
let simA: Simulator;
let simB: Simulator;
beforeAll(async () => {
  const gateway = bundledConfig("gateway");
  gateway.health = { enabled: true, cacheTtlMs: 100 };
  stack = await startStack({ simulators: 2, gateway });
  [simA, simB] = stack.sims as [Simulator, Simulator];
  const two = backendsFor(simA.url, "sim-a");
  two.backends[0].healthCheck = { path: "/models", intervalMs: 1000, timeoutMs: 300 };
  two.backends.push({ ...backendsFor(simB.url, "sim-b").backends[0], healthCheck: { path: "/models", intervalMs: 1000, timeoutMs: 300 } });
  for (const p of two.pools) {
    p.selector = "round-robin";
    p.members.push({ backend: "sim-b", model: p.members[0].model });
  }
  const put = await fetch(`${stack.gateway.adminUrl}/admin/snapshot`, {
    method: "PUT",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/yaml" },
    body: stringify(two),
  });
  expect(put.status).toBe(200);
});
afterAll(async () => {
  await stack?.stop();
});

const ask = () =>
  fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "sluice-large", messages: [{ role: "user", content: "hi" }] }),
  }).then(async (r) => (await r.text(), r.status));

describe("active health probes", () => {
  it("probe the configured path from one monitor per backend and take a dead backend out of rotation", async () => {
    expect(await ask()).toBe(200); // the first request starts the monitors
    await new Promise((r) => setTimeout(r, 1500));
    const probes = ((await stack.simRequests(simB, 50)) as { method: string; path: string }[]).filter((r) => r.method === "GET" && r.path === "/v1/models");
    expect(probes.length).toBeGreaterThanOrEqual(1);

    await simA.stop();
    // Three failed probes about a second apart mark it unhealthy; then the cached view updates.
    await new Promise((r) => setTimeout(r, 5000));
    // The isolate's view refreshes in the background when used (no request waits on a monitor),
    // so the first request after an idle spell may still see the old view.
    await ask();
    await new Promise((r) => setTimeout(r, 300));
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push(await ask());
    expect(statuses).toEqual(Array(8).fill(200));
  });
});
