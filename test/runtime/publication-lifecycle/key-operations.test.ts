import { describe, expect, it } from "vitest";
import { PublicationController } from "../../../src/publication-lifecycle/controller.ts";
import { applyKeyOperation, listKeys, type KeyOperation } from "../../../src/publication-lifecycle/key-operations.ts";
import { publicationSchema } from "../../../src/config/publication-schema.ts";
import { bundled, FakeClock } from "../support/fixtures.ts";
import { bundledPublicationCheck, MemoryPublicationStore } from "../support/memory-publication-store.ts";

const check = await bundledPublicationCheck();
const seed = () => bundled("publication");

const T0 = "2026-06-01T00:00:00.000Z";
const at = (hours: number) => new Date(Date.parse(T0) + hours * 3_600_000).toISOString();
const digest = (c: string) => c.repeat(64);
const keysOf = (doc: unknown) => (doc as { tenants: { apiKeys: Record<string, unknown>[] }[] }).tenants[0]!.apiKeys;

function apply(doc: unknown, op: KeyOperation) {
  const r = applyKeyOperation(doc, op);
  if (!r.ok) throw new Error(r.issues.map((i) => i.message).join("; "));
  return r;
}

describe("applyKeyOperation", () => {
  it("creates a key holding only its digest, and leaves the input document as it was", () => {
    const doc = seed();
    const r = apply(doc, { kind: "create", tenant: "demo", id: "ci", sha256: digest("c"), entrypoints: ["sluice-chat"], chargeTo: "platform", expiresAt: at(24), at: T0 });
    expect(keysOf(r.document).at(-1)).toEqual({ id: "ci", sha256: digest("c"), entrypoints: ["sluice-chat"], chargeTo: "platform", expiresAt: at(24), createdAt: T0 });
    expect(r.key).toMatchObject({ tenant: "demo", id: "ci", state: "active", digestPrefix: "cccccccc", previous: [] });
    expect(keysOf(doc).some((k) => k.id === "ci")).toBe(false);
    // The result is a valid publication.
    expect(publicationSchema.safeParse(r.document).success).toBe(true);
  });

  it("refuses an unknown tenant or key as not found, a taken id (a revoked one too) and an ambiguous id", () => {
    const doc = seed();
    expect(applyKeyOperation(doc, { kind: "create", tenant: "ghost", id: "x", sha256: digest("d"), entrypoints: ["*"], at: T0 })).toMatchObject({ ok: false, notFound: true });
    expect(applyKeyOperation(doc, { kind: "revoke", id: "ghost", at: T0 })).toMatchObject({ ok: false, notFound: true });
    const revoked = apply(doc, { kind: "revoke", id: "limited", at: T0 }).document;
    const taken = applyKeyOperation(revoked, { kind: "create", tenant: "demo", id: "limited", sha256: digest("d"), entrypoints: ["*"], at: T0 });
    expect(taken).toMatchObject({ ok: false });
    expect(taken.ok ? "" : taken.issues[0]!.message).toContain("never reused");
    const twoTenants = structuredClone(doc) as { tenants: Record<string, unknown>[] };
    twoTenants.tenants.push({ id: "other", apiKeys: [{ id: "demo", sha256: digest("e"), entrypoints: ["*"] }] });
    const ambiguous = applyKeyOperation(twoTenants, { kind: "disable", id: "demo", at: T0 });
    expect(ambiguous.ok ? "" : ambiguous.issues[0]!.message).toBe('key id "demo" is in tenants "demo", "other": name the tenant');
    expect(apply(twoTenants, { kind: "disable", tenant: "other", id: "demo", at: T0 }).key).toMatchObject({ tenant: "other", state: "disabled" });
  });

  it("revokes for good (enable and rotate are refused after), and repeating a change leaves the document as it was", () => {
    const revoked = apply(seed(), { kind: "revoke", id: "limited", at: T0 });
    expect(revoked.key).toMatchObject({ state: "revoked", revokedAt: T0 });
    expect(apply(revoked.document, { kind: "revoke", id: "limited", at: at(1) }).document).toEqual(revoked.document);
    expect(applyKeyOperation(revoked.document, { kind: "enable", id: "limited", at: T0 })).toMatchObject({ ok: false });
    expect(applyKeyOperation(revoked.document, { kind: "rotate", id: "limited", sha256: digest("f"), graceUntil: at(1), at: T0 })).toMatchObject({ ok: false });
    const disabled = apply(seed(), { kind: "disable", id: "limited", at: T0 });
    expect(disabled.key.state).toBe("disabled");
    expect(apply(disabled.document, { kind: "disable", id: "limited", at: T0 }).document).toEqual(disabled.document);
    expect(apply(disabled.document, { kind: "enable", id: "limited", at: T0 }).document).toEqual(seed());
  });

  it("rotates with a grace per replaced value: overlapping rotations keep every value still in its grace, and drop ended ones", () => {
    const first = apply(seed(), { kind: "rotate", id: "demo", sha256: digest("1"), graceUntil: at(24), at: T0 });
    const original = keysOf(seed()).find((k) => k.id === "demo")!.sha256 as string;
    expect(keysOf(first.document).find((k) => k.id === "demo")).toMatchObject({ sha256: digest("1"), previous: [{ sha256: original, until: at(24) }], chargeTo: "platform/playground" });
    const second = apply(first.document, { kind: "rotate", id: "demo", sha256: digest("2"), graceUntil: at(30), at: at(6) });
    expect(second.key.previous).toEqual([
      { digestPrefix: original.slice(0, 8), until: at(24) },
      { digestPrefix: "11111111", until: at(30) },
    ]);
    // A third rotation after the first grace ended drops that value; a zero grace adds none.
    const third = apply(second.document, { kind: "rotate", id: "demo", sha256: digest("3"), graceUntil: at(25), at: at(25) });
    expect(keysOf(third.document).find((k) => k.id === "demo")!.previous).toEqual([{ sha256: digest("1"), until: at(30) }]);
    expect(listKeys(third.document, Date.parse(at(31))).find((k) => k.id === "demo")!.previous).toEqual([]);
  });

  it("lists where each key stands at an instant", () => {
    const doc = apply(apply(seed(), { kind: "create", tenant: "demo", id: "temp", sha256: digest("9"), entrypoints: ["*"], expiresAt: at(1), at: T0 }).document, { kind: "disable", id: "limited", at: T0 }).document;
    const states = (t: number) => Object.fromEntries(listKeys(doc, t, "demo").map((k) => [k.id, k.state]));
    expect(states(Date.parse(T0))).toMatchObject({ demo: "active", limited: "disabled", temp: "active" });
    expect(states(Date.parse(at(1)))).toMatchObject({ temp: "expired" });
    expect(listKeys(doc, Date.parse(T0), "nobody")).toEqual([]);
  });
});

describe("PublicationController.amendKeys", () => {
  const controller = () => new PublicationController(new MemoryPublicationStore(), new FakeClock());

  it("publishes each key change as a revision whose document holds the digest, and lists the keys", async () => {
    const c = controller();
    const r = await c.amendKeys({ kind: "create", tenant: "demo", id: "ci", sha256: digest("c"), entrypoints: ["*"], at: T0 }, "admin", check, seed);
    expect(r).toMatchObject({ status: "activated", revision: 2, previous: 1, key: { id: "ci", state: "active" } });
    expect(JSON.stringify(c.get(2)!.document)).toContain(digest("c"));
    expect((await c.keys(seed, check, "demo")).map((k) => k.id)).toEqual(["demo", "limited", "ci"]);
    expect(await c.amendKeys({ kind: "disable", id: "ci", at: T0 }, "admin", check, seed)).toMatchObject({ status: "activated", revision: 3 });
    expect(await c.amendKeys({ kind: "disable", id: "ci", at: T0 }, "admin", check, seed)).toMatchObject({ status: "unchanged", revision: 3 });
  });

  it("answers not_found for an unknown key, and a change the publication check refuses is rejected with its issues", async () => {
    const c = controller();
    expect(await c.amendKeys({ kind: "revoke", id: "ghost", at: T0 }, "admin", check, seed)).toEqual({ status: "not_found", message: 'there is no key "ghost"' });
    const bad = await c.amendKeys({ kind: "create", tenant: "demo", id: "x", sha256: digest("c"), entrypoints: ["no-such-entrypoint"], at: T0 }, "admin", check, seed);
    expect(bad.status).toBe("rejected");
    expect(bad.status === "rejected" ? bad.issues.map((i) => i.message) : []).toEqual(['unknown entrypoint "no-such-entrypoint"']);
    // A digest another key already has is refused too.
    const dup = await c.amendKeys({ kind: "create", tenant: "demo", id: "y", sha256: keysOf(seed())[0]!.sha256 as string, entrypoints: ["*"], at: T0 }, "admin", check, seed);
    expect(dup.status === "rejected" ? dup.issues.map((i) => i.message).join() : "").toContain("is listed twice");
    expect((await c.head(seed, check)).revision).toBe(1);
  });

  it("while a canary runs, a key change reaches both revisions: the canary keeps its share and stays a canary", async () => {
    const c = controller();
    await c.head(seed, check);
    const candidate = seed();
    candidate.revision = "demo-canary";
    expect(await c.publish(candidate, "admin", check, seed, { canary: 30 })).toMatchObject({ status: "canary", revision: 2, percent: 30 });
    const r = await c.amendKeys({ kind: "revoke", id: "limited", at: T0 }, "admin", check, seed);
    expect(r).toMatchObject({ status: "activated", revision: 4, previous: 1 });
    const head = await c.head(seed, check);
    expect(head).toMatchObject({ revision: 4, canary: { revision: 3, percent: 30 } });
    for (const rev of [3, 4]) expect(listKeys(c.get(rev)!.document, Date.parse(T0)).find((k) => k.id === "limited")!.state).toBe("revoked");
    expect(c.get(3)!.label).toBe("demo-canary");
    expect(c.history().events.slice(0, 2).map((e) => e.kind)).toEqual(["activated", "canary_amended"]);
    // Promoting then serves the canary's content with the key change in it.
    expect(c.promote("admin")).toMatchObject({ status: "promoted", revision: 3 });
  });

  it("never loses a change to a concurrent one: each starts again from the revision the other activated", async () => {
    const c = controller();
    await c.head(seed, check);
    const ops: KeyOperation[] = Array.from({ length: 4 }, (_, i) => ({ kind: "create", tenant: "demo", id: `k${i}`, sha256: digest(String(i)), entrypoints: ["*"], at: T0 }));
    const results = await Promise.all(ops.map((op) => c.amendKeys(op, "admin", check, seed)));
    expect(results.every((r) => r.status === "activated")).toBe(true);
    expect((await c.keys(seed, check)).map((k) => k.id)).toEqual(["demo", "limited", "k0", "k1", "k2", "k3"]);
  });
});
