import type { LooperCall, LooperRecord } from "../context/request-record.ts";
import type { BoundedSteps, StepRequest, StepResult } from "./bounded-steps.ts";

/**
 * One step of a run, through the bounds, listed on the run's record as soon as its sub-call
 * begins (so a run that ends while it runs still lists it) and completed with its error when it
 * ends. A step a bound refused was never sent and is not listed.
 */
export async function recordedStep(
  steps: BoundedSteps,
  record: LooperRecord,
  step: StepRequest,
  entry: Pick<LooperCall, "model" | "role">,
  cancel?: AbortSignal,
): Promise<{ readonly result: StepResult; readonly call: LooperCall }> {
  let call: LooperCall | undefined;
  const result = await steps.call(step, cancel, (requestId) => {
    call = { requestId, model: entry.model, role: entry.role, accepted: false };
    record.calls.push(call);
    record.steps = steps.calls;
  });
  // A port that never reported its start still made the call: it is listed now.
  if (call === undefined) {
    call = { requestId: result.requestId, model: entry.model, role: entry.role, accepted: false };
    record.calls.push(call);
  }
  record.steps = steps.calls;
  if (!result.ok) call.errorCode = result.error.code;
  return { result, call };
}
