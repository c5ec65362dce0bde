import { noSettle } from "../support/executor-harness.ts";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/load-config.ts";
import { ConfigValidationError } from "../../../src/config/parse-file.ts";
import { RequestContext } from "../../../src/context/request-context.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { compilePublication } from "../../../src/publication/compile-publication.ts";
import { TASK_PERIOD_MS, taskScope } from "../../../src/publication/task-policy.ts";
import { governTask, parseTaskBudget, taskFigures } from "../../../src/reserve/task-scope.ts";
import { taskBindingClient } from "../../../src/tasks/task-binding-client.ts";
import { bindTask, MemoryTaskBindingStore } from "../../../src/tasks/task-binding.ts";
import { bundled, textsWith } from "../support/fixtures.ts";

/** The bundled publication with a second tenant, a second project, task caps and requirements. */
function publication() {
  const pub = bundled("publication");
  const demo = pub.tenants[0];
  demo.teams[0].projects[0].taskLimits = { money: { limit: 0.5, currency: "USD" } };
  demo.teams[0].projects.push({ id: "other" });
  demo.governance = { taskDefault: { tokens: { limit: 1000 } } };
  demo.apiKeys.push({ id: "other", sha256: "b".repeat(64), entrypoints: ["*"], chargeTo: "platform/other" });
  demo.apiKeys.push({ id: "strict", sha256: "c".repeat(64), entrypoints: ["*"], chargeTo: "platform/playground", requireAttribution: ["task", "endUser"] });
  pub.tenants.push({ id: "rival", limits: { money: { limit: 10, currency: "USD", period: "1d" } }, apiKeys: [{ id: "r", sha256: "d".repeat(64), entrypoints: ["*"] }] });
  return compilePublication(loadConfig(textsWith({ publication: pub })).publication);
}

function context(attribution?: { taskId?: string; parentTaskId?: string }) {
  const ctx = new RequestContext({
    requestId: "req_1",
    receivedAt: 0,
    clock: { now: () => 0 },
    scheduler: { schedule: () => () => {} },
    sink: { attemptFinished: () => {}, requestFinished: () => {} },
    waitUntil: () => {},
    settle: noSettle,
    onUndoError: (err) => {
      throw err;
    },
  });
  ctx.record.attribution = attribution;
  return ctx;
}

/** A key's principal as authentication makes it: with the key's configured chargeTo. */
const keyOf = (p: ReturnType<typeof publication>, keyId: string) => [...p.keys.values()].find((k) => k.principal.keyId === keyId)!.principal;

const codeOf = async (p: Promise<unknown>) => p.then(() => "ok", (e: unknown) => (e instanceof GatewayError ? e.code : String(e)));

describe("task scope and attribution", () => {
  const pub = publication();
  const none = new Map<string, string>();
  const tasks = () => {
    const store = new MemoryTaskBindingStore();
    return taskBindingClient(() => ({ bind: async (c) => bindTask(store, c, 0) }));
  };

  it("puts the task under its project's cap, and the tenant default where the project sets none", async () => {
    const t = tasks();
    const scope = await governTask(t, pub, context({ taskId: "job-1" }), keyOf(pub, "demo"), none, "sluice-chat", undefined);
    expect(scope).toEqual({ name: "task:job-1", limits: { money: { currency: "USD", limitMicros: 500_000, periodMs: TASK_PERIOD_MS } } });
    const other = await governTask(t, pub, context({ taskId: "job-2" }), keyOf(pub, "other"), none, undefined, undefined);
    expect(other).toEqual({ name: "task:job-2", limits: { tokens: { limit: 1000, windowMs: TASK_PERIOD_MS } } });
    expect(await governTask(t, pub, context(), keyOf(pub, "demo"), none, undefined, undefined)).toBeUndefined();
  });

  it("lowers the cap by x-sluice-task-budget, never raises it", async () => {
    expect(taskScope("j", { money: { currency: "USD", limitMicros: 500_000, periodMs: TASK_PERIOD_MS } }, 2_000_000, "USD").limits?.money?.limitMicros).toBe(500_000);
    expect(taskScope("j", { money: { currency: "USD", limitMicros: 500_000, periodMs: TASK_PERIOD_MS } }, 100_000, "USD").limits?.money?.limitMicros).toBe(100_000);
    expect(taskScope("j", undefined, 100_000, "EUR").limits).toEqual({ money: { currency: "EUR", limitMicros: 100_000, periodMs: TASK_PERIOD_MS } });
    expect(taskScope("j", undefined, undefined, "USD")).toEqual({ name: "task:j" });
    expect(parseTaskBudget("0.25")).toBe(250_000);
    expect(parseTaskBudget("3")).toBe(3_000_000);
    expect(parseTaskBudget("0.000001")).toBe(1);
    for (const bad of ["-1", "1e3", "0.1234567", "abc", ""]) expect(() => parseTaskBudget(bad)).toThrow(/x-sluice-task-budget/);
    const scope = await governTask(tasks(), pub, context({ taskId: "job-3" }), keyOf(pub, "demo"), none, undefined, "0.1");
    expect(scope?.limits?.money?.limitMicros).toBe(100_000);
  });

  it("refuses another project's task; another tenant using the same id gets its own task, with no refusal to learn from", async () => {
    const t = tasks();
    await governTask(t, pub, context({ taskId: "mine" }), keyOf(pub, "demo"), none, undefined, undefined);
    expect(await codeOf(governTask(t, pub, context({ taskId: "mine" }), keyOf(pub, "other"), none, undefined, undefined))).toBe("task_not_yours");
    // The rival tenant's "mine" and a child of it are the rival's own: answered as for any new id.
    expect(await governTask(t, pub, context({ taskId: "mine" }), keyOf(pub, "r"), none, undefined, undefined)).toEqual(await governTask(t, pub, context({ taskId: "fresh" }), keyOf(pub, "r"), none, undefined, undefined).then((s) => s && { ...s, name: "task:mine" }));
    expect(await codeOf(governTask(t, pub, context({ taskId: "theirs-child", parentTaskId: "mine" }), keyOf(pub, "r"), none, undefined, undefined))).toBe("ok");
    // Claiming the id first does not take it from the tenant that uses it next.
    expect(await codeOf(governTask(t, pub, context({ taskId: "claimed-first" }), keyOf(pub, "r"), none, undefined, undefined))).toBe("ok");
    expect(await codeOf(governTask(t, pub, context({ taskId: "claimed-first" }), keyOf(pub, "demo"), none, undefined, undefined))).toBe("ok");
    expect(await codeOf(governTask(t, pub, context({ taskId: "claimed-first" }), keyOf(pub, "other"), none, undefined, undefined))).toBe("task_not_yours");
    // A child task may be charged to another project of the same tenant.
    expect(await codeOf(governTask(t, pub, context({ taskId: "child", parentTaskId: "mine" }), keyOf(pub, "other"), none, undefined, undefined))).toBe("ok");
  });

  it("shares a task across the tenant's projects when the tenant allows it", async () => {
    const cfg = bundled("publication");
    cfg.tenants[0].teams[0].projects.push({ id: "other" });
    cfg.tenants[0].governance = { taskSharing: "tenant" };
    cfg.tenants[0].apiKeys.push({ id: "other", sha256: "b".repeat(64), entrypoints: ["*"], chargeTo: "platform/other" });
    const shared = compilePublication(loadConfig(textsWith({ publication: cfg })).publication);
    const t = tasks();
    await governTask(t, shared, context({ taskId: "s" }), keyOf(shared, "demo"), none, undefined, undefined);
    expect(await codeOf(governTask(t, shared, context({ taskId: "s" }), keyOf(shared, "other"), none, undefined, undefined))).toBe("ok");
  });

  it("holds an OAuth token caller to its chargeTo exactly as a key of that project: cap, binding, and no requirements of its own", async () => {
    const t = tasks();
    const token = { tenantId: "demo", keyId: "corp:alice", chargeTo: "platform/playground" };
    // The project's cap, as for the demo key charged to the same project.
    expect(await governTask(t, pub, context({ taskId: "tok-1" }), token, none, undefined, undefined)).toEqual({ name: "task:tok-1", limits: { money: { currency: "USD", limitMicros: 500_000, periodMs: TASK_PERIOD_MS } } });
    // The same project's key may use the token's task; a token of another project may not.
    expect(await codeOf(governTask(t, pub, context({ taskId: "tok-1" }), keyOf(pub, "demo"), none, undefined, undefined))).toBe("ok");
    expect(await codeOf(governTask(t, pub, context({ taskId: "tok-1" }), { ...token, keyId: "corp:bob", chargeTo: "platform/other" }, none, undefined, undefined))).toBe("task_not_yours");
    // A token charged to no project binds its task to "no project", and takes the tenant default cap.
    expect(await governTask(t, pub, context({ taskId: "tok-2" }), { tenantId: "demo", keyId: "corp:carol" }, none, undefined, undefined)).toEqual({ name: "task:tok-2", limits: { tokens: { limit: 1000, windowMs: TASK_PERIOD_MS } } });
    expect(await codeOf(governTask(t, pub, context({ taskId: "tok-2" }), token, none, undefined, undefined))).toBe("task_not_yours");
    // A subject that happens to equal a strict key's id is not that key: it requires nothing.
    expect(await codeOf(governTask(t, pub, context(), { tenantId: "demo", keyId: "corp:strict" }, none, undefined, undefined))).toBe("ok");
  });

  it("refuses a request that leaves out required attribution", async () => {
    const strict = keyOf(pub, "strict");
    const user = new Map([["x-sluice-end-user", "u1"]]);
    expect(await codeOf(governTask(tasks(), pub, context(), strict, user, undefined, undefined))).toBe("attribution_required");
    expect(await codeOf(governTask(tasks(), pub, context({ taskId: "a" }), strict, none, undefined, undefined))).toBe("attribution_required");
    expect(await codeOf(governTask(tasks(), pub, context({ taskId: "a" }), strict, user, undefined, undefined))).toBe("ok");
  });

  it("refuses at load a key that requires an end user its tenant has no header for, and a task cap in another currency", () => {
    const cfg = bundled("publication");
    delete cfg.tenants[0].endUsers;
    cfg.tenants[0].apiKeys[0].requireAttribution = ["endUser"];
    cfg.tenants[0].teams[0].projects[0].taskLimits = { money: { limit: 1, currency: "EUR" } };
    let issues: string[] = [];
    try {
      loadConfig(textsWith({ publication: cfg }));
    } catch (err) {
      if (!(err instanceof ConfigValidationError)) throw err;
      issues = err.issues.map((i) => `${i.path}: ${i.message}`);
    }
    expect(issues.join("\n")).toMatch(/apiKeys\[0\]\.requireAttribution: tenant "demo" has no endUsers header/);
    expect(issues.join("\n")).toMatch(/one currency for every budget and price/);
  });

  it("reports the task's committed spend and remaining cap from a grant", () => {
    const scope = taskScope("j", { money: { currency: "USD", limitMicros: 500_000, periodMs: TASK_PERIOD_MS }, tokens: { limit: 1000, windowMs: TASK_PERIOD_MS } }, undefined, "USD");
    const figures = taskFigures(scope, [
      { scope: "tenant:demo", metric: "money:USD", remaining: 9 },
      { scope: "task:j", metric: "money:USD", remaining: 400_000 },
      { scope: "task:j", metric: "tokens", remaining: 250 },
    ]);
    expect(figures).toEqual([
      { metric: "money", currency: "USD", spent: 100_000, remaining: 400_000 },
      { metric: "tokens", spent: 750, remaining: 250 },
    ]);
    expect(taskFigures({ name: "task:j" }, [])).toBeUndefined();
  });
});
