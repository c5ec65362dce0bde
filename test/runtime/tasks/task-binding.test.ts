import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { taskBindingClient, type TaskBindingRpc } from "../../../src/tasks/task-binding-client.ts";
import { bindTask, checkClaim, MemoryTaskBindingStore, taskBindingName, taskClaim } from "../../../src/tasks/task-binding.ts";

const claim = (taskId: string, tenant: string, project: string) => ({ taskId, tenant, project });

describe("task binding", () => {
  it("binds a task id to its tenant's first user and never changes it; another tenant's same id is its own task", () => {
    const store = new MemoryTaskBindingStore();
    expect(bindTask(store, claim("t1", "acme", "ml/search"), 10)).toEqual({ taskId: "t1", tenant: "acme", project: "ml/search", boundAt: 10 });
    expect(bindTask(store, claim("t1", "acme", "x/y"), 20)).toEqual({ taskId: "t1", tenant: "acme", project: "ml/search", boundAt: 10 });
    expect(bindTask(store, claim("t1", "evil", "x/y"), 30)).toEqual({ taskId: "t1", tenant: "evil", project: "x/y", boundAt: 30 });
    expect(store.get("acme", "t1")?.project).toBe("ml/search");
    expect(store.get("evil", "t1")?.project).toBe("x/y");
  });

  it("names each tenant's binding of an id apart, whatever the strings hold", () => {
    expect(taskBindingName("a", "b/c")).not.toBe(taskBindingName("a/b", "c"));
    expect(taskBindingName("a", "b\",c")).not.toBe(taskBindingName("a\",\"b", "c"));
  });

  it("refuses another project unless the tenant shares tasks; a binding of another tenant is a broken store, never a refusal", () => {
    const b = { taskId: "t1", tenant: "acme", project: "ml/search", boundAt: 0 };
    expect(checkClaim(b, claim("t1", "acme", "ml/search"), "project")).toBeUndefined();
    expect(() => checkClaim(b, claim("t1", "other", "ml/search"), "project")).toThrow(/another tenant/);
    expect(() => checkClaim(b, claim("t2", "acme", "ml/search"), "tenant")).toThrow(/another tenant/);
    expect(checkClaim(b, claim("t1", "acme", "ml/ads"), "project")).toBe("other_project");
    expect(checkClaim(b, claim("t1", "acme", ""), "project")).toBe("other_project");
    expect(checkClaim(b, claim("t1", "acme", "ml/ads"), "tenant")).toBeUndefined();
  });

  it("takes a claim from RPC only as three strings, copied without anything else the caller sent", () => {
    expect(taskClaim({ ...claim("t1", "acme", "p"), extra: 1 } as ReturnType<typeof claim>)).toEqual(claim("t1", "acme", "p"));
    for (const bad of [undefined, null, { taskId: "t1", tenant: "acme" }, { taskId: 1, tenant: "acme", project: "p" }, { taskId: "t1", tenant: "acme", project: null }]) {
      expect(() => taskClaim(bad as unknown as ReturnType<typeof claim>)).toThrow(new RangeError("claim must be { taskId, tenant, project } strings"));
    }
  });

  it("caches a confirmed binding per tenant: a task's later uses cost no round trip, another tenant's id its own", async () => {
    const names: string[] = [];
    const store = new MemoryTaskBindingStore();
    const client = taskBindingClient((name): TaskBindingRpc => ({ bind: async (c) => (names.push(name), bindTask(store, c, 0)) }));
    await client.bind(claim("t1", "acme", "p"));
    expect(await client.bind(claim("t1", "acme", "q"))).toMatchObject({ tenant: "acme", project: "p" });
    expect(await client.bind(claim("t1", "evil", "q"))).toMatchObject({ tenant: "evil", project: "q" });
    expect(names).toEqual([taskBindingName("acme", "t1"), taskBindingName("evil", "t1")]);
  });

  it("the Durable Object binds exactly one of many racing first uses of a tenant, and keeps it", async () => {
    const projects = Array.from({ length: 20 }, (_, i) => `team/p${i}`);
    const object = () => env.TASK_BINDING.getByName(taskBindingName("acme", "race"));
    const answers = await Promise.all(projects.map((p) => object().bind(claim("race", "acme", p))));
    const winners = new Set(answers.map((a) => a.project));
    expect(winners.size).toBe(1);
    const [winner] = [...winners];
    expect(projects).toContain(winner);
    expect(await object().bind(claim("race", "acme", "team/late"))).toMatchObject({ tenant: "acme", project: winner });
    // Even sent to the same object, another tenant's claim never reads acme's binding.
    expect(await object().bind(claim("race", "rival", "team/x"))).toMatchObject({ tenant: "rival", project: "team/x" });
  });
});
