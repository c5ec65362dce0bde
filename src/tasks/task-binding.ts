/**
 * Task ids are names a caller picks, and each tenant has its own: the same id used by two tenants
 * is two tasks, so another tenant's id tells a caller nothing (no refusal reveals it exists) and
 * cannot be claimed ahead of it. Within a tenant the first use of an id binds it to the project
 * (the key's `chargeTo` project) that used it. A binding never changes; later uses are checked
 * against it, so no project can shift cost into, or read spend of, another project's task.
 *
 * Pure logic over a synchronous store: the TaskBinding Durable Object (one per tenant and task id,
 * named by {@link taskBindingName}) runs {@link bindTask} inside one `transactionSync`, which makes
 * "first use wins" atomic across isolates.
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

/** Where bindings live, keyed by tenant and task id; calls come from inside one transaction. */
export interface TaskBindingStore {
  get(tenant: string, taskId: string): TaskBinding | undefined;
  put(binding: TaskBinding): void;
}

/**
 * The name of the object that holds a tenant's binding of a task id. Unambiguous whatever either
 * string holds, so no task id of one tenant names another tenant's object.
 */
export const taskBindingName = (tenant: string, taskId: string): string => JSON.stringify([tenant, taskId]);

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

/** The stored binding of the claim's task id in its tenant, storing the claim as the binding when there is none. */
export function bindTask(store: TaskBindingStore, claim: TaskClaim, now: number): TaskBinding {
  const existing = store.get(claim.tenant, claim.taskId);
  if (existing) return existing;
  const binding: TaskBinding = { taskId: claim.taskId, tenant: claim.tenant, project: claim.project, boundAt: now };
  store.put(binding);
  return binding;
}

/** Why a use of a bound task is refused; undefined when it may go ahead. */
export type TaskRefusal = "other_project";

/**
 * Checks a claim against its task's binding (of the claim's tenant) under the tenant's sharing
 * policy. A binding of another tenant is a store that broke its keying: thrown, never answered
 * as a refusal that would tell the caller the id exists elsewhere.
 */
export function checkClaim(binding: TaskBinding, claim: TaskClaim, sharing: TaskSharing): TaskRefusal | undefined {
  if (binding.tenant !== claim.tenant || binding.taskId !== claim.taskId) throw new Error("task binding store answered another tenant's or task's binding");
  if (sharing === "project" && binding.project !== claim.project) return "other_project";
  return undefined;
}

/** An in-memory {@link TaskBindingStore} (tests; single-isolate use). */
export class MemoryTaskBindingStore implements TaskBindingStore {
  readonly #rows = new Map<string, TaskBinding>();

  get(tenant: string, taskId: string): TaskBinding | undefined {
    return this.#rows.get(taskBindingName(tenant, taskId));
  }

  put(binding: TaskBinding): void {
    const key = taskBindingName(binding.tenant, binding.taskId);
    if (!this.#rows.has(key)) this.#rows.set(key, binding);
  }
}
