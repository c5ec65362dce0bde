import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { BackendSnapshotController } from "../../../durable-objects/backend-snapshot-controller.ts";

describe("BackendSnapshotController Durable Object", () => {
  it("seeds itself from the bundled backends.yaml", async () => {
    const stub = env.SNAPSHOT_CONTROLLER.getByName("seed-test");
    const active = await stub.getActive();
    expect(active.revision).toBe(1);
    expect(active.snapshot.backends.map((b) => b.name)).toEqual(["sim-local"]);
    await runInDurableObject(stub, async (instance: BackendSnapshotController) => {
      expect((await instance.history(10)).events[0]?.kind).toBe("seeded");
    });
  });
});

describe("BackendSnapshotController over RPC", () => {
  it("activates a pushed candidate atomically, rejects a bad one, and rolls back", async () => {
    const stub = env.SNAPSHOT_CONTROLLER.getByName("rpc-test");
    expect((await stub.getActive()).revision).toBe(1);
    const source = {
      version: 1,
      backends: [{ name: "sim-b", protocol: "openai-chat", baseUrl: "https://sim-b.example.com/v1", capabilities: ["chat", "streaming", "stream-usage", "tools", "embeddings", "moderations", "logprobs"] }],
      pools: [
        { name: "sim-small", members: [{ backend: "sim-b", model: "small" }] },
        { name: "sim-large", members: [{ backend: "sim-b", model: "large" }] },
        { name: "sim-embed", members: [{ backend: "sim-b", model: "embed" }] },
        { name: "sim-moderate", members: [{ backend: "sim-b", model: "moderate" }] },
        { name: "sim-small-scored", members: [{ backend: "sim-b", model: "small" }] },
        { name: "sim-large-scored", members: [{ backend: "sim-b", model: "large" }] },
      ],
    };
    const r = await stub.propose(source, "test");
    expect(r).toMatchObject({ status: "activated", revision: 2, previous: 1 });
    expect((await stub.getActive()).snapshot.backends[0]?.name).toBe("sim-b");

    const rejected = await stub.propose({ ...source, pools: [] }, "test");
    expect(rejected.status).toBe("rejected");
    expect((await stub.getActive()).revision).toBe(2);

    expect(await stub.rollback(undefined, "test")).toMatchObject({ status: "activated", revision: 1 });
    const h = await stub.history(10);
    expect(h.active).toBe(1);
    expect(h.events.map((e) => e.kind)).toEqual(["rolled_back", "rejected", "activated", "seeded"]);
    expect(h.revisions.map((x) => x.revision)).toEqual([2, 1]);
  });

  it("serializes concurrent proposals: every caller gets a consistent answer", async () => {
    const stub = env.SNAPSHOT_CONTROLLER.getByName("concurrency-test");
    await stub.getActive();
    const mk = (port: number) => ({
      version: 1,
      backends: [{ name: "b", protocol: "openai-chat", baseUrl: `https://b.example.com:${port}/v1`, capabilities: ["chat", "streaming", "stream-usage", "tools", "embeddings", "moderations", "logprobs"] }],
      pools: [
        { name: "sim-small", members: [{ backend: "b", model: "s" }] },
        { name: "sim-large", members: [{ backend: "b", model: "l" }] },
        { name: "sim-embed", members: [{ backend: "b", model: "e" }] },
        { name: "sim-moderate", members: [{ backend: "b", model: "m" }] },
        { name: "sim-small-scored", members: [{ backend: "b", model: "s" }] },
        { name: "sim-large-scored", members: [{ backend: "b", model: "l" }] },
      ],
    });
    const results = await Promise.all([1, 2, 3, 4, 5, 1, 2, 3, 4, 5].map((i) => stub.propose(mk(9000 + i), "test")));
    const activated = results.filter((r) => r.status === "activated");
    // Five distinct contents: each stored once, so revisions 2..6 exist, duplicates re-activate or no-op.
    const h = await stub.history(100);
    expect(new Set(h.revisions.map((r) => r.digest)).size).toBe(h.revisions.length);
    expect(h.revisions.length).toBe(6);
    expect(activated.length).toBeGreaterThanOrEqual(5);
    const active = await stub.getActive();
    expect(h.revisions.some((r) => r.revision === active.revision)).toBe(true);
  });
});
