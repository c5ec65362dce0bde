/**
 * Task ids are names a caller picks, so the first use of one binds it: to the tenant and the
 * project (the key's `chargeTo` project) that used it. A binding never changes; later uses are
 * checked against it, so nobody can shift cost into, or read spend of, someone else's task.
 *
 * Pure logic over a synchronous store: the TaskBinding Durable Object (one per task id) runs
 * {@link bindTask} inside one `transactionSync`, which makes "first use wins" atomic across isolates.
 */

/** Who first used a task id. */
export interface TaskBinding {
  readonly taskId: string;
  readonly tenant: string;
  /** `team/project` of the first caller's key; "" for a key charged to no project. */
  readonly project: string;
  readonly boundAt: number;
}

/** What a use of a task id claims. */
export interface TaskClaim {
  readonly taskId: string;
  readonly tenant: string;
  readonly project: string;
}

/** Where bindings live; calls come from inside one transaction. */
export interface TaskBindingStore {
  get(taskId: string): TaskBinding | undefined;
  put(binding: TaskBinding): void;
}

/**
 * A claim as it arrives over RPC, checked and copied: exactly its three strings, whatever else the
 * caller sent. Throws a RangeError for anything else.
 */
export function taskClaim(value: TaskClaim): TaskClaim {
  if (typeof value?.taskId !== "string" || typeof value.tenant !== "string" || typeof value.project !== "string") throw new RangeError("claim must be { taskId, tenant, project } strings");
  return { taskId: value.taskId, tenant: value.tenant, project: value.project };
}

/** `project`: only the binding project's keys may use the task; `tenant`: any key of the tenant. */
export type TaskSharing = "project" | "tenant";

/** The stored binding of the claim's task id, storing the claim as the binding when there is none. */
export function bindTask(store: TaskBindingStore, claim: TaskClaim, now: number): TaskBinding {
  const existing = store.get(claim.taskId);
  if (existing) return existing;
  const binding: TaskBinding = { taskId: claim.taskId, tenant: claim.tenant, project: claim.project, boundAt: now };
  store.put(binding);
  return binding;
}

/** Why a use of a bound task is refused; undefined when it may go ahead. */
export type TaskRefusal = "other_tenant" | "other_project";

/** Checks a claim against its task's binding under the tenant's sharing policy. */
export function checkClaim(binding: TaskBinding, claim: TaskClaim, sharing: TaskSharing): TaskRefusal | undefined {
  if (binding.tenant !== claim.tenant) return "other_tenant";
  if (sharing === "project" && binding.project !== claim.project) return "other_project";
  return undefined;
}

/** An in-memory {@link TaskBindingStore} (tests; single-isolate use). */
export class MemoryTaskBindingStore implements TaskBindingStore {
  readonly #rows = new Map<string, TaskBinding>();

  get(taskId: string): TaskBinding | undefined {
    return this.#rows.get(taskId);
  }

  put(binding: TaskBinding): void {
    this.#rows.set(binding.taskId, binding);
  }
}
