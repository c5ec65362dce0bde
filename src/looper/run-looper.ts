import type { AlgorithmConfig } from "../config/algorithm-schema.ts";
import type { RequestContext } from "../context/request-context.ts";
import type { LooperRecord } from "../context/request-record.ts";
import type { DispatchPlan } from "../decide/dispatch-plan.ts";
import type { Scheduler } from "../deps/scheduler.ts";
import type { NeutralRequest, NeutralResponse } from "../protocol/neutral.ts";
import type { CompiledPublication } from "../publication/compile-publication.ts";
import type { Price } from "../publication/prices.ts";
import { BoundedSteps, type StepPort } from "./bounded-steps.ts";
import { runCascade } from "./cascade.ts";
import { runPanel } from "./panel.ts";

/** What a model request's invoke phase hands a Looper run. */
export interface LooperDeps {
  readonly ctx: RequestContext;
  readonly publication: CompiledPublication;
  readonly scheduler: Scheduler;
  /** The request's sub-calls (its session's ModelExecutor). */
  readonly steps: StepPort;
}

/** A finished run: the accepted answer and the header that summarizes it. */
export interface LooperOutcome {
  readonly response: NeutralResponse;
  /** `x-sluice-looper`: `cascade; steps=2; accepted=<tier>`. */
  readonly header: string;
}

/** The `x-sluice-looper` value for a run: the algorithm, the sub-calls made, the tier accepted (if any). */
export function looperHeader(r: LooperRecord): string {
  return `${r.algorithm}; steps=${r.steps}${r.accepted === undefined ? "" : `; accepted=${r.accepted}`}${r.bound === undefined ? "" : `; bound=${r.bound}`}`;
}

/** How many requests up the parent chain this one is (a client's request: 1). */
function depthOf(ctx: RequestContext): number {
  let depth = 1;
  for (let p = ctx.parent; p !== undefined; p = p.parent) depth++;
  return depth;
}

/**
 * Runs a decision's algorithm for a request, in its invoke phase: the engine binds the run to its
 * bounds ({@link BoundedSteps}) and records it on the request (`looper` on the access line and
 * the call ledger), then hands the algorithm only the bounded way to call. The answer is an
 * ordinary buffered response, encoded for the client by the respond phase like any other.
 *
 * @throws GatewayError looper_bound_exceeded naming the bound; a step's own error when it failed.
 */
export async function runLooper(algorithm: AlgorithmConfig, plan: DispatchPlan, request: NeutralRequest, deps: LooperDeps): Promise<LooperOutcome> {
  const record: LooperRecord = { algorithm: algorithm.kind, steps: 0, accepted: undefined, calls: [] };
  deps.ctx.record.looper = record;
  const publication = deps.publication;
  const price = (tier: readonly string[]): Price | undefined => {
    let dearest: Price | undefined;
    for (const id of tier) {
      const m = publication.models.get(id);
      const p = m === undefined ? undefined : publication.budgets.price(id, m.revision);
      if (p !== undefined && (dearest === undefined || p.output + p.input > dearest.output + dearest.input)) dearest = p;
    }
    return dearest;
  };
  // Every step runs the decision's per-model-call plugins; an algorithm can neither skip nor add one.
  const perModelCall = algorithm.perModelCall;
  const port: StepPort = perModelCall.length === 0 ? deps.steps : (step, signal, started) => deps.steps({ ...step, plugins: perModelCall }, signal, started);
  const steps = new BoundedSteps(algorithm.bounds, { now: () => deps.ctx.clock.now(), scheduler: deps.scheduler, price, depth: depthOf(deps.ctx) }, port);
  const { model: _model, stream: _stream, streamUsage: _streamUsage, ...asked } = request;
  const tiers = plan.tiers.map((t) => t.map((m) => m.logicalModel));
  try {
    switch (algorithm.kind) {
      case "cascade": {
        const answer = await runCascade(algorithm, tiers, asked, steps, record);
        return { response: answer.response, header: looperHeader(record) };
      }
      case "panel": {
        const answer = await runPanel(algorithm, tiers, asked, steps, record, algorithm.bounds.maxParallel);
        return { response: answer.response, header: looperHeader(record) };
      }
    }
  } finally {
    record.steps = steps.calls;
    record.bound = steps.exceeded;
  }
}
