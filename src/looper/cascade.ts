import type { CascadeConfig } from "../config/algorithm-schema.ts";
import type { LooperRecord } from "../context/request-record.ts";
import { textOf } from "../protocol/content-parts.ts";
import type { NeutralRequest, NeutralResponse } from "../protocol/neutral.ts";
import type { BoundedSteps, StepRequest } from "./bounded-steps.ts";
import { recordedStep } from "./recorded-step.ts";
import { avgLogprob, fillPrompt, logprobMargin, verifierScore } from "./scores.ts";

/** Alternatives asked for per token when a cascade scores by margin (the best one is all it reads). */
const MARGIN_ALTERNATIVES = 2;

/** A verifier answers one small JSON object: its output cap keeps its worst case small. */
const VERIFIER_MAX_TOKENS = 64;

/** The answer an algorithm settled on, and the tier that gave it. */
export interface LooperAnswer {
  readonly response: NeutralResponse;
  readonly accepted: string;
}

const tierName = (tier: readonly string[]) => tier.join("+");

/**
 * A cascade over the decision's tiers, cheapest first: each step's answer is scored and accepted at
 * the threshold, else the next tier is asked; the last step's answer is accepted as it is. A step
 * that fails ends the run with its error (a later, dearer tier is not a fallback for a refusal such
 * as a spent budget). Every call goes through `steps`, which holds the run to its bounds.
 */
export async function runCascade(config: CascadeConfig, tiers: readonly (readonly string[])[], request: Omit<NeutralRequest, "model" | "stream" | "streamUsage">, steps: BoundedSteps, record: LooperRecord): Promise<LooperAnswer> {
  const logprobs = config.score === "avg_logprob" ? 0 : config.score === "margin" ? MARGIN_ALTERNATIVES : undefined;
  const question = request.messages.filter((m) => m.role === "user").map((m) => textOf(m.content)).at(-1) ?? "";
  for (let i = 0; i < tiers.length; i++) {
    const tier = tiers[i]!;
    const last = i === tiers.length - 1;
    const step: StepRequest = { tier, request: logprobs === undefined ? request : { ...request, logprobs } };
    const { result, call } = await recordedStep(steps, record, step, { model: tierName(tier), role: "candidate" });
    if (!result.ok) throw result.error;
    // The last step is accepted as it is: there is nothing dearer to ask, so it is not scored.
    if (!last) call.score = await score(config, result.response, question, steps, record);
    if (last || (call.score !== undefined && call.score >= config.threshold)) {
      call.accepted = true;
      record.accepted = call.model;
      record.steps = steps.calls;
      return { response: result.response, accepted: call.model };
    }
  }
  throw new Error("unreachable: a cascade has at least one tier and accepts its last");
}

/** A step's confidence: from its log-probabilities, or the verifier's JSON score (a verifier call is a step too). */
async function score(config: CascadeConfig, response: NeutralResponse, question: string, steps: BoundedSteps, record: LooperRecord): Promise<number | undefined> {
  switch (config.score) {
    case "avg_logprob":
      return avgLogprob(response.logprobs);
    case "margin":
      return logprobMargin(response.logprobs);
    case "verify": {
      const verifier = config.verifier!;
      const prompt = fillPrompt(verifier.prompt, { question, answer: response.text });
      const { result, call } = await recordedStep(steps, record, { tier: [verifier.model], request: { messages: [{ role: "user", content: [{ type: "text", text: prompt }] }], maxOutputTokens: VERIFIER_MAX_TOKENS } }, { model: verifier.model, role: "verifier" });
      call.score = result.ok ? verifierScore(result.response.text) : undefined;
      return call.score;
    }
  }
}
