import { describe, expect, it } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import type { ActivePublication, PublicationHead } from "../../../src/publication-lifecycle/controller.ts";
import { PublicationCache } from "../../../src/publication-lifecycle/publication-cache.ts";
import { FakeClock } from "../support/fixtures.ts";

/** A controller stand-in that counts what the cache asks it. */
function fakeController() {
  const revisions = new Map<number, ActivePublication>([[1, { revision: 1, digest: "d1", label: "a", document: { n: 1 } }]]);
  const calls = { getActive: 0, head: 0, get: 0 };
  let active = 1;
  let down = false;
  const check = () => {
    if (down) throw new Error("controller unreachable");
  };
  return {
    calls,
    activate(r: ActivePublication) {
      revisions.set(r.revision, r);
      active = r.revision;
    },
    fail(v: boolean) {
      down = v;
    },
    client: {
      getActive: async () => (check(), calls.getActive++, revisions.get(active)!),
      head: async (): Promise<PublicationHead> => (check(), calls.head++, { revision: active, digest: revisions.get(active)!.digest }),
      get: async (n: number) => (check(), calls.get++, revisions.get(n)),
    },
  };
}

describe("PublicationCache", () => {
  it("builds each revision once, serves it for the TTL, and asks only for the head after that", async () => {
    const clock = new FakeClock();
    const c = fakeController();
    const built: number[] = [];
    const cache = new PublicationCache(c.client, (a) => (built.push(a.revision), { rev: a.revision }), { clock, ttlMs: 1000 });
    const first = await cache.current();
    expect(first).toEqual({ rev: 1 });
    expect(await cache.current()).toBe(first);
    clock.advance(999);
    await cache.current();
    expect(c.calls).toEqual({ getActive: 1, head: 0, get: 0 });
    clock.advance(1);
    expect(await cache.current()).toBe(first);
    expect(c.calls).toEqual({ getActive: 1, head: 1, get: 0 });
    expect(built).toEqual([1]);

    c.activate({ revision: 2, digest: "d2", label: "b", document: { n: 2 } });
    // Still within the TTL: the old revision serves.
    expect(await cache.current()).toBe(first);
    clock.advance(1000);
    const second = await cache.current();
    expect(second).toEqual({ rev: 2 });
    expect(c.calls).toEqual({ getActive: 1, head: 2, get: 1 });
    // A request that pinned the first keeps it; a rollback to 1 reuses the built value.
    c.activate({ revision: 1, digest: "d1", label: "a", document: { n: 1 } });
    cache.invalidate();
    expect(await cache.current()).toBe(first);
    expect(built).toEqual([1, 2]);
    expect(cache.peek()?.revision).toBe(1);
  });

  it("shares one refresh between concurrent requests", async () => {
    const clock = new FakeClock();
    const c = fakeController();
    const cache = new PublicationCache(c.client, (a) => ({ rev: a.revision }), { clock, ttlMs: 1000 });
    const all = await Promise.all([cache.current(), cache.current(), cache.current()]);
    expect(new Set(all).size).toBe(1);
    expect(c.calls.getActive).toBe(1);
  });

  it("keeps serving the last-known revision while the controller is down, and backs off for a TTL", async () => {
    const clock = new FakeClock();
    const c = fakeController();
    const failures: unknown[] = [];
    const cache = new PublicationCache(c.client, (a) => ({ rev: a.revision }), { clock, ttlMs: 1000, onRefreshFailure: (e) => failures.push(e) });
    const first = await cache.current();
    c.fail(true);
    clock.advance(1000);
    expect(await cache.current()).toBe(first);
    expect(await cache.current()).toBe(first);
    expect(failures).toHaveLength(1);
  });

  it("answers publication_unavailable when it never had a revision", async () => {
    const c = fakeController();
    c.fail(true);
    const cache = new PublicationCache(c.client, (a) => ({ rev: a.revision }), { clock: new FakeClock(), ttlMs: 1000 });
    const err = await cache.current().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).code).toBe("publication_unavailable");
  });

  it("keeps at most `keep` built revisions", async () => {
    const clock = new FakeClock();
    const c = fakeController();
    const cache = new PublicationCache(c.client, (a) => ({ rev: a.revision }), { clock, ttlMs: 0, keep: 2 });
    for (let n = 2; n <= 4; n++) {
      c.activate({ revision: n, digest: `d${n}`, label: "x", document: {} });
      await cache.current();
    }
    expect(cache.builtRevisions()).toEqual([3, 4]);
  });
});
