import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { taskBindingClient, type TaskBindingRpc } from "../../../src/tasks/task-binding-client.ts";
import { bindTask, checkClaim, MemoryTaskBindingStore, taskClaim } from "../../../src/tasks/task-binding.ts";

const claim = (taskId: string, tenant: string, project: string) => ({ taskId, tenant, project });

describe("task binding", () => {
  it("binds a task id to its first user and never changes it", () => {
    const store = new MemoryTaskBindingStore();
    expect(bindTask(store, claim("t1", "acme", "ml/search"), 10)).toEqual({ taskId: "t1", tenant: "acme", project: "ml/search", boundAt: 10 });
    expect(bindTask(store, claim("t1", "evil", "x/y"), 20)).toEqual({ taskId: "t1", tenant: "acme", project: "ml/search", boundAt: 10 });
    expect(store.get("t1")?.tenant).toBe("acme");
  });

  it("refuses another tenant always, another project unless the tenant shares tasks", () => {
    const b = { taskId: "t1", tenant: "acme", project: "ml/search", boundAt: 0 };
    expect(checkClaim(b, claim("t1", "acme", "ml/search"), "project")).toBeUndefined();
    expect(checkClaim(b, claim("t1", "other", "ml/search"), "project")).toBe("other_tenant");
    expect(checkClaim(b, claim("t1", "other", "ml/search"), "tenant")).toBe("other_tenant");
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

  it("caches a confirmed binding: a task's later uses cost no round trip", async () => {
    let calls = 0;
    const store = new MemoryTaskBindingStore();
    const rpc: TaskBindingRpc = { bind: async (c) => (calls++, bindTask(store, c, 0)) };
    const client = taskBindingClient(() => rpc);
    await client.bind(claim("t1", "acme", "p"));
    expect(await client.bind(claim("t1", "evil", "q"))).toMatchObject({ tenant: "acme", project: "p" });
    expect(calls).toBe(1);
  });

  it("the Durable Object binds exactly one of many racing first uses, and keeps it", async () => {
    const tenants = Array.from({ length: 20 }, (_, i) => `tenant-${i}`);
    const answers = await Promise.all(tenants.map((t) => env.TASK_BINDING.getByName("race").bind(claim("race", t, "p"))));
    const winners = new Set(answers.map((a) => a.tenant));
    expect(winners.size).toBe(1);
    const [winner] = [...winners];
    expect(tenants).toContain(winner);
    expect(await env.TASK_BINDING.getByName("race").bind(claim("race", "late", "p"))).toMatchObject({ tenant: winner, project: "p" });
  });
});
