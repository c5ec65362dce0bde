import type { Subject } from "../signals/subject.ts";
import type { ImmediateAnswer, RequestSafeInput, RequestSafePlugin } from "./plugin.ts";

/**
 * Runs the `request_safe` plugins in their order, each on what the one before handed on, and
 * returns the subject to send (the same object when nothing changed), or the answer a plugin gave
 * (the plugins after it do not run). A refusal is the plugin's own throw, passed on as it is.
 *
 * @throws Error when a plugin hands back a subject of another kind (a model request for a tool
 *   call): that is the plugin's bug, and the request fails as the gateway's fault.
 */
export async function applyRequestSafe(plugins: readonly RequestSafePlugin[], input: RequestSafeInput): Promise<Subject | ImmediateAnswer> {
  let subject = input.subject;
  for (const p of plugins) {
    const changed = await p.apply({ ...input, subject });
    if (changed === undefined) continue;
    if (changed.kind === "answer") {
      if (subject.kind !== "model") throw new Error(`plugin ${p.name} answered a ${subject.kind} request`);
      return changed;
    }
    if (changed.kind !== subject.kind) throw new Error(`plugin ${p.name} changed a ${subject.kind} request into a ${changed.kind} one`);
    subject = changed;
  }
  return subject;
}
