import { DurableObject } from "cloudflare:workers";
import { systemClock, type Clock } from "../src/deps/clock.ts";
import type { TaskBindingRpc } from "../src/tasks/task-binding-client.ts";
import { bindTask, taskClaim, type TaskBinding as Binding, type TaskClaim } from "../src/tasks/task-binding.ts";
import { SqliteTaskBindingStore } from "./sqlite-task-binding-store.ts";

/**
 * TaskBinding: one instance per tenant and task id (`TASK_BINDING.getByName(taskBindingName(tenant,
 * taskId))`, src/tasks/task-binding.ts), so tenants never share one. A thin RPC shell over
 * bindTask (src/tasks/task-binding.ts), tested without this class. The read and the first write
 * run in one `transactionSync`, so of two first uses racing from any isolates exactly one binds.
 */
export class TaskBinding extends DurableObject<Env> implements TaskBindingRpc {
  readonly #store: SqliteTaskBindingStore;
  readonly #clock: Clock = systemClock;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#store = new SqliteTaskBindingStore(ctx.storage);
  }

  async bind(claim: TaskClaim): Promise<Binding> {
    // Checked before the transaction: an invalid claim touches no storage.
    const checked = taskClaim(claim);
    return this.#store.transaction(() => bindTask(this.#store, checked, this.#clock.now()));
  }
}
