import { echo } from "../../errors/echo.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import type { UpstreamOptions } from "../codec.ts";
import { invalidMessage, toolArgumentsObject } from "../invalid-request.ts";
import type { ContentPart, NeutralMessage, NeutralRequest } from "../neutral.ts";
import { signatureOfCallId } from "./tool-call-id.ts";

/*
 * Neutral request → the body of Gemini's `generateContent` / `streamGenerateContent` (the Gemini
 * API and Vertex AI take the same body; the model and the streaming switch are in the URL):
 * `systemInstruction`, `contents` (roles `user` and `model`; function results go in a `user` turn),
 * `tools[].functionDeclarations`, `toolConfig.functionCallingConfig` and `generationConfig`.
 */

type Part = Record<string, unknown>;
interface Content {
  role: "user" | "model";
  parts: Part[];
}

/**
 * Google's documented stand-in for a thought signature the history lost: Gemini 3 refuses a
 * replayed function call without one, and a call that did not come through this gateway (another
 * backend's, or a client's own) has none to give.
 */
export const SKIP_SIGNATURE = "skip_thought_signature_validator";

/** Gemini 3 models validate the signatures of replayed function calls; earlier ones ignore them. */
const validatesSignatures = (model: string): boolean => /^(?:.*\/)?gemini-3/.test(model);


function refuse(message: string, param?: string): GatewayError {
  return new GatewayError("invalid_request", message, param === undefined ? undefined : { param });
}

/**
 * An image → `inlineData`. Gemini reads image bytes sent inline; a URL would be a `fileData` part,
 * which takes only files uploaded to Google (or Cloud Storage on Vertex), never an arbitrary https
 * address, so such an image is refused rather than fetched by the gateway.
 */
function imagePart(url: string, index: number): Part {
  const data = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  if (!data) throw invalidMessage(index, "images must be base64 data URLs for this model's backend.");
  return { inlineData: { mimeType: data[1], data: data[2] } };
}

/** User content → parts: text and inline images; replayed reasoning has no place in a user turn. */
function userParts(parts: readonly ContentPart[], index: number): Part[] {
  const out: Part[] = [];
  for (const p of parts) {
    if (p.type === "text") {
      if (p.text !== "") out.push({ text: p.text });
    } else if (p.type === "image") out.push(imagePart(p.url, index));
  }
  return out;
}


/**
 * An assistant turn → a `model` content. Replayed reasoning text is left out: Gemini reads nothing
 * from earlier thoughts but their signatures, which travel on the calls (see tool-call-id.ts).
 */
function modelContent(m: Extract<NeutralMessage, { role: "assistant" }>, index: number, model: string): Content {
  const parts: Part[] = [];
  for (const p of m.content) {
    if (p.type === "text") {
      if (p.text !== "") parts.push({ text: p.text });
    } else if (p.type === "image") throw invalidMessage(index, "images are only allowed in user messages.");
  }
  for (const c of m.toolCalls ?? []) {
    const part: Part = { functionCall: { name: c.name, args: toolArgumentsObject(c, index, "Gemini") } };
    const signature = signatureOfCallId(c.id) ?? (validatesSignatures(model) ? SKIP_SIGNATURE : undefined);
    if (signature !== undefined) part.thoughtSignature = signature;
    parts.push(part);
  }
  return { role: "model", parts };
}

/**
 * A tool result → a `functionResponse` part. Gemini names the function, not the call, so the name
 * comes from the call the history made with this id. The result text goes under `output`, or under
 * `error` when the tool failed (Gemini's documented keys).
 */
function functionResponse(m: Extract<NeutralMessage, { role: "tool" }>, index: number, names: ReadonlyMap<string, string>): Part {
  const name = names.get(m.toolCallId);
  if (name === undefined) throw invalidMessage(index, `no earlier tool call has the id '${echo(m.toolCallId)}'.`);
  let text = "";
  for (const p of m.content) {
    if (p.type === "image") throw invalidMessage(index, "images in tool results are not supported by this model's backend.");
    if (p.type === "text") text += p.text;
  }
  return { functionResponse: { name, response: m.isError === true ? { error: text } : { output: text } } };
}

/** Messages → `systemInstruction` and `contents`, consecutive turns of one role merged (Gemini alternates roles). */
function conversation(messages: readonly NeutralMessage[], model: string): { system: Part[]; contents: Content[] } {
  const system: Part[] = [];
  const contents: Content[] = [];
  const names = new Map<string, string>();
  const push = (c: Content): void => {
    const last = contents.at(-1);
    if (last !== undefined && last.role === c.role) last.parts.push(...c.parts);
    else if (c.parts.length > 0) contents.push(c);
  };
  messages.forEach((m, i) => {
    switch (m.role) {
      case "system":
      case "developer":
        // Gemini has one system instruction: every system and developer message joins it, in order.
        for (const p of m.content) {
          if (p.type === "image") throw invalidMessage(i, "images are only allowed in user messages.");
          if (p.type === "text" && p.text !== "") system.push({ text: p.text });
        }
        break;
      case "user":
        push({ role: "user", parts: userParts(m.content, i) });
        break;
      case "assistant":
        for (const c of m.toolCalls ?? []) names.set(c.id, c.name);
        push(modelContent(m, i, model));
        break;
      case "tool":
        push({ role: "user", parts: [functionResponse(m, i, names)] });
        break;
    }
  });
  return { system, contents };
}

/** Effort values Gemini's `thinkingLevel` has; the others are refused, never mapped to a neighbour. */
const GEMINI_LEVELS: ReadonlySet<string> = new Set(["minimal", "low", "medium", "high"]);

/**
 * Reasoning controls → `thinkingConfig`: an effort is a `thinkingLevel` (Gemini 3), a budget a
 * `thinkingBudget` (Gemini 2.5; "adaptive" is its dynamic budget, -1). Thoughts are returned
 * (`includeThoughts`) unless the request asked for them to be omitted.
 */
function thinkingConfig(req: NeutralRequest): Part | undefined {
  if (req.reasoningEffort === undefined && req.reasoningBudgetTokens === undefined) return undefined;
  const out: Part = { includeThoughts: req.reasoningDisplay !== "omitted" };
  const effort = req.reasoningEffort;
  if (effort !== undefined) {
    if (!GEMINI_LEVELS.has(effort)) throw refuse(`reasoning effort '${echo(effort)}' is not supported by this model's backend.`);
    out.thinkingLevel = effort;
  }
  const budget = req.reasoningBudgetTokens;
  if (budget !== undefined) {
    if (budget === "between_tools") throw refuse("thinking only between tool calls is not supported by this model's backend.");
    out.thinkingBudget = budget === "adaptive" ? -1 : budget;
  }
  return out;
}

/**
 * Neutral request → Gemini body. Only the features the codec declares it carries reach here;
 * cache hints, end-user ids and names have no field and are left out (they never change the
 * answer). Gemini cannot be asked to stream usage: every streamed chunk carries it.
 */
export function encodeGeminiRequest(req: NeutralRequest, upstreamModel: string, _options: UpstreamOptions): Record<string, unknown> {
  const { system, contents } = conversation(req.messages, upstreamModel);
  const body: Record<string, unknown> = { contents };
  if (system.length > 0) body.systemInstruction = { parts: system };
  if (req.tools !== undefined && req.tools.length > 0) {
    body.tools = [
      {
        functionDeclarations: req.tools.map((t) => {
          // `parametersJsonSchema` takes JSON Schema as clients write it (`additionalProperties`,
          // `$ref`…), where `parameters` takes only Google's OpenAPI subset and refuses the rest.
          const decl: Part = { name: t.name };
          if (t.description !== undefined) decl.description = t.description;
          if (t.parameters !== undefined) decl.parametersJsonSchema = t.parameters;
          return decl;
        }),
      },
    ];
  }
  const c = req.toolChoice;
  if (c !== undefined) {
    const mode = c.type === "none" ? "NONE" : c.type === "auto" ? "AUTO" : "ANY";
    body.toolConfig = { functionCallingConfig: c.type === "tool" ? { mode, allowedFunctionNames: [c.name] } : { mode } };
  }
  const g: Record<string, unknown> = {};
  if (req.maxOutputTokens !== undefined) g.maxOutputTokens = req.maxOutputTokens;
  if (req.temperature !== undefined) g.temperature = req.temperature;
  if (req.topP !== undefined) g.topP = req.topP;
  if (req.topK !== undefined) g.topK = req.topK;
  if (req.seed !== undefined) g.seed = req.seed;
  if (req.presencePenalty !== undefined) g.presencePenalty = req.presencePenalty;
  if (req.frequencyPenalty !== undefined) g.frequencyPenalty = req.frequencyPenalty;
  if (req.stop !== undefined && req.stop.length > 0) g.stopSequences = req.stop;
  const f = req.responseFormat;
  if (f?.type === "json_object") g.responseMimeType = "application/json";
  else if (f?.type === "json_schema") {
    if (f.schema === undefined) throw refuse("a JSON schema response format without a schema is not supported by this model's backend.", "response_format");
    g.responseMimeType = "application/json";
    // JSON Schema as the client wrote it (see parametersJsonSchema above); the name is a label.
    g.responseJsonSchema = f.schema;
  }
  const thinking = thinkingConfig(req);
  if (thinking !== undefined) g.thinkingConfig = thinking;
  if (Object.keys(g).length > 0) body.generationConfig = g;
  return body;
}
