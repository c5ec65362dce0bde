import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { loadConfig } from "../../../src/config/load-config.ts";
import { compilePublication } from "../../../src/publication/compile-publication.ts";
import { SnapshotController, SnapshotSeedError } from "../../../src/snapshot/controller.ts";
import { normalizeSnapshot, type SnapshotContext } from "../../../src/snapshot/normalize.ts";
import { ALLOWED_TARGETS, FORBIDDEN_TARGETS } from "../support/egress-targets.ts";
import { bundledTexts, FakeClock, MemorySnapshotStore } from "../support/fixtures.ts";

const config = loadConfig(bundledTexts);
// The fixtures' backends are loopback simulators on several ports.
const ctx: SnapshotContext = { supportedProtocols: new Set(["openai-chat"]), logprobsProtocols: new Set(["openai-chat"]), requirements: compilePublication(config.publication).poolRequirements, egress: { allow: ["127.0.0.1"] } };
const seed = () => parse(bundledTexts.backends) as Record<string, any>;

function withSecondBackend() {
  const s = seed();
  s.backends.push({ name: "sim-b", protocol: "openai-chat", baseUrl: "http://127.0.0.1:9902/v1", capabilities: ["chat", "streaming", "stream-usage", "tools"] });
  s.pools[0].members.push({ backend: "sim-b", model: "sim-small", weight: 3 });
  return s;
}

describe("normalizeSnapshot", () => {
  it("gives deterministic ids and a digest independent of order and spelling", async () => {
    const a = withSecondBackend();
    const b = withSecondBackend();
    b.backends.reverse();
    b.pools.reverse();
    b.pools[1].members.reverse();
    b.backends[0].baseUrl = "http://127.0.0.1:9902/v1/"; // trailing slash is normalized away
    b.backends[0].capabilities.reverse();
    const ra = await normalizeSnapshot(a, ctx);
    const rb = await normalizeSnapshot(b, ctx);
    expect(ra.ok && rb.ok).toBe(true);
    if (!ra.ok || !rb.ok) return;
    expect(ra.digest).toBe(rb.digest);
    expect(ra.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(ra.snapshot.backends.map((x) => x.id)).toEqual(rb.snapshot.backends.map((x) => x.id));
    expect(ra.snapshot.backends[0]?.id).toMatch(/^be_[0-9a-f]{16}$/);
  });

  it("changes a backend's id when its address changes", async () => {
    const a = await normalizeSnapshot(seed(), ctx);
    const moved = seed();
    moved.backends[0].baseUrl = "http://127.0.0.1:9999/v1";
    const b = await normalizeSnapshot(moved, ctx);
    expect(a.ok && b.ok && a.snapshot.backends[0]!.id !== b.snapshot.backends[0]!.id).toBe(true);
  });

  it("reports every reason: references, protocol, URL, capabilities, missing pools", async () => {
    const s = seed();
    s.backends.push({ name: "sim-local", protocol: "openai-chat", baseUrl: "http://x/v1", capabilities: ["chat"] });
    s.backends.push({ name: "weird", protocol: "anthropic-messages", baseUrl: "http://user:pw@x/v1?q=1", capabilities: ["chat"] });
    s.pools[0].members.push({ backend: "ghost", model: "m" });
    s.pools[1].members = [{ backend: "weird", model: "claude" }];
    s.pools = s.pools.filter((p: any) => p.name !== "sim-small").concat([{ name: "other", members: [{ backend: "sim-local", model: "x" }] }]);
    const r = await normalizeSnapshot(s, ctx);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    const codes = r.reasons.map((x) => x.code);
    expect(codes).toEqual(
      expect.arrayContaining(["duplicate_name", "unsupported_protocol", "url_not_allowed", "missing_pool", "capability_missing"]),
    );
    expect(r.reasons.find((x) => x.code === "missing_pool")?.message).toContain("sim-small");
  });

  it("reports unknown backends in pools and schema errors with paths", async () => {
    const s = seed();
    s.pools[0].members[0].backend = "ghost";
    s.pools[1].colour = "blue";
    const schema = await normalizeSnapshot({ ...s, version: 2 }, ctx);
    expect(schema.ok).toBe(false);
    if (!schema.ok) expect(schema.reasons.map((x) => x.path)).toEqual(expect.arrayContaining(["version", "pools[1].colour"]));
    delete s.pools[1].colour;
    const refs = await normalizeSnapshot(s, ctx);
    expect(!refs.ok && refs.reasons.some((x) => x.code === "unknown_backend" && x.path === "pools[0].members[0].backend")).toBe(true);
  });
});

describe("the egress guard at snapshot push", () => {
  // The running gateway's own policy: the bundled gateway.yaml allows the simulator only.
  const bundledCtx: SnapshotContext = { ...ctx, egress: config.gateway.security.egress };
  const pushed = (url: string) => {
    const s = seed();
    s.backends[0].baseUrl = url;
    return s;
  };

  it.each(FORBIDDEN_TARGETS)("rejects a candidate with a backend at $url ($what), naming the path", async ({ url }) => {
    const r = await normalizeSnapshot(pushed(url), bundledCtx);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reasons).toContainEqual(expect.objectContaining({ path: "backends[0].baseUrl" }));
  });

  it.each(ALLOWED_TARGETS)("accepts a candidate with a backend at $url ($what)", async ({ url }) => {
    expect(await normalizeSnapshot(pushed(url), bundledCtx)).toMatchObject({ ok: true });
  });

  it("leaves the active revision alone and records the reason", async () => {
    const c = new SnapshotController(new MemorySnapshotStore(), new FakeClock());
    await c.propose(seed(), bundledCtx, "seed");
    const r = await c.propose(pushed("http://169.254.169.254/latest"), bundledCtx, "admin");
    expect(r).toEqual({ status: "rejected", reasons: [{ code: "url_not_allowed", path: "backends[0].baseUrl", message: "http://169.254.169.254 is a cloud metadata service, which is never allowed" }] });
    expect(c.active()?.revision).toBe(1);
    expect(c.history().events[0]).toMatchObject({ kind: "rejected", reasons: r.status === "rejected" ? r.reasons : [] });
  });

  it("records provider response headers sorted, and only when some are listed (digests of older snapshots stay)", async () => {
    const digestOf = async (responseHeaders: string[] | undefined) => {
      const s = seed();
      if (responseHeaders) s.backends[0].responseHeaders = responseHeaders;
      const r = await normalizeSnapshot(s, bundledCtx);
      if (!r.ok) throw new Error(JSON.stringify(r.reasons));
      return r;
    };
    const listed = await digestOf(["x-request-id", "openai-processing-ms", "x-request-id"]);
    expect(listed.snapshot.backends[0]!.responseHeaders).toEqual(["openai-processing-ms", "x-request-id"]);
    expect((await digestOf([])).digest).toBe((await digestOf(undefined)).digest);
    expect(listed.digest).not.toBe((await digestOf(undefined)).digest);
  });
});

describe("SnapshotController", () => {
  const make = () => {
    const store = new MemorySnapshotStore();
    return { store, c: new SnapshotController(store, new FakeClock()) };
  };

  it("activates, treats an identical candidate as a no-op, and keeps history", async () => {
    const { c } = make();
    const first = await c.propose(seed(), ctx, "seed");
    expect(first).toMatchObject({ status: "activated", revision: 1 });
    const again = await c.propose(seed(), ctx, "admin");
    expect(again).toMatchObject({ status: "unchanged", revision: 1 });
    const second = await c.propose(withSecondBackend(), ctx, "admin");
    expect(second).toMatchObject({ status: "activated", revision: 2, previous: 1 });
    expect(c.active()?.revision).toBe(2);
    expect(c.history().events.map((e) => e.kind)).toEqual(["activated", "unchanged", "seeded"]);
  });

  it("leaves the active revision untouched when a candidate is rejected", async () => {
    const { c } = make();
    await c.propose(seed(), ctx, "seed");
    const bad = seed();
    bad.pools = [];
    const r = await c.propose(bad, ctx, "admin");
    expect(r.status).toBe("rejected");
    expect(c.active()?.revision).toBe(1);
    expect(c.history().events[0]).toMatchObject({ kind: "rejected", source: "admin" });
  });

  it("rolls back to the last-known-good revision or a named one, without re-validation", async () => {
    const { c } = make();
    await c.propose(seed(), ctx, "seed");
    await c.propose(withSecondBackend(), ctx, "admin");
    const back = c.rollback(undefined, "admin");
    expect(back).toMatchObject({ status: "activated", revision: 1, previous: 2 });
    expect(c.active()?.revision).toBe(1);
    expect(c.rollback(2, "admin")).toMatchObject({ status: "activated", revision: 2 });
    expect(c.rollback(42, "admin")).toMatchObject({ status: "not_found" });
    expect(c.active()?.revision).toBe(2);
  });

  it("re-activates the stored revision number when older content comes back", async () => {
    const { c } = make();
    await c.propose(seed(), ctx, "seed");
    await c.propose(withSecondBackend(), ctx, "admin");
    expect(await c.propose(seed(), ctx, "admin")).toMatchObject({ status: "activated", revision: 1, previous: 2 });
  });

  it("seeds itself on first use only, reading the seed only then", async () => {
    const { c } = make();
    let reads = 0;
    const seeded = () => (reads++, { candidate: seed(), context: ctx });
    const first = await c.activeOrSeed(seeded);
    expect(first).toMatchObject({ revision: 1, digest: c.active()?.digest });
    expect(first.snapshot.backends.length).toBeGreaterThan(0);
    expect(c.history().events.map((e) => [e.kind, e.source])).toEqual([["seeded", "seed"]]);
    await c.propose(withSecondBackend(), ctx, "admin");
    expect((await c.activeOrSeed(seeded)).revision).toBe(2);
    expect(reads).toBe(1);
  });

  it("throws a SnapshotSeedError with every reason when the seed is rejected, and activates nothing", async () => {
    const { c } = make();
    const bad = seed();
    bad.pools = [];
    const err = await c.activeOrSeed(() => ({ candidate: bad, context: ctx })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SnapshotSeedError);
    expect((err as Error).name).toBe("SnapshotSeedError");
    expect((err as Error).message).toMatch(/^bundled backends\.yaml was rejected: .+: .+/);
    expect(c.active()).toBeUndefined();
    expect(c.history().events[0]).toMatchObject({ kind: "rejected", source: "seed" });
  });

  it("has nothing to roll back to before a second revision", async () => {
    const { c } = make();
    await c.propose(seed(), ctx, "seed");
    expect(c.rollback(undefined, "admin").status).toBe("not_found");
  });
});
