import { describe, expect, it } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import type { ActivePublication, PublicationHead } from "../../../src/publication-lifecycle/controller.ts";
import { PublicationCache } from "../../../src/publication-lifecycle/publication-cache.ts";
import { canaryBucket } from "../../../src/publication-lifecycle/canary-bucket.ts";
import { routingKeyOf } from "../../../src/http/routing-key.ts";
import { FakeClock } from "../support/fixtures.ts";

/** A controller stand-in that counts what the cache asks it. */
function fakeController() {
  const revisions = new Map<number, ActivePublication>([[1, { revision: 1, digest: "d1", label: "a", document: { n: 1 } }]]);
  const calls = { getActive: 0, head: 0, get: 0 };
  let active = 1;
  let canary: { revision: number; percent: number } | undefined;
  let down = false;
  const check = () => {
    if (down) throw new Error("controller unreachable");
  };
  const canaryHead = () => canary && { ...canary, digest: revisions.get(canary.revision)!.digest };
  return {
    calls,
    activate(r: ActivePublication) {
      revisions.set(r.revision, r);
      active = r.revision;
    },
    fail(v: boolean) {
      down = v;
    },
    canary(r: ActivePublication | undefined, percent = 50) {
      if (r) revisions.set(r.revision, r);
      canary = r && { revision: r.revision, percent };
    },
    client: {
      getActive: async () => (check(), calls.getActive++, { ...revisions.get(active)!, canary: canaryHead() }),
      head: async (): Promise<PublicationHead> => (check(), calls.head++, { revision: active, digest: revisions.get(active)!.digest, canary: canaryHead() }),
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

  describe("canary", () => {
    const keys = Array.from({ length: 2000 }, (_, i) => `sk-sluice-${i.toString(36)}-${"x".repeat(i % 7)}`);

    it("serves the canary to the keys in its share, the stable revision to the rest and to requests without a key", async () => {
      const clock = new FakeClock();
      const c = fakeController();
      const cache = new PublicationCache(c.client, (a) => ({ rev: a.revision }), { clock, ttlMs: 1000 });
      expect(await cache.current(() => keys[0])).toEqual({ rev: 1 });
      c.canary({ revision: 2, digest: "d2", label: "b", document: {} }, 30);
      cache.invalidate();
      const served = await Promise.all(keys.map((k) => cache.current(() => k)));
      const onCanary = keys.filter((_, i) => served[i]!.rev === 2);
      expect(onCanary).toEqual(keys.filter((k) => canaryBucket(k) < 30));
      // 30% of 2000 keys, within 3 points.
      expect(Math.abs(onCanary.length / keys.length - 0.3)).toBeLessThan(0.03);
      expect(await cache.current()).toEqual({ rev: 1 });
      expect(await cache.current(() => undefined)).toEqual({ rev: 1 });
      expect(cache.peekCanary()).toMatchObject({ revision: 2, percent: 30 });
      expect(cache.builtRevisions().sort()).toEqual([1, 2]);
    });

    it("keeps each key on one revision across refreshes; a larger share only moves keys onto the canary", async () => {
      const clock = new FakeClock();
      const c = fakeController();
      const cache = new PublicationCache(c.client, (a) => ({ rev: a.revision }), { clock, ttlMs: 1000 });
      c.canary({ revision: 2, digest: "d2", label: "b", document: {} }, 20);
      const first = await Promise.all(keys.map((k) => cache.current(() => k)));
      for (let round = 0; round < 3; round++) {
        clock.advance(1000);
        const again = await Promise.all(keys.map((k) => cache.current(() => k)));
        expect(again.map((v) => v.rev)).toEqual(first.map((v) => v.rev));
      }
      c.canary({ revision: 2, digest: "d2", label: "b", document: {} }, 60);
      clock.advance(1000);
      const wider = await Promise.all(keys.map((k) => cache.current(() => k)));
      keys.forEach((_, i) => {
        if (first[i]!.rev === 2) expect(wider[i]!.rev).toBe(2);
      });
      expect(wider.filter((v) => v.rev === 2).length).toBeGreaterThan(first.filter((v) => v.rev === 2).length);
    });

    it("asks for the key only while a canary runs, and drops the canary when it ends", async () => {
      const clock = new FakeClock();
      const c = fakeController();
      const cache = new PublicationCache(c.client, (a) => ({ rev: a.revision }), { clock, ttlMs: 1000 });
      let asked = 0;
      const key = () => (asked++, keys.find((k) => canaryBucket(k) < 50));
      await cache.current(key);
      await cache.current(key);
      expect(asked).toBe(0);
      c.canary({ revision: 2, digest: "d2", label: "b", document: {} }, 50);
      cache.invalidate();
      expect(await cache.current(key)).toEqual({ rev: 2 });
      expect(asked).toBe(1);
      // Promote: the canary's revision becomes the active one, built once, reused.
      c.activate({ revision: 2, digest: "d2", label: "b", document: {} });
      c.canary(undefined);
      cache.invalidate();
      expect(await cache.current(key)).toEqual({ rev: 2 });
      expect(cache.peekCanary()).toBeUndefined();
      expect(cache.peek()?.revision).toBe(2);
      expect(asked).toBe(1);
    });

    it("serves the stable revision to everyone when the canary's revision cannot be fetched", async () => {
      const clock = new FakeClock();
      const c = fakeController();
      const failures: unknown[] = [];
      const cache = new PublicationCache({ ...c.client, get: async () => undefined }, (a) => ({ rev: a.revision }), { clock, ttlMs: 1000, onRefreshFailure: (e) => failures.push(e) });
      c.canary({ revision: 2, digest: "d2", label: "b", document: {} }, 99);
      const served = await Promise.all(keys.slice(0, 50).map((k) => cache.current(() => k)));
      expect(new Set(served.map((v) => v.rev))).toEqual(new Set([1]));
      expect(String(failures[0])).toContain("canary revision 2 is not stored");
    });
  });
});

describe("routingKeyOf", () => {
  const jwt = (claims: object) => `${btoa('{"alg":"RS256"}')}.${btoa(JSON.stringify(claims)).replaceAll("=", "").replaceAll("+", "-").replaceAll("/", "_")}.c2ln`;

  it("is the API key from either header, nothing without a credential", () => {
    expect(routingKeyOf(new Headers({ authorization: "Bearer sk-a" }))).toBe("sk-a");
    expect(routingKeyOf(new Headers({ "x-api-key": "sk-b" }))).toBe("sk-b");
    expect(routingKeyOf(new Headers())).toBeUndefined();
  });

  it("is a JWT's issuer and subject, so a refreshed token keeps its bucket", () => {
    const a = routingKeyOf(new Headers({ authorization: `Bearer ${jwt({ iss: "https://idp", sub: "u1", exp: 1 })}` }));
    const b = routingKeyOf(new Headers({ authorization: `Bearer ${jwt({ iss: "https://idp", sub: "u1", exp: 2, jti: "x" })}` }));
    expect(a).toBe(b);
    expect(a).not.toBe(routingKeyOf(new Headers({ authorization: `Bearer ${jwt({ iss: "https://idp", sub: "u2" })}` })));
    // Not a JWT after all: the token text.
    expect(routingKeyOf(new Headers({ authorization: "Bearer a.b.c" }))).toBe("a.b.c");
  });
});
