import type { TaskBinding, TaskClaim } from "./task-binding.ts";

/** One task id's binding, as the TaskBinding Durable Object serves it (one object per task id). */
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
 * A {@link TaskBindingClient} over per-task RPC objects (`objectFor` is e.g.
 * `(id) => env.TASK_BINDING.getByName(id)`). A binding never changes once made, so a confirmed one
 * is cached for the isolate's life: a task's later calls cost no round trip.
 */
export function taskBindingClient(objectFor: (taskId: string) => TaskBindingRpc): TaskBindingClient {
  const cache = new Map<string, TaskBinding>();
  return {
    async bind(claim) {
      const known = cache.get(claim.taskId);
      if (known) return known;
      const binding = await objectFor(claim.taskId).bind(claim);
      if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value!);
      cache.set(claim.taskId, binding);
      return binding;
    },
  };
}
