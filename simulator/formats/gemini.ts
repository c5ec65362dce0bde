/**
 * Google Gemini, as the Gemini API (`POST /v1beta/models/{model}:generateContent`, key in
 * `x-goog-api-key`) and as Vertex AI (`POST /v1/projects/{p}/locations/{l}/publishers/google/
 * models/{model}:generateContent`, a bearer token). Streaming is `:streamGenerateContent`, which
 * answers server-sent events only with `alt=sse` (CRLF-framed `data:` chunks, no end marker).
 *
 * Usage follows Google's split: `promptTokenCount` includes the cached part
 * (`cachedContentTokenCount`); `candidatesTokenCount` excludes thoughts (`thoughtsTokenCount`).
 * Errors are Google's envelope, `{ error: { code, message, status, details } }`, with a
 * `google.rpc.RetryInfo` detail on 429 and 503.
 */

import type { Completion, ErrorKind, GenerationRequest, NeutralMessage, ParseResult, SimError, StreamScript, ToolChoice, ToolSpec, WireFormat } from "../wire-format.ts";
import { lastUserText } from "../generate.ts";

type Json = Readonly<Record<string, unknown>>;

/** Google's canonical status for each error kind. */
const STATUSES: Record<ErrorKind, string> = {
  invalid_request: "INVALID_ARGUMENT",
  authentication: "UNAUTHENTICATED",
  billing: "FAILED_PRECONDITION",
  permission: "PERMISSION_DENIED",
  not_found: "NOT_FOUND",
  too_large: "INVALID_ARGUMENT",
  rate_limit: "RESOURCE_EXHAUSTED",
  server: "INTERNAL",
  timeout: "DEADLINE_EXCEEDED",
  overloaded: "UNAVAILABLE",
};

const FINISH: Record<Completion["finish"], string> = { stop: "STOP", length: "MAX_TOKENS", tool: "STOP", stop_sequence: "STOP" };

/** A Gemini route: which endpoint mode, the model, and whether it streams. */
export interface GeminiRoute {
  readonly mode: "gemini-api" | "vertex";
  readonly model: string;
  readonly stream: boolean;
  /** `streamGenerateContent` without `alt=sse` answers a JSON array, which the simulator does not serve. */
  readonly sse: boolean;
}

const GEMINI_API = /^\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent)$/;
const VERTEX = /^\/v1(?:beta1)?\/projects\/[^/]+\/locations\/[^/]+\/publishers\/google\/models\/([^/:]+):(generateContent|streamGenerateContent)$/;

/** The Gemini route a POST path names, else undefined. */
export function geminiRoute(path: string, query: string): GeminiRoute | undefined {
  const m = GEMINI_API.exec(path);
  const v = m ? undefined : VERTEX.exec(path);
  const hit = m ?? v;
  if (!hit) return undefined;
  const stream = hit[2] === "streamGenerateContent";
  return { mode: m ? "gemini-api" : "vertex", model: decodeURIComponent(hit[1]!), stream, sse: new URLSearchParams(query).get("alt") === "sse" };
}

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function invalid(message: string): ParseResult {
  return { ok: false, error: { status: 400, kind: "invalid_request", message, param: null, code: null } };
}

/** Text and media of one content's parts, the way the other formats flatten a turn. */
function flatten(parts: unknown, at: string): { text: string; media: number; results: string[] } | ParseResult {
  if (!Array.isArray(parts)) return invalid(`Invalid value at '${at}.parts' (type.googleapis.com/google.ai.generativelanguage.v1beta.Part), expected a list`);
  let text = "";
  let media = 0;
  const results: string[] = [];
  for (let j = 0; j < parts.length; j++) {
    const p: unknown = parts[j];
    if (!isObject(p)) return invalid(`Invalid value at '${at}.parts[${j}]': expected an object`);
    if (typeof p["text"] === "string") {
      if (p["thought"] !== true) text += p["text"];
    } else if (isObject(p["inlineData"]) || isObject(p["fileData"])) media++;
    else if (isObject(p["functionCall"])) {
      const call = p["functionCall"];
      if (typeof call["name"] !== "string") return invalid(`${at}.parts[${j}].function_call.name: Field required`);
      text += `${call["name"]}${JSON.stringify(call["args"] ?? {})}`;
    } else if (isObject(p["functionResponse"])) {
      const r = p["functionResponse"];
      if (typeof r["name"] !== "string") return invalid(`${at}.parts[${j}].function_response.name: Field required`);
      if (!isObject(r["response"])) return invalid(`${at}.parts[${j}].function_response.response: must be an object`);
      results.push(JSON.stringify(r["response"]));
    } else return invalid(`${at}.parts[${j}]: a part must have one of text, inlineData, fileData, functionCall, functionResponse`);
  }
  return { text, media, results };
}

function isResult(value: unknown): value is ParseResult {
  return isObject(value) && typeof value["ok"] === "boolean";
}

function parseTools(value: unknown): ToolSpec[] | ParseResult {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) return invalid("Invalid value at 'tools': expected a list");
  const out: ToolSpec[] = [];
  for (const tool of value) {
    if (!isObject(tool)) return invalid("Invalid value at 'tools': expected an object");
    const decls = tool["functionDeclarations"];
    if (decls === undefined) continue;
    if (!Array.isArray(decls)) return invalid("Invalid value at 'tools.function_declarations': expected a list");
    for (const d of decls) {
      if (!isObject(d) || typeof d["name"] !== "string" || d["name"] === "") return invalid("tools.function_declarations.name: Field required");
      if (d["parameters"] !== undefined && d["parametersJsonSchema"] !== undefined) return invalid("tools.function_declarations: parameters and parameters_json_schema are mutually exclusive");
      out.push({ name: d["name"], description: typeof d["description"] === "string" ? d["description"] : undefined, parameters: d["parametersJsonSchema"] ?? d["parameters"] });
    }
  }
  return out;
}

function parseToolChoice(value: unknown): ToolChoice | ParseResult {
  if (value === undefined || value === null) return { type: "auto" };
  const config = isObject(value) ? value["functionCallingConfig"] : undefined;
  if (config === undefined) return { type: "auto" };
  if (!isObject(config)) return invalid("Invalid value at 'tool_config.function_calling_config'");
  const names = config["allowedFunctionNames"];
  switch (config["mode"]) {
    case undefined:
    case "AUTO":
      return { type: "auto" };
    case "NONE":
      return { type: "none" };
    case "ANY":
      return Array.isArray(names) && names.length === 1 && typeof names[0] === "string" ? { type: "function", name: names[0] } : { type: "required" };
    default:
      return invalid(`Invalid value at 'tool_config.function_calling_config.mode' (${String(config["mode"])})`);
  }
}

/** A request body of `route`; the model and the streaming switch come from the URL. */
export function parseGemini(body: unknown, route: GeminiRoute): ParseResult {
  if (!isObject(body)) return invalid("Invalid JSON payload received. Expected an object.");
  const contents = body["contents"];
  if (!Array.isArray(contents) || contents.length === 0) return invalid("* GenerateContentRequest.contents: contents is not specified");
  const messages: NeutralMessage[] = [];
  const system = body["systemInstruction"];
  if (system !== undefined && system !== null) {
    if (!isObject(system)) return invalid("Invalid value at 'system_instruction'");
    const s = flatten(system["parts"], "system_instruction");
    if (isResult(s)) return s;
    messages.push({ role: "system", text: s.text, media: s.media });
  }
  for (let i = 0; i < contents.length; i++) {
    const c: unknown = contents[i];
    if (!isObject(c)) return invalid(`Invalid value at 'contents[${i}]'`);
    const role = c["role"] ?? "user";
    if (role !== "user" && role !== "model") return invalid(`Please use a valid role: user, model.`);
    const f = flatten(c["parts"], `contents[${i}]`);
    if (isResult(f)) return f;
    if (f.results.length === 0 && f.text === "" && f.media === 0) return invalid(`* GenerateContentRequest.contents[${i}].parts: contents.parts must not be empty.`);
    // Function results are the Chat conversation's tool turns, before the rest of the user turn.
    for (const r of f.results) messages.push({ role: "tool", text: r, media: 0 });
    if (f.text !== "" || f.media > 0) messages.push({ role: role === "model" ? "assistant" : "user", text: f.text, media: f.media });
  }
  const tools = parseTools(body["tools"]);
  if (isResult(tools)) return tools;
  const toolChoice = parseToolChoice(body["toolConfig"]);
  if (isResult(toolChoice)) return toolChoice;
  const g = body["generationConfig"];
  if (g !== undefined && !isObject(g)) return invalid("Invalid value at 'generation_config'");
  const config: Json = g ?? {};
  const max = config["maxOutputTokens"];
  if (max !== undefined && (typeof max !== "number" || !Number.isInteger(max) || max < 1)) return invalid("Invalid value at 'generation_config.max_output_tokens'");
  const temperature = config["temperature"];
  if (temperature !== undefined && (typeof temperature !== "number" || temperature < 0 || temperature > 2)) return invalid("* GenerateContentRequest.generation_config.temperature: must be in [0, 2]");
  const stops = config["stopSequences"];
  if (stops !== undefined && !(Array.isArray(stops) && stops.length <= 5 && stops.every((s) => typeof s === "string"))) return invalid("* GenerateContentRequest.generation_config.stop_sequences: at most 5 strings");
  if (config["responseSchema"] !== undefined && config["responseJsonSchema"] !== undefined) return invalid("response_schema and response_json_schema are mutually exclusive");
  const thinking = config["thinkingConfig"];
  const reasoningText = isObject(thinking) && thinking["includeThoughts"] === true;
  return {
    ok: true,
    request: {
      model: route.model,
      messages,
      tools,
      toolChoice,
      maxTokens: typeof max === "number" ? max : undefined,
      stream: route.stream,
      streamUsage: true,
      directiveText: lastUserText(messages),
      stopSequences: Array.isArray(stops) ? (stops as string[]) : [],
      reasoningText,
    },
  };
}

/** A stable placeholder thought signature (base64, like Google's). */
function signature(completion: Completion): string {
  return Buffer.from(`sluice-simulator:${completion.uid}`).toString("base64");
}

function args(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return {};
  }
}

function usageMetadata(completion: Completion): Json | undefined {
  const u = completion.usage;
  if (u === undefined) return undefined;
  const out: Record<string, unknown> = {
    promptTokenCount: u.promptTokens,
    candidatesTokenCount: u.completionTokens - u.reasoningTokens,
    totalTokenCount: u.promptTokens + u.completionTokens,
  };
  if (u.cachedTokens > 0) out["cachedContentTokenCount"] = u.cachedTokens;
  if (u.reasoningTokens > 0) out["thoughtsTokenCount"] = u.reasoningTokens;
  return out;
}

function chunk(completion: Completion, parts: Json[], finish?: string, usage?: Json): Json {
  const candidate: Record<string, unknown> = { content: { role: "model", parts }, index: 0 };
  if (finish !== undefined) candidate["finishReason"] = finish;
  const out: Record<string, unknown> = { candidates: [candidate] };
  if (usage !== undefined) out["usageMetadata"] = usage;
  out["modelVersion"] = completion.model;
  out["responseId"] = completion.uid;
  return out;
}

function callPart(completion: Completion): Json | undefined {
  const call = completion.toolCall;
  if (call === undefined) return undefined;
  // Thinking models sign their calls; the signature must come back when the call is replayed.
  return { functionCall: { name: call.name, args: args(call.arguments) }, thoughtSignature: signature(completion) };
}

function renderBuffered(completion: Completion): string {
  const parts: Json[] = [];
  if (completion.reasoning.length > 0) parts.push({ text: completion.reasoning.join(""), thought: true });
  const call = callPart(completion);
  if (call !== undefined) parts.push(call);
  else parts.push({ text: completion.tokens.join("") });
  return JSON.stringify(chunk(completion, parts, FINISH[completion.finish], usageMetadata(completion)));
}

function frame(value: Json): string {
  return `data: ${JSON.stringify(value)}\r\n\r\n`;
}

/**
 * The thoughts (one chunk, with the headers), then one chunk per text token or the whole
 * function call, then a closing chunk with the finish reason and the usage. A failure after the
 * headers is an error envelope as a data chunk, after which the stream ends.
 */
function renderStream(completion: Completion): StreamScript {
  const head = completion.reasoning.length > 0 ? frame(chunk(completion, [{ text: completion.reasoning.join(""), thought: true }])) : "";
  const call = callPart(completion);
  const pieces = call !== undefined ? [frame(chunk(completion, [call]))] : completion.tokens.map((t) => frame(chunk(completion, [{ text: t }])));
  const tail = frame(chunk(completion, [{ text: "" }], FINISH[completion.finish], usageMetadata(completion)));
  const error = (e: SimError): string => frame(errorEnvelope(e));
  return { head, pieces, tail, error };
}

function errorEnvelope(error: SimError): Json {
  const details: Json[] = [];
  // An invalid key is a 400 like a bad request; Google says which in ErrorInfo's reason.
  if (error.code === "API_KEY_INVALID") {
    details.push({ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: error.code, domain: "googleapis.com", metadata: { service: "generativelanguage.googleapis.com" } });
  }
  if (error.kind === "rate_limit" || error.kind === "overloaded") {
    details.push({ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: `${error.retryAfterSeconds ?? 1}s` });
  }
  return { error: { code: error.status, message: error.message, status: STATUSES[error.kind], ...(details.length > 0 ? { details } : {}) } };
}

function renderError(error: SimError): string {
  return JSON.stringify(errorEnvelope(error));
}

function malformedJson(): SimError {
  return { status: 400, kind: "invalid_request", message: "Invalid JSON payload received.", param: null, code: null };
}

function authError(given: string | undefined): SimError {
  return given === undefined
    ? { status: 401, kind: "authentication", message: "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.", param: null, code: null }
    : { status: 400, kind: "invalid_request", message: "API key not valid. Please pass a valid API key.", param: null, code: "API_KEY_INVALID" };
}

/** A bearer token Vertex refuses: missing, unknown or expired. */
export function vertexAuthError(given: string | undefined): SimError {
  return given === undefined
    ? { status: 401, kind: "authentication", message: "Request is missing required authentication credential. Expected OAuth 2 access token.", param: null, code: null }
    : { status: 401, kind: "authentication", message: "Request had invalid authentication credentials. Expected OAuth 2 access token.", param: null, code: null };
}

/** The Gemini API's model list (`GET /v1beta/models`): each id as a `models/…` resource that generates content. */
export function renderGeminiModelList(models: readonly string[]): string {
  return JSON.stringify({ models: models.map((id) => ({ name: `models/${id}`, displayName: id, supportedGenerationMethods: ["generateContent", "countTokens"] })) });
}

/** The Gemini wire for one route at `path` (its model and streaming switch come from the URL). */
export function geminiFormat(route: GeminiRoute, path: string): WireFormat {
  return {
    name: route.mode === "vertex" ? "vertex" : "gemini",
    path,
    requestIdHeader: "x-request-id",
    // Google sends no keep-alive frames; an empty line is the least a stream can carry.
    heartbeat: "\r\n",
    parse: (body) => parseGemini(body, route),
    malformedJson,
    authError,
    renderError,
    renderBuffered,
    renderStream,
  };
}
