import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../local-stack/ports.ts";
import { ADMIN_TOKEN, allowingSimulators, backendsFor, bundledConfig, DEMO_KEY, startStack, type Stack } from "./support/stack.ts";

let stack: Stack;
beforeAll(async () => {
  // Backend "dead" points at a port nothing listens on; "live" is the simulator. Both check the
  // connection before sending, and one pool holds both. The egress allowlist names both.
  const deadUrl = `http://127.0.0.1:${await freePort()}`;
  stack = await startStack({ gateway: allowingSimulators(bundledConfig("gateway"), deadUrl) });
  const snap = backendsFor(deadUrl, "dead");
  snap.backends[0].connectCheck = true;
  snap.backends.push({ ...backendsFor(stack.sims[0]!.url, "live").backends[0], connectCheck: true });
  for (const p of snap.pools) {
    p.selector = "round-robin";
    p.members.push({ backend: "live", model: p.members[0].model });
  }
  const put = await fetch(`${stack.gateway.adminUrl}/admin/snapshot`, {
    method: "PUT",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/yaml" },
    body: stringify(snap),
  });
  expect(put.status).toBe(200);
});
afterAll(async () => {
  await stack?.stop();
});

const ask = (model: string) =>
  fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }),
  });

describe("connectCheck: a refused connection is known-zero evidence", () => {
  it("retries on another backend when the connection could not be opened", async () => {
    await fetch(`${stack.sims[0]!.url}/__sim/reset`, { method: "POST" });
    // sluice-chat allows 3 attempts: whichever backend round-robin tries first, every request ends at the live one.
    const results = await Promise.all(Array.from({ length: 6 }, () => ask("sluice-chat")));
    expect(results.map((r) => r.status)).toEqual(Array(6).fill(200));
    const attempts = results.map((r) => (r.headers.get("x-sluice-attempts") ?? "").split(", ").length);
    expect(attempts.some((n) => n === 2)).toBe(true); // some went to the dead backend first
    expect(((await stack.simStats(stack.sims[0]!)) as { total: number }).total).toBe(6); // one upstream call each
  });

  it("still never retries without the authority to: one attempt, 502", async () => {
    // sluice-large allows one attempt; a request that lands on the dead backend fails at once.
    const statuses = new Set<number>();
    for (let i = 0; i < 4; i++) statuses.add((await ask("sluice-large")).status);
    expect(statuses).toEqual(new Set([200, 502]));
  });
});
