import { taskBindingName, type TaskBinding, type TaskClaim } from "./task-binding.ts";

/** A tenant's binding of one task id, as the TaskBinding Durable Object serves it (one object per tenant and task id). */
export interface TaskBindingRpc {
  /** The task's binding; the claim becomes it when the task id was never used. */
  bind(claim: TaskClaim): Promise<TaskBinding>;
}

/** What the reserve phase asks: the binding of a task id, made on first use. */
export interface TaskBindingClient {
  bind(claim: TaskClaim): Promise<TaskBinding>;
}

/** Bindings an isolate remembers; past it the oldest is forgotten (and asked again when used). */
const CACHE_SIZE = 10_000;

/**
 * A {@link TaskBindingClient} over per-tenant, per-task RPC objects (`objectFor` is e.g.
 * `(name) => env.TASK_BINDING.getByName(name)`, with the name from {@link taskBindingName}). A
 * binding never changes once made, so a confirmed one is cached for the isolate's life, under the
 * same tenant-and-task name: a task's later calls cost no round trip.
 */
export function taskBindingClient(objectFor: (name: string) => TaskBindingRpc): TaskBindingClient {
  const cache = new Map<string, TaskBinding>();
  return {
    async bind(claim) {
      const name = taskBindingName(claim.tenant, claim.taskId);
      const known = cache.get(name);
      if (known) return known;
      const binding = await objectFor(name).bind(claim);
      if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value!);
      cache.set(name, binding);
      return binding;
    },
  };
}
