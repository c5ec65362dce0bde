import { env, runInDurableObject } from "cloudflare:test";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import publicationYaml from "../../../config/publication.yaml";
import { PublicationController as Controller, type ActivePublication } from "../../../src/publication-lifecycle/controller.ts";
import { SqlitePublicationStore } from "../../../durable-objects/sqlite-publication-store.ts";
import { FakeClock } from "../support/fixtures.ts";

describe("PublicationController over RPC", () => {
  it("seeds the bundled publication, publishes, rejects with every issue, and rolls back", async () => {
    const stub = env.PUBLICATION_CONTROLLER.getByName("rpc-test");
    const head = await stub.head();
    expect(head.revision).toBe(1);
    const candidate = parse(publicationYaml) as Record<string, any>;
    candidate.revision = "demo-2";
    candidate.tenants[0].apiKeys[1].entrypoints = ["*"];
    expect(await stub.publish(candidate, "test")).toMatchObject({ status: "activated", revision: 2, previous: 1 });
    const active = await stub.getActive();
    expect(active).toMatchObject({ revision: 2, label: "demo-2" });

    const bad = structuredClone(candidate);
    bad.tenants[0].apiKeys[1].entrypoints = ["nope"];
    bad.models[0].revisions[0].pool = "missing-pool";
    const rejected = await stub.publish(bad, "test");
    expect(rejected.status).toBe("rejected");
    if (rejected.status === "rejected") expect(rejected.issues.map((i) => i.path).sort()).toEqual(["models[0]", "tenants[0].apiKeys[1].entrypoints[0]"]);
    expect((await stub.head()).revision).toBe(2);

    expect(await stub.rollback(undefined, "test")).toMatchObject({ status: "activated", revision: 1, previous: 2 });
    const h = await stub.history(10);
    expect(h.active).toBe(1);
    expect(h.events.map((e) => e.kind)).toEqual(["rolled_back", "rejected", "activated", "seeded"]);
    // The stub's type cannot carry the `unknown` document across RPC.
    expect(((await stub.get(2)) as unknown as ActivePublication | undefined)?.label).toBe("demo-2");
  });

  it("publishes first thing: the bundled publication is still revision 1", async () => {
    const stub = env.PUBLICATION_CONTROLLER.getByName("publish-first");
    const candidate = parse(publicationYaml) as Record<string, any>;
    candidate.revision = "demo-3";
    expect(await stub.publish(candidate, "test")).toMatchObject({ status: "activated", revision: 2, previous: 1 });
  });

  it("runs a canary over RPC and keeps it in SQLite across a restart of the logic", async () => {
    const stub = env.PUBLICATION_CONTROLLER.getByName("canary-test");
    const candidate = parse(publicationYaml) as Record<string, any>;
    candidate.revision = "demo-canary";
    expect(await stub.publish(candidate, "test", { canary: 25 })).toMatchObject({ status: "canary", revision: 2, percent: 25, active: 1 });
    expect(await stub.head()).toMatchObject({ revision: 1, canary: { revision: 2, percent: 25 } });
    // A new controller over the same storage (what a restart of the object builds) reads the canary back.
    await runInDurableObject(stub, async (_instance, state) => {
      const restarted = new Controller(new SqlitePublicationStore(state.storage), new FakeClock());
      expect(restarted.history().canary).toMatchObject({ revision: 2, percent: 25 });
    });
    expect(await stub.promoteCanary("test")).toMatchObject({ status: "promoted", revision: 2, previous: 1 });
    expect(await stub.head()).toMatchObject({ revision: 2 });
    expect((await stub.head()).canary).toBeUndefined();
    expect(await stub.abortCanary("test")).toMatchObject({ status: "not_found" });
  });
});
