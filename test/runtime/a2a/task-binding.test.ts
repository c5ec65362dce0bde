import { describe, expect, it } from "vitest";
import { A2aIdBinding, isBoundId } from "../../../src/a2a/task-binding.ts";
import { decodeA2aRequest } from "../../../src/protocol/a2a/a2a-request.ts";
import { mapIds, requestIdSlots, resultIdSlots } from "../../../src/protocol/a2a/id-slots.ts";

const SECRET = "a2a-state-secret-for-unit-tests-0123";
const alice = { tenant: "acme", key: "alice", agent: "echo" };

describe("A2A task ids bound to the caller", () => {
  it("binds deterministically and opens only for the same caller and agent", async () => {
    const binding = await A2aIdBinding.fromSecret(SECRET);
    const ids = binding.forOwner(alice);
    const bound = await ids.bind("task", "task-42");
    expect(bound).toMatch(/^at1\./);
    expect(bound).not.toBe("task-42");
    // Deterministic across requests: a stream's events and a later GetTask name one id.
    expect(await binding.forOwner(alice).bind("task", "task-42")).toBe(bound);
    expect(await binding.forOwner(alice).open("task", bound)).toBe("task-42");
    for (const other of [{ ...alice, key: "bob" }, { ...alice, tenant: "globex" }, { ...alice, agent: "other" }]) {
      expect(await binding.forOwner(other).open("task", bound)).toBeUndefined();
    }
    // Another gateway's secret does not open it either.
    expect(await (await A2aIdBinding.fromSecret(`${SECRET}-rotated`)).forOwner(alice).open("task", bound)).toBeUndefined();
  });

  it("refuses raw, forged, tampered and malformed ids", async () => {
    const ids = (await A2aIdBinding.fromSecret(SECRET)).forOwner(alice);
    const bound = await ids.bind("task", "task-42");
    const [, idPart, tag] = bound.split(".");
    const forgedId = `at1.${btoa("task-43").replace(/=+$/, "")}.${tag}`;
    const flipped = `at1.${idPart}.${tag!.slice(0, -1)}${tag!.endsWith("A") ? "B" : "A"}`;
    for (const presented of ["task-42", forgedId, flipped, "at1.", "at1.x", `at1.${idPart}`, `at2.${idPart}.${tag}`, `at1.${idPart}.${tag}.x`, "at1.%%%.%%%", `at1.${"A".repeat(5000)}.${tag}`]) {
      expect(await ids.open("task", presented), presented).toBeUndefined();
    }
  });

  it("keeps any agent id intact, non-ASCII and a leading BOM included", async () => {
    const ids = (await A2aIdBinding.fromSecret(SECRET)).forOwner(alice);
    for (const id of ["\uFEFFbom", "タスク-1", "a.b.c", "x".repeat(256)]) {
      expect(await ids.open("task", await ids.bind("task", id))).toBe(id);
    }
  });

  it("keeps task and context ids apart, and puts a caller's own context ids in its namespace", async () => {
    const binding = await A2aIdBinding.fromSecret(SECRET);
    const ids = binding.forOwner(alice);
    const context = await ids.bind("context", "ctx-1");
    expect(context).toMatch(/^ac1\./);
    expect(isBoundId("context", context)).toBe(true);
    expect(isBoundId("context", "my-own")).toBe(false);
    expect(await ids.open("context", context)).toBe("ctx-1");
    // A task's id is not a context's, and the other way round.
    expect(await ids.open("task", context)).toBeUndefined();
    expect(await ids.open("context", `ac1.${context.slice(4)}`)).toBe("ctx-1");
    expect(await ids.open("context", `ac1.${(await ids.bind("task", "ctx-1")).slice(4)}`)).toBeUndefined();
    // Two callers choosing the same context id reach two contexts at the agent; one caller always the same.
    const mine = await ids.ownContext("shared");
    expect(mine).toMatch(/-shared$/);
    expect(await binding.forOwner(alice).ownContext("shared")).toBe(mine);
    expect(await binding.forOwner({ ...alice, key: "bob" }).ownContext("shared")).not.toBe(mine);
  });

  it("refuses a short secret", async () => {
    await expect(A2aIdBinding.fromSecret("short")).rejects.toThrow(RangeError);
  });
});

describe("where task ids sit", () => {
  const swap = async (result: unknown) => {
    await mapIds(resultIdSlots(result), async (kind, id) => (kind === "task" ? `<${id}>` : `{${id}}`));
    return result;
  };

  it("maps 1.0 answers: wrapped task, message, updates, task lists, push configs; never parts or artifacts", async () => {
    const task = {
      id: "t1",
      contextId: "c1",
      status: { state: "TASK_STATE_WORKING", message: { messageId: "m0", role: "ROLE_AGENT", taskId: "t1", parts: [] } },
      history: [{ messageId: "m1", role: "ROLE_USER", taskId: "t1", referenceTaskIds: ["t0"], parts: [{ data: { taskId: "user-data" } }] }],
      artifacts: [{ artifactId: "a1", parts: [{ data: { id: "keep", taskId: "keep" } }] }],
    };
    const out = (await swap({ task })) as { task: typeof task };
    expect(out.task.id).toBe("<t1>");
    expect(out.task.status.message.taskId).toBe("<t1>");
    expect(out.task.history[0]!.taskId).toBe("<t1>");
    expect(out.task.history[0]!.referenceTaskIds).toEqual(["<t0>"]);
    expect(out.task.history[0]!.parts[0]).toEqual({ data: { taskId: "user-data" } });
    expect(out.task.artifacts[0]!.parts[0]).toEqual({ data: { id: "keep", taskId: "keep" } });
    expect(out.task.contextId).toBe("{c1}");
    expect(await swap({ statusUpdate: { taskId: "t1", contextId: "c1", status: { state: "TASK_STATE_COMPLETED" } } })).toEqual({ statusUpdate: { taskId: "<t1>", contextId: "{c1}", status: { state: "TASK_STATE_COMPLETED" } } });
    expect(await swap({ artifactUpdate: { taskId: "t1", artifact: { artifactId: "a" } } })).toEqual({ artifactUpdate: { taskId: "<t1>", artifact: { artifactId: "a" } } });
    expect(await swap({ message: { messageId: "m", taskId: "t9" } })).toEqual({ message: { messageId: "m", taskId: "<t9>" } });
    expect(await swap({ tasks: [{ id: "a", status: {} }, { id: "b", status: {} }], nextPageToken: "" })).toEqual({ tasks: [{ id: "<a>", status: {} }, { id: "<b>", status: {} }], nextPageToken: "" });
    // A flat 1.0 push config: its own `id` is the config's, not a task's.
    expect(await swap({ taskId: "t1", id: "cfg", url: "https://hooks.example/" })).toEqual({ taskId: "<t1>", id: "cfg", url: "https://hooks.example/" });
    expect(await swap({ configs: [{ taskId: "t1", id: "cfg" }] })).toEqual({ configs: [{ taskId: "<t1>", id: "cfg" }] });
  });

  it("maps 0.3 answers: bare objects with a kind, and config lists", async () => {
    expect(await swap({ kind: "task", id: "t1", contextId: "c", status: { state: "working" } })).toMatchObject({ id: "<t1>", contextId: "{c}" });
    expect(await swap({ kind: "status-update", taskId: "t1", status: { state: "completed" }, final: true })).toMatchObject({ taskId: "<t1>" });
    expect(await swap({ kind: "artifact-update", taskId: "t1", artifact: { artifactId: "a", parts: [] } })).toMatchObject({ taskId: "<t1>" });
    expect(await swap({ kind: "message", messageId: "m", role: "agent", parts: [] })).toEqual({ kind: "message", messageId: "m", role: "agent", parts: [] });
    expect(await swap([{ taskId: "t1", pushNotificationConfig: { id: "cfg", url: "https://x.example/" } }])).toEqual([{ taskId: "<t1>", pushNotificationConfig: { id: "cfg", url: "https://x.example/" } }]);
    expect(await swap(null)).toBeNull();
  });

  it("finds the ids a request names, in either generation", () => {
    const slots = (generation: "1.0" | "0.3", method: string, params: unknown) => requestIdSlots(decodeA2aRequest({ jsonrpc: "2.0", id: 1, method, params }, generation)).map((s) => [s.kind, s.id, s.param]);
    expect(slots("1.0", "GetTask", { id: "T" })).toEqual([["task", "T", "params.id"]]);
    expect(slots("0.3", "tasks/cancel", { id: "T" })).toEqual([["task", "T", "params.id"]]);
    expect(slots("1.0", "ListTasks", { contextId: "C" })).toEqual([["context", "C", "params.contextId"]]);
    expect(slots("1.0", "SendMessage", { message: { messageId: "m", role: "ROLE_USER", parts: [], taskId: "T", contextId: "C", referenceTaskIds: ["R"] } })).toEqual([
      ["task", "T", "params.message.taskId"],
      ["context", "C", "params.message.contextId"],
      ["task", "R", "params.message.referenceTaskIds[0]"],
    ]);
    expect(slots("0.3", "message/send", { message: { messageId: "m", role: "user", parts: [], kind: "message" } })).toEqual([]);
  });
});
