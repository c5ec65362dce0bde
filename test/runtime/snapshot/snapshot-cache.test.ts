import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { loadConfig } from "../../../src/config/load-config.ts";
import { compilePublication } from "../../../src/publication/compile-publication.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { normalizeSnapshot } from "../../../src/snapshot/normalize.ts";
import { pinSnapshot, type ActiveSnapshot } from "../../../src/snapshot/pinned-snapshot.ts";
import { unmetRequirements, unmetRequirementsOf } from "../../../src/snapshot/requirements.ts";
import { SnapshotCache } from "../../../src/snapshot/snapshot-cache.ts";
import { bundledTexts, FakeClock } from "../support/fixtures.ts";

async function active(revision: number, port = 9901): Promise<ActiveSnapshot> {
  const s = parse(bundledTexts.backends) as any;
  s.backends[0].baseUrl = `http://127.0.0.1:${port}/v1`;
  const cfg = loadConfig(bundledTexts);
  const r = await normalizeSnapshot(s, { supportedProtocols: new Set(["openai-chat"]), logprobsProtocols: new Set(["openai-chat"]), requirements: compilePublication(cfg.publication).poolRequirements, egress: { allow: ["127.0.0.1"] } });
  if (!r.ok) throw new Error("fixture invalid");
  return { revision, digest: r.digest, snapshot: r.snapshot };
}

describe("SnapshotCache", () => {
  it("serves the cached revision within the TTL and refreshes after it", async () => {
    const clock = new FakeClock();
    let calls = 0;
    let next = await active(1);
    const cache = new SnapshotCache(async () => (calls++, next), clock, 1000);
    const a = await cache.current();
    clock.advance(999);
    expect(await cache.current()).toBe(a);
    expect(calls).toBe(1);
    next = await active(2, 9902);
    clock.advance(1);
    const b = await cache.current();
    expect(b.revision).toBe(2);
    expect(calls).toBe(2);
    // A request that pinned `a` still holds revision 1, frozen.
    expect(a.revision).toBe(1);
    expect(Object.isFrozen(a) && Object.isFrozen(a.pools.get("sim-small")!.members[0]!.backend)).toBe(true);
  });

  it("keeps the same pinned object when the revision did not change", async () => {
    const clock = new FakeClock();
    const snap = await active(1);
    const cache = new SnapshotCache(async () => snap, clock, 10);
    const a = await cache.current();
    clock.advance(50);
    expect(await cache.current()).toBe(a);
  });

  it("makes one controller call for concurrent refreshes", async () => {
    const clock = new FakeClock();
    let calls = 0;
    const snap = await active(1);
    const cache = new SnapshotCache(async () => {
      calls++;
      await new Promise((r) => setTimeout(r, 5));
      return snap;
    }, clock, 1000);
    await Promise.all(Array.from({ length: 20 }, () => cache.current()));
    expect(calls).toBe(1);
  });

  it("serves the last-known revision when the controller fails, and fails closed with none", async () => {
    const clock = new FakeClock();
    let fail = false;
    const failures: unknown[] = [];
    const snap = await active(3);
    const cache = new SnapshotCache(async () => {
      if (fail) throw new Error("controller down");
      return snap;
    }, clock, 100, (e) => failures.push(e));
    await cache.current();
    fail = true;
    clock.advance(200);
    expect((await cache.current()).revision).toBe(3);
    expect(failures).toHaveLength(1);

    const empty = new SnapshotCache(async () => {
      throw new Error("controller down");
    }, clock, 100);
    const err = await empty.current().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).code).toBe("snapshot_unavailable");
    expect((err as GatewayError).status).toBe(503);
  });

  it("asks again at once after invalidate()", async () => {
    const clock = new FakeClock();
    let n = 1;
    const cache = new SnapshotCache(async () => active(n), clock, 60_000);
    expect((await cache.current()).revision).toBe(1);
    n = 2;
    cache.invalidate();
    expect((await cache.current()).revision).toBe(2);
  });
});

describe("unmetRequirements", () => {
  it("is empty when the snapshot serves the publication, and names what is missing otherwise", async () => {
    const cfg = loadConfig(bundledTexts);
    const reqs = compilePublication(cfg.publication).poolRequirements;
    const full = pinSnapshot(await active(1));
    expect(unmetRequirements(full, reqs)).toEqual([]);
    const noLarge = { ...full, pools: new Map([...full.pools].filter(([name]) => name !== "sim-large")) };
    expect(unmetRequirements(noLarge, reqs)).toEqual(['pool "sim-large" (needed by model chat-large revision 1) is missing']);
    const weak = [{ pool: "sim-small", requires: ["chat", "images"] as const, neededBy: "test" }];
    const small = full.pools.get("sim-small")!;
    const stripped = { ...full, pools: new Map([["sim-small", { ...small, members: small.members.map((m) => ({ ...m, backend: { ...m.backend, capabilities: ["chat" as const] } })) }]]) };
    expect(unmetRequirements(stripped, weak)[0]).toContain("lacks images");
  });
});

describe("unmetRequirementsOf (what /ready asks on every probe)", () => {
  it("reads the snapshot once per snapshot and publication revision, and answers as unmetRequirements does", async () => {
    const cfg = loadConfig(bundledTexts);
    const reqs = compilePublication(cfg.publication).poolRequirements;
    const full = pinSnapshot(await active(1));
    let reads = 0;
    class CountingMap<K, V> extends Map<K, V> {
      override get(key: K): V | undefined {
        reads++;
        return super.get(key);
      }
    }
    const counted = { ...full, pools: new CountingMap([...full.pools].filter(([name]) => name !== "sim-large")) };
    const first = unmetRequirementsOf(counted, reqs);
    expect(first).toEqual(unmetRequirements(counted, reqs));
    expect(first).toEqual(['pool "sim-large" (needed by model chat-large revision 1) is missing']);
    const readsAfterFirst = reads;
    expect(readsAfterFirst).toBeGreaterThan(0);
    expect(unmetRequirementsOf(counted, reqs)).toBe(first);
    expect(reads).toBe(readsAfterFirst);
    // Another revision's requirements (a new array) are checked afresh against the same snapshot.
    const revised = compilePublication(cfg.publication).poolRequirements;
    expect(unmetRequirementsOf(counted, revised)).toEqual(first);
    expect(reads).toBeGreaterThan(readsAfterFirst);
    // And another snapshot with the same requirements.
    expect(unmetRequirementsOf(full, reqs)).toEqual([]);
  });
});
