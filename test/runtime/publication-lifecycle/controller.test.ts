import { describe, expect, it } from "vitest";
import { PublicationController, PublicationSeedError } from "../../../src/publication-lifecycle/controller.ts";
import { bundled, FakeClock } from "../support/fixtures.ts";
import { bundledPublicationCheck, MemoryPublicationStore } from "../support/memory-publication-store.ts";

const check = await bundledPublicationCheck();

/** The bundled publication with one more key and the project's daily money limit lowered. */
function withNewKey(limit = 1): Record<string, any> {
  const p = bundled("publication");
  p.revision = "demo-2";
  p.tenants[0].apiKeys.push({ id: "added", sha256: "a".repeat(64), entrypoints: ["sluice-chat"], chargeTo: "platform/playground" });
  p.tenants[0].teams[0].projects[0].limits.money.limit = limit;
  return p;
}

function controller() {
  const store = new MemoryPublicationStore();
  return { store, c: new PublicationController(store, new FakeClock()) };
}

describe("PublicationController", () => {
  it("seeds the bundled publication as revision 1, once", async () => {
    const { c } = controller();
    let reads = 0;
    const seed = () => (reads++, bundled("publication"));
    const a = await c.activeOrSeed(seed, check);
    expect(a).toMatchObject({ revision: 1, label: "demo-1" });
    expect(a.digest).toMatch(/^sha256:/);
    await c.activeOrSeed(seed, check);
    expect(reads).toBe(1);
    expect(c.history().events.map((e) => e.kind)).toEqual(["seeded"]);
  });

  it("refuses a seed that does not validate, naming every issue", async () => {
    const { c } = controller();
    const bad = bundled("publication");
    bad.tenants[0].apiKeys[0].entrypoints = ["nope"];
    bad.entrypoints[0].default = [["ghost"]];
    const err = await c.activeOrSeed(() => bad, check).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PublicationSeedError);
    expect(String(err)).toContain('unknown entrypoint "nope"');
    expect(String(err)).toContain('unknown model "ghost"');
  });

  it("activates a valid candidate atomically; identical content is a no-op", async () => {
    const { c } = controller();
    await c.activeOrSeed(() => bundled("publication"), check);
    const r = await c.publish(withNewKey(), "admin", check);
    expect(r).toMatchObject({ status: "activated", revision: 2, previous: 1 });
    expect((await c.head(() => bundled("publication"), check)).revision).toBe(2);
    expect(c.get(2)?.label).toBe("demo-2");
    expect(await c.publish(withNewKey(), "admin", check)).toMatchObject({ status: "unchanged", revision: 2 });
    // The seed's content again re-activates its number.
    expect(await c.publish(bundled("publication"), "admin", check)).toMatchObject({ status: "activated", revision: 1, previous: 2 });
  });

  it("rejects an invalid candidate with every issue and changes nothing", async () => {
    const { c } = controller();
    await c.activeOrSeed(() => bundled("publication"), check);
    const bad = withNewKey();
    bad.tenants[0].apiKeys.push({ id: "dup", sha256: "a".repeat(64), entrypoints: ["ghost-ep"] });
    bad.surprise = true;
    const r = await c.publish(bad, "admin", check);
    expect(r.status).toBe("rejected");
    if (r.status !== "rejected") return;
    // A schema failure stops before the cross-checks: fix the unknown key, then the references are reported.
    expect(r.issues).toEqual([{ file: "publication.yaml", path: "surprise", message: "unknown key" }]);
    delete bad.surprise;
    const r2 = await c.publish(bad, "admin", check);
    expect(r2.status === "rejected" && r2.issues.map((i) => i.path).sort()).toEqual(["tenants", "tenants[0].apiKeys[3].entrypoints[0]"]);
    // References and the snapshot's pools in one answer.
    bad.models[0].revisions[0].pool = "no-such-pool";
    const r3 = await c.publish(bad, "admin", check);
    expect(r3.status === "rejected" && r3.issues.map((i) => i.path).sort()).toEqual(["models[0]", "tenants", "tenants[0].apiKeys[3].entrypoints[0]"]);
    expect((await c.head(() => bundled("publication"), check)).revision).toBe(1);
    expect(c.history().events.map((e) => e.kind)).toEqual(["rejected", "rejected", "rejected", "seeded"]);
  });

  it("rejects a candidate whose models need pools the active snapshot lacks", async () => {
    const { c } = controller();
    await c.activeOrSeed(() => bundled("publication"), check);
    const p = bundled("publication");
    p.models[0].revisions[0].pool = "no-such-pool";
    const r = await c.publish(p, "admin", check);
    expect(r.status).toBe("rejected");
    expect(r.status === "rejected" && r.issues[0]).toMatchObject({ path: "models[0]", message: expect.stringContaining('pool "no-such-pool"') });
  });

  it("refuses to change a ledger root's stripes once activated", async () => {
    const { c } = controller();
    await c.activeOrSeed(() => bundled("publication"), check);
    const p = bundled("publication");
    p.tenants[0].ledger = { stripes: 4 };
    const r = await c.publish(p, "admin", check);
    expect(r.status === "rejected" && r.issues[0]).toMatchObject({ path: "tenants[0].ledger.stripes", message: expect.stringContaining("1 stripes") });
  });

  it("rolls back to the last-known-good, or to a named revision, without checking it again", async () => {
    const { c } = controller();
    await c.activeOrSeed(() => bundled("publication"), check);
    await c.publish(withNewKey(), "admin", check);
    await c.publish(withNewKey(2), "admin", check);
    expect(c.history().lastKnownGood).toBe(2);
    expect(c.rollback(undefined, "admin")).toMatchObject({ status: "activated", revision: 2, previous: 3 });
    expect(c.rollback(1, "admin")).toMatchObject({ status: "activated", revision: 1, previous: 2 });
    expect(c.rollback(99, "admin")).toMatchObject({ status: "not_found" });
    const h = c.history();
    expect(h.active).toBe(1);
    expect(h.events.map((e) => e.kind)).toEqual(["rolled_back", "rolled_back", "activated", "activated", "seeded"]);
    expect(h.revisions.map((r) => r.revision)).toEqual([3, 2, 1]);
  });

  it("keeps a runtime revision across a restart, and publishes a changed seed", async () => {
    const { store, c } = controller();
    await c.activeOrSeed(() => bundled("publication"), check);
    await c.publish(withNewKey(), "admin", check);
    // A restart: a new controller over the same storage, the same bundled file.
    const restarted = new PublicationController(store, new FakeClock());
    expect((await restarted.activeOrSeed(() => bundled("publication"), check)).revision).toBe(2);
    // A deploy with a changed file: the file is published as the seed.
    const changed = bundled("publication");
    changed.revision = "demo-deployed";
    const deployed = new PublicationController(store, new FakeClock());
    expect(await deployed.activeOrSeed(() => changed, check)).toMatchObject({ revision: 3, label: "demo-deployed" });
    expect(deployed.history().events[0]).toMatchObject({ kind: "activated", source: "seed", previous: 2 });
    // A changed seed that is rejected leaves the active revision serving; the rejection is in the history.
    const broken = bundled("publication");
    broken.entrypoints[0].default = [["ghost"]];
    const again = new PublicationController(store, new FakeClock());
    expect((await again.activeOrSeed(() => broken, check)).revision).toBe(3);
    expect(again.history().events[0]).toMatchObject({ kind: "rejected", source: "seed" });
  });

  it("has nothing to roll back to right after the seed", async () => {
    const { c } = controller();
    await c.activeOrSeed(() => bundled("publication"), check);
    expect(c.rollback(undefined, "admin")).toMatchObject({ status: "not_found" });
  });
});

describe("PublicationController canary", () => {
  const seed = () => bundled("publication");

  it("stores a canary without activating it, and head and history carry it", async () => {
    const { c } = controller();
    await c.activeOrSeed(seed, check);
    const r = await c.publish(withNewKey(), "admin", check, seed, { canary: 20 });
    expect(r).toMatchObject({ status: "canary", revision: 2, percent: 20, active: 1 });
    const head = await c.head(seed, check);
    expect(head).toMatchObject({ revision: 1, canary: { revision: 2, percent: 20 } });
    expect(head.canary?.digest).toMatch(/^sha256:/);
    const h = c.history();
    expect(h.active).toBe(1);
    expect(h.canary).toMatchObject({ revision: 2, percent: 20, startedAt: new Date(1_800_000_000_000).toISOString() });
    expect(h.events[0]).toMatchObject({ kind: "canary_started", revision: 2, percent: 20, previous: 1 });
    expect(c.get(2)?.label).toBe("demo-2");
  });

  it("checks a canary candidate as a publish does", async () => {
    const { c } = controller();
    await c.activeOrSeed(seed, check);
    const bad = withNewKey();
    bad.entrypoints[0].default = [["ghost"]];
    const r = await c.publish(bad, "admin", check, seed, { canary: 50 });
    expect(r.status).toBe("rejected");
    expect(c.history().canary).toBeUndefined();
  });

  it("changes the share when the same candidate is published again, and refuses anything else while it runs", async () => {
    const { c } = controller();
    await c.activeOrSeed(seed, check);
    await c.publish(withNewKey(), "admin", check, seed, { canary: 10 });
    expect(await c.publish(withNewKey(), "admin", check, seed, { canary: 40 })).toMatchObject({ status: "canary", revision: 2, percent: 40 });
    expect(c.history().canary?.percent).toBe(40);
    expect(c.history().events[0]).toMatchObject({ kind: "canary_percent", percent: 40 });
    for (const [candidate, options] of [
      [withNewKey(), {}],
      [withNewKey(2), { canary: 30 }],
      [withNewKey(2), {}],
    ] as const) {
      const r = await c.publish(candidate, "admin", check, seed, options);
      expect(r.status === "rejected" && r.issues[0]?.message).toBe("a canary of revision 2 is running (40%); promote or abort it first");
    }
    expect((await c.head(seed, check)).revision).toBe(1);
    expect(c.history().canary).toMatchObject({ revision: 2, percent: 40 });
  });

  it("a canary of the active content is unchanged, and a share outside 1..99 is a programming error", async () => {
    const { c } = controller();
    await c.activeOrSeed(seed, check);
    expect(await c.publish(seed(), "admin", check, seed, { canary: 50 })).toMatchObject({ status: "unchanged", revision: 1 });
    expect(c.history().canary).toBeUndefined();
    await expect(c.publish(withNewKey(), "admin", check, seed, { canary: 100 })).rejects.toThrow(RangeError);
    await expect(c.publish(withNewKey(), "admin", check, seed, { canary: 0 })).rejects.toThrow(RangeError);
  });

  it("promotes: the canary is active, the old active is the last-known-good and rollback returns to it", async () => {
    const { c } = controller();
    await c.activeOrSeed(seed, check);
    await c.publish(withNewKey(), "admin", check, seed, { canary: 50 });
    expect(c.promote("admin")).toMatchObject({ status: "promoted", revision: 2, previous: 1 });
    const h = c.history();
    expect(h).toMatchObject({ active: 2, lastKnownGood: 1, canary: undefined });
    expect(h.events[0]).toMatchObject({ kind: "canary_promoted", revision: 2, previous: 1 });
    expect((await c.head(seed, check)).canary).toBeUndefined();
    expect(c.promote("admin")).toMatchObject({ status: "not_found" });
    // A plain publish works again once the canary is gone.
    expect(await c.publish(withNewKey(2), "admin", check, seed)).toMatchObject({ status: "activated", revision: 3, previous: 2 });
    expect(c.rollback(undefined, "admin")).toMatchObject({ status: "activated", revision: 2, previous: 3 });
  });

  it("aborts: the active revision is untouched and the canary's revision stays stored", async () => {
    const { c } = controller();
    await c.activeOrSeed(seed, check);
    await c.publish(withNewKey(), "admin", check, seed, { canary: 50 });
    expect(c.abort("admin")).toMatchObject({ status: "aborted", revision: 2 });
    expect(c.history()).toMatchObject({ active: 1, canary: undefined });
    expect(c.history().events[0]).toMatchObject({ kind: "canary_aborted", revision: 2, source: "admin" });
    expect(c.abort("admin")).toMatchObject({ status: "not_found" });
    // Its content as a new canary takes the stored number again.
    expect(await c.publish(withNewKey(), "admin", check, seed, { canary: 5 })).toMatchObject({ status: "canary", revision: 2, percent: 5 });
  });

  it("a rollback ends a running canary and says so", async () => {
    const { c } = controller();
    await c.activeOrSeed(seed, check);
    await c.publish(withNewKey(), "admin", check, seed);
    await c.publish(withNewKey(2), "admin", check, seed, { canary: 50 });
    expect(c.rollback(undefined, "admin")).toMatchObject({ status: "activated", revision: 1, previous: 2, abortedCanary: 3 });
    const h = c.history();
    expect(h).toMatchObject({ active: 1, canary: undefined });
    expect(h.events.slice(0, 2)).toMatchObject([
      { kind: "rolled_back", revision: 1 },
      { kind: "canary_aborted", revision: 3, reason: "rollback" },
    ]);
  });

  it("keeps a running canary across a restart", async () => {
    const { store, c } = controller();
    await c.activeOrSeed(seed, check);
    await c.publish(withNewKey(), "admin", check, seed, { canary: 30 });
    const restarted = new PublicationController(store, new FakeClock());
    expect(await restarted.head(seed, check)).toMatchObject({ revision: 1, canary: { revision: 2, percent: 30 } });
    expect(restarted.promote("admin")).toMatchObject({ status: "promoted", revision: 2 });
  });
});
