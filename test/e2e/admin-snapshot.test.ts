import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, backendsFor, DEMO_KEY, startStack, type Simulator, type Stack } from "./support/stack.ts";

let stack: Stack;
let simA: Simulator;
let simB: Simulator;
beforeAll(async () => {
  stack = await startStack({ simulators: 2 });
  [simA, simB] = stack.sims as [Simulator, Simulator];
});
afterAll(async () => {
  await stack?.stop();
});

const chat = (content: string, stream = false) =>
  fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "sluice-chat", stream, messages: [{ role: "user", content }] }),
  });
const count = async (sim: Simulator) => ((await stack.simStats(sim)) as { total: number }).total;

describe("admin API", () => {
  it("answers only on the admin listener, only with the token", async () => {
    expect((await stack.admin("/admin/status")).status).toBe(200);
    expect((await fetch(`${stack.gateway.adminUrl}/admin/status`)).status).toBe(401);
    expect((await fetch(`${stack.gateway.adminUrl}/admin/status`, { headers: { authorization: "Bearer nope" } })).status).toBe(401);
    for (const path of ["/admin/status", "/admin/snapshot", "/admin/routes"]) {
      const res = await fetch(`${stack.gateway.publicUrl}${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      expect(res.status).toBe(404);
    }
    const put = await fetch(`${stack.gateway.publicUrl}/admin/snapshot`, { method: "PUT", headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, body: "{}" });
    expect(put.status).toBe(404);
  });

  it("reports status, effective config (redacted) and the route table", async () => {
    const status = (await (await stack.admin("/admin/status")).json()) as any;
    expect(status.configDigest).toMatch(/^sha256:/);
    expect(status.publicationRevision).toBe("demo-1@1");
    expect(status.snapshot.revision).toBe(1);
    const config = await (await stack.admin("/admin/config")).text();
    expect(config).not.toContain("1c590839af894cf25f9a5fe06929af05b377f60efbe55508ef93d251887b9213");
    const routes = (await (await stack.admin("/admin/routes")).json()) as any;
    const ep = routes.entrypoints.find((e: any) => e.name === "sluice-chat");
    expect(ep.default[0][0]).toMatchObject({ model: "chat-small", pool: "sim-small", resolvable: true });
    expect(ep.default[0][0].backends[0]).toMatchObject({ name: "sim-local", model: "sim-small", credentialSecret: "SIMULATOR_API_KEY" });
    // Decisions in the order the decide phase tries them: highest priority first, then as written.
    const auto = routes.entrypoints.find((e: any) => e.name === "sluice-auto");
    expect(auto.decisions.map((d: any) => [d.name, d.priority])).toEqual([["jailbreak", 100], ["long-prompt", 10], ["code", 0], ["support", 0]]);
    expect(auto.decisions[0]).toMatchObject({ when: { signal: "jailbreak" }, tiers: null, plugins: ["refuse"], onUnknown: "skip", algorithm: null });
    expect(auto.decisions[2].tiers[0][0]).toMatchObject({ model: "chat-large", resolvable: true });
    expect(auto.plugins).toEqual(["redact-pii"]);
    expect(JSON.stringify(routes)).not.toContain("sim-local-key");
  });

  it("activates a pushed snapshot for new requests only; a request in flight keeps its pinned backend", async () => {
    const a0 = await count(simA);
    const b0 = await count(simB);
    // A slow stream starts on A (the seed snapshot) ...
    const slow = await chat("slow one [[sim tokens=30 token-interval-ms=40]]", true);
    expect(slow.status).toBe(200);
    const slowText = slow.text();

    // ... then a snapshot moving every pool to B activates.
    const put = await stack.admin("/admin/snapshot", {
      method: "PUT",
      headers: { "content-type": "application/yaml" },
      body: stringify(backendsFor(simB.url, "sim-b")),
    });
    expect(put.status).toBe(200);
    expect(await put.json()).toMatchObject({ status: "activated", revision: 2, previous: 1 });

    const fresh = await chat("after the switch");
    expect(fresh.status).toBe(200);
    await fresh.text();
    expect(await count(simB)).toBe(b0 + 1);

    const text = await slowText;
    expect(text).toContain("data: [DONE]");
    expect(await count(simA)).toBe(a0 + 1);

    // Pushing identical content is a no-op.
    const same = await stack.admin("/admin/snapshot", { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify(backendsFor(simB.url, "sim-b")) });
    expect(await same.json()).toMatchObject({ status: "unchanged", revision: 2 });
  });

  it("rejects an invalid snapshot with reasons and keeps serving the old one", async () => {
    const bad = backendsFor(simA.url, "sim-a");
    bad.pools = bad.pools.filter((p: any) => p.name !== "sim-large");
    bad.backends[0].protocol = "carrier-pigeon";
    const res = await stack.admin("/admin/snapshot", { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify(bad) });
    expect(res.status).toBe(422);
    const body = (await res.json()) as any;
    expect(body.error.code).toBe("snapshot_rejected");
    expect(body.error.details.map((d: any) => d.path)).toContain("backends[0].protocol");

    const bad2 = backendsFor(simA.url, "sim-a");
    bad2.pools = bad2.pools.filter((p: any) => p.name !== "sim-large");
    const res2 = await stack.admin("/admin/snapshot", { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify(bad2) });
    expect(res2.status).toBe(422);
    expect(((await res2.json()) as any).error.details[0]).toMatchObject({ code: "missing_pool" });

    const before = await count(simB);
    expect((await chat("still on B")).status).toBe(200);
    expect(await count(simB)).toBe(before + 1);
    const status = (await (await stack.admin("/admin/status")).json()) as any;
    expect(status.snapshot.revision).toBe(2);
  });

  it("keeps history and rolls back to the last-known-good revision", async () => {
    const history = (await (await stack.admin("/admin/snapshot/history")).json()) as any;
    expect(history.active).toBe(2);
    expect(history.events.map((e: any) => e.kind).slice(0, 4)).toEqual(["rejected", "rejected", "unchanged", "activated"]);

    const rb = await stack.admin("/admin/snapshot/rollback", { method: "POST" });
    expect(await rb.json()).toMatchObject({ status: "activated", revision: 1, previous: 2 });
    const before = await count(simA);
    expect((await chat("back on A")).status).toBe(200);
    expect(await count(simA)).toBe(before + 1);

    const missing = await stack.admin("/admin/snapshot/rollback", { method: "POST", body: JSON.stringify({ revision: 99 }) });
    expect(missing.status).toBe(404);
    const active = (await (await stack.admin("/admin/snapshot")).json()) as any;
    expect(active.revision).toBe(1);
  });
});
