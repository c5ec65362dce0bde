import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, backendsFor, bundledConfig, DEMO_KEY, startStack, type Simulator, type Stack } from "./support/stack.ts";

let stack: Stack;
let simA: Simulator;
let simB: Simulator;
beforeAll(async () => {
  const gateway = bundledConfig("gateway");
  gateway.breaker = { enabled: true, minSamples: 3, failureRatio: 0.5, openMs: 4000, halfOpenProbes: 1, halfOpenSuccesses: 1, cacheTtlMs: 50 };
  stack = await startStack({ simulators: 2, gateway });
  [simA, simB] = stack.sims as [Simulator, Simulator];
  // One pool, both simulators, alternating.
  const two = backendsFor(simA.url, "sim-a");
  two.backends.push({ ...backendsFor(simB.url, "sim-b").backends[0] });
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ask = () =>
  fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "sluice-large", messages: [{ role: "user", content: "hi" }] }),
  }).then(async (r) => (await r.text(), r.status));
const total = async (sim: Simulator) => ((await stack.simStats(sim)) as { total: number }).total;
const setStatus = (sim: Simulator, status?: number) =>
  fetch(`${sim.url}/__sim/config`, { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify(status ? { status } : {}) });

describe("circuit breaker per backend", () => {
  it("opens on a failing backend, sends traffic elsewhere, then probes and closes", async () => {
    await setStatus(simA, 500);
    // Failures reach the breaker off the hot path; give each report time to land.
    for (let i = 0; i < 12; i++) {
      await ask();
      await sleep(120);
    }
    const a0 = await total(simA);
    const b0 = await total(simB);
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push(await ask());
    expect(await total(simA)).toBe(a0); // open: A gets nothing
    expect(await total(simB)).toBe(b0 + 8);
    expect(statuses.every((s) => s === 200)).toBe(true);

    // A recovers; after the open interval one probe goes through and closes the breaker.
    await setStatus(simA);
    await sleep(4300);
    for (let i = 0; i < 10; i++) {
      await ask();
      await sleep(120);
    }
    expect(await total(simA)).toBeGreaterThan(a0 + 1);
  });
});
