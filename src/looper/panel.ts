import type { PanelConfig } from "../config/algorithm-schema.ts";
import type { LooperCall, LooperRecord } from "../context/request-record.ts";
import type { GatewayError } from "../errors/gateway-error.ts";
import { textOf } from "../protocol/content-parts.ts";
import type { NeutralMessage, NeutralRequest, NeutralResponse } from "../protocol/neutral.ts";
import type { BoundedSteps, StepResult } from "./bounded-steps.ts";
import type { LooperAnswer } from "./cascade.ts";
import { recordedStep } from "./recorded-step.ts";
import { fillPrompt } from "./scores.ts";

const tierName = (tier: readonly string[]) => tier.join("+");

/**
 * A panel over the decision's tiers: every tier is a member, asked the same request, at most
 * `maxParallel` at a time. As soon as `quorum` members answered, the members still running are
 * stopped (their sub-calls end as cancelled) and the arbiter is asked, with the published prompt,
 * to write the final answer from the quorum's answers. A member that fails is recorded and the
 * panel goes on without it; when too few are left to reach the quorum, the run fails with the
 * last member's error. Every call goes through `steps`, which holds the run to its bounds.
 */
export async function runPanel(config: PanelConfig, tiers: readonly (readonly string[])[], request: Omit<NeutralRequest, "model" | "stream" | "streamUsage">, steps: BoundedSteps, record: LooperRecord, maxParallel: number): Promise<LooperAnswer> {
  const answers: { readonly member: string; readonly response: NeutralResponse }[] = [];
  const stragglers = new AbortController();
  const running = new Set<Promise<void>>();
  let failed = 0;
  let lastError: GatewayError | undefined;
  let boundError: unknown;
  let next = 0;
  const member = async (tier: readonly string[]): Promise<void> => {
    let result: StepResult;
    let call: LooperCall;
    try {
      ({ result, call } = await recordedStep(steps, record, { tier, request }, { model: tierName(tier), role: "member" }, stragglers.signal));
    } catch (err) {
      // A bound refused the member (nothing was sent): the run fails with it once the others stop.
      boundError ??= err;
      stragglers.abort();
      return;
    }
    if (!result.ok) {
      failed++;
      lastError = result.error;
      return;
    }
    if (answers.length < config.quorum) {
      call.accepted = true;
      answers.push({ member: call.model, response: result.response });
      if (answers.length === config.quorum) stragglers.abort();
    }
  };
  // Members start as places free up, until the quorum is in or too few are left to reach it.
  while (answers.length < config.quorum && boundError === undefined) {
    const reachable = answers.length + running.size + (tiers.length - next) >= config.quorum;
    if (!reachable) break;
    if (next < tiers.length && running.size < maxParallel && !stragglers.signal.aborted) {
      const p: Promise<void> = member(tiers[next++]!).finally(() => running.delete(p));
      running.add(p);
      continue;
    }
    if (running.size === 0) break;
    await Promise.race(running);
  }
  // Stragglers are stopped and end before the arbiter starts: what they took is released first.
  stragglers.abort();
  await Promise.allSettled([...running]);
  if (boundError !== undefined) throw boundError;
  if (answers.length < config.quorum) {
    if (lastError !== undefined) throw lastError;
    throw new Error(`unreachable: a panel of ${tiers.length} without ${config.quorum} answers and no error (${failed} failed)`);
  }
  const question = request.messages.filter((m) => m.role === "user").map((m) => textOf(m.content)).at(-1) ?? "";
  const listed = answers.map((a, i) => `Answer ${i + 1}:\n${a.response.text}`).join("\n\n");
  // The arbiter keeps the request's instructions; the conversation it judges is in its prompt.
  const system = request.messages.filter((m): m is NeutralMessage => m.role === "system" || m.role === "developer");
  const prompt = fillPrompt(config.arbiter.prompt.replaceAll("{{answers}}", listed), { question, answer: listed });
  const { result: arbiter, call } = await recordedStep(steps, record, { tier: [config.arbiter.model], request: { ...request, tools: undefined, toolChoice: undefined, messages: [...system, { role: "user", content: [{ type: "text", text: prompt }] }] } }, { model: config.arbiter.model, role: "arbiter" });
  if (!arbiter.ok) throw arbiter.error;
  call.accepted = true;
  record.accepted = config.arbiter.model;
  return { response: arbiter.response, accepted: config.arbiter.model };
}
