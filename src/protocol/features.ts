import type { NeutralRequest } from "./neutral.ts";

/**
 * Request features some wire protocol cannot carry. A backend codec declares which it carries;
 * a request using one it does not is refused with a 400 naming the client's own field, unless
 * the logical model revision lists the feature under `downgrades` (then it is removed, and the
 * response says so). docs/protocols.md has the table.
 */
export const REQUEST_FEATURES = [
  "top_k",
  "reasoning_effort",
  "reasoning_budget",
  "json_object",
  "json_schema",
  "seed",
  "presence_penalty",
  "frequency_penalty",
  "temperature_above_1",
  "parallel_tool_calls",
  "metadata",
  "tool_result_error",
  "stop_sequences",
  "verbosity",
  "openai_service_tier",
  "anthropic_service_tier",
  "speed",
  "inference_geo",
] as const;
export type RequestFeature = (typeof REQUEST_FEATURES)[number];

/** Features this request uses (only the ones some protocol may lack). */
export function requestFeatures(req: NeutralRequest): RequestFeature[] {
  const out: RequestFeature[] = [];
  if (req.topK !== undefined) out.push("top_k");
  if (req.reasoningEffort !== undefined) out.push("reasoning_effort");
  if (req.reasoningBudgetTokens !== undefined) out.push("reasoning_budget");
  if (req.responseFormat?.type === "json_object") out.push("json_object");
  if (req.responseFormat?.type === "json_schema") out.push("json_schema");
  if (req.seed !== undefined) out.push("seed");
  if (req.presencePenalty !== undefined) out.push("presence_penalty");
  if (req.frequencyPenalty !== undefined) out.push("frequency_penalty");
  if (req.temperature !== undefined && req.temperature > 1) out.push("temperature_above_1");
  if (req.parallelToolCalls !== undefined) out.push("parallel_tool_calls");
  if (req.metadata !== undefined && Object.keys(req.metadata).length > 0) out.push("metadata");
  if (req.messages.some((m) => m.role === "tool" && m.isError === true)) out.push("tool_result_error");
  if (req.stop !== undefined && req.stop.length > 0) out.push("stop_sequences");
  if (req.verbosity !== undefined) out.push("verbosity");
  if (req.openAiServiceTier !== undefined) out.push("openai_service_tier");
  if (req.anthropicServiceTier !== undefined) out.push("anthropic_service_tier");
  if (req.speed !== undefined) out.push("speed");
  if (req.inferenceGeo !== undefined) out.push("inference_geo");
  return out;
}

/** The request without the given features: what an explicit downgrade sends upstream. */
export function withoutFeatures(req: NeutralRequest, drop: ReadonlySet<RequestFeature>): NeutralRequest {
  if (drop.size === 0) return req;
  const r: { -readonly [K in keyof NeutralRequest]: NeutralRequest[K] } = { ...req };
  if (drop.has("top_k")) r.topK = undefined;
  if (drop.has("reasoning_effort")) r.reasoningEffort = undefined;
  if (drop.has("reasoning_budget")) {
    // The display setting only qualifies thinking the budget turned on.
    r.reasoningBudgetTokens = undefined;
    r.reasoningDisplay = undefined;
  }
  if (drop.has("json_object") && r.responseFormat?.type === "json_object") r.responseFormat = undefined;
  if (drop.has("json_schema") && r.responseFormat?.type === "json_schema") r.responseFormat = undefined;
  if (drop.has("seed")) r.seed = undefined;
  if (drop.has("presence_penalty")) r.presencePenalty = undefined;
  if (drop.has("frequency_penalty")) r.frequencyPenalty = undefined;
  if (drop.has("temperature_above_1") && r.temperature !== undefined && r.temperature > 1) r.temperature = 1;
  if (drop.has("parallel_tool_calls")) r.parallelToolCalls = undefined;
  if (drop.has("metadata")) r.metadata = undefined;
  if (drop.has("stop_sequences")) r.stop = undefined;
  if (drop.has("verbosity")) r.verbosity = undefined;
  if (drop.has("openai_service_tier")) r.openAiServiceTier = undefined;
  if (drop.has("anthropic_service_tier")) r.anthropicServiceTier = undefined;
  if (drop.has("speed")) r.speed = undefined;
  if (drop.has("inference_geo")) r.inferenceGeo = undefined;
  if (drop.has("tool_result_error")) {
    r.messages = r.messages.map((m) => (m.role === "tool" && m.isError ? { ...m, isError: undefined } : m));
  }
  return r;
}
