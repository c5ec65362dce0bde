/**
 * AWS Bedrock Converse (`POST /model/{modelId}/converse`) and ConverseStream
 * (`POST /model/{modelId}/converse-stream`): request validation with Bedrock's
 * ValidationException wording, the Converse answer, and the stream in the binary AWS event
 * stream framing. Errors name their type in `x-amzn-errortype` and carry `{"message": …}`.
 * Requests are SigV4-verified (see {@link verifySigV4}) when the simulator has AWS credentials.
 *
 * Usage follows Bedrock's split: `inputTokens` excludes cache reads, so with the
 * `cached-tokens` knob at N, `inputTokens` = prompt − N and `cacheReadInputTokens` = N.
 */

import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import { encodeEventStreamMessage } from "../../src/protocol/bedrock-converse/event-stream.ts";
import { lastUserText } from "../generate.ts";
import type {
  Completion,
  ErrorKind,
  GenerationRequest,
  NeutralMessage,
  ParseResult,
  SimError,
  StreamScript,
  ToolChoice,
  ToolSpec,
  Usage,
  WireFormat,
} from "../wire-format.ts";

type Json = Readonly<Record<string, unknown>>;

/** The Converse routes: the model id is one (encoded) path segment. */
const ROUTE = /^\/model\/([^/]+)\/(converse|converse-stream)$/;

/** The model and operation of a Bedrock path, or undefined for any other path. */
export function bedrockRoute(path: string): { readonly model: string; readonly stream: boolean } | undefined {
  const m = ROUTE.exec(path);
  if (!m) return undefined;
  let model: string;
  try {
    model = decodeURIComponent(m[1]!);
  } catch {
    return undefined;
  }
  return { model, stream: m[2] === "converse-stream" };
}

/** The error type Bedrock names for each kind of failure. */
const ERROR_TYPES: Record<ErrorKind, string> = {
  invalid_request: "ValidationException",
  authentication: "UnrecognizedClientException",
  billing: "AccessDeniedException",
  permission: "AccessDeniedException",
  not_found: "ResourceNotFoundException",
  too_large: "ValidationException",
  rate_limit: "ThrottlingException",
  server: "InternalServerException",
  timeout: "ModelTimeoutException",
  overloaded: "ServiceUnavailableException",
};

/** Bedrock's own wording for simulated failures of these kinds. */
const MESSAGES: Partial<Record<ErrorKind, string>> = {
  rate_limit: "Too many requests, please wait before trying again.",
  overloaded: "Bedrock is unable to process your request.",
};

/** The event stream's name for an error type (`ThrottlingException` → `throttlingException`). */
const streamExceptionType = (type: string): string => type.charAt(0).toLowerCase() + type.slice(1);

const STOP_REASONS: Record<Completion["finish"], string> = {
  stop: "end_turn",
  length: "max_tokens",
  tool: "tool_use",
  stop_sequence: "stop_sequence",
};

/** Block members a message's content may carry; those other than text, tool use and results count as media or nothing. */
const MEDIA_BLOCKS = new Set(["image", "document", "video"]);
const IGNORED_BLOCKS = new Set(["reasoningContent", "cachePoint", "guardContent", "citationsContent"]);

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function invalid(message: string): ParseResult {
  return { ok: false, error: { status: 400, kind: "invalid_request", message, param: null, code: null } };
}

function isResult<T>(value: T | ParseResult): value is ParseResult {
  return isObject(value) && typeof (value as { ok?: unknown }).ok === "boolean";
}

// ---------------------------------------------------------------------------------------
// Request

/** The one member a content block (a union) sets. */
function member(block: Json): string | undefined {
  const keys = Object.keys(block);
  return keys.length === 1 ? keys[0] : undefined;
}

/** Text and media of a tool result's content blocks. */
function toolResultContent(at: string, content: unknown): { text: string; media: number } | ParseResult {
  if (!Array.isArray(content)) return invalid(`1 validation error detected: Value null at '${at}.content' failed to satisfy constraint: Member must not be null`);
  let text = "";
  let media = 0;
  for (const block of content) {
    if (!isObject(block)) return invalid(`The format of the value at ${at}.content is invalid.`);
    if (typeof block["text"] === "string") text += block["text"];
    else if (isObject(block["json"])) text += JSON.stringify(block["json"]);
    else media++;
  }
  return { text, media };
}

/**
 * Messages as neutral turns, shaped like the equivalent Chat conversation (a tool call joins its
 * assistant turn as name + JSON input, each tool result is a `tool` turn before the rest of its
 * user turn). Bedrock's own rules are checked: a conversation starts with a user turn and turns
 * alternate, text is never blank, and tool blocks need a `toolConfig`.
 */
function parseMessages(value: unknown, hasToolConfig: boolean): NeutralMessage[] | ParseResult {
  if (value === undefined || value === null) return invalid("1 validation error detected: Value null at 'messages' failed to satisfy constraint: Member must not be null");
  if (!Array.isArray(value)) return invalid("The format of the value at messages is invalid.");
  if (value.length === 0) return invalid("A conversation must start with a user message. Try again with a conversation that starts with a user message.");
  const out: NeutralMessage[] = [];
  let previous: string | undefined;
  for (let i = 0; i < value.length; i++) {
    const at = `messages.${i}`;
    const message: unknown = value[i];
    if (!isObject(message)) return invalid(`The format of the value at ${at} is invalid.`);
    const role = message["role"];
    if (role !== "user" && role !== "assistant") {
      return invalid(`1 validation error detected: Value '${String(role)}' at '${at}.role' failed to satisfy constraint: Member must satisfy enum value set: [user, assistant]`);
    }
    if (i === 0 && role !== "user") return invalid("A conversation must start with a user message. Try again with a conversation that starts with a user message.");
    if (role === previous) return invalid("A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.");
    previous = role;
    const content = message["content"];
    if (!Array.isArray(content)) return invalid(`1 validation error detected: Value null at '${at}.content' failed to satisfy constraint: Member must not be null`);
    let text = "";
    let media = 0;
    let results = 0;
    for (let j = 0; j < content.length; j++) {
      const where = `${at}.content.${j}`;
      const block: unknown = content[j];
      const kind = isObject(block) ? member(block) : undefined;
      if (!isObject(block) || kind === undefined) return invalid(`The format of the value at ${where} is invalid.`);
      if (kind === "text") {
        if (typeof block["text"] !== "string") return invalid(`The format of the value at ${where}.text is invalid.`);
        if (block["text"].trim() === "") return invalid(`The text field in the ContentBlock object at ${where} is blank. Add text to the text field, and try again.`);
        text += block["text"];
      } else if (MEDIA_BLOCKS.has(kind)) {
        const media_ = block[kind];
        if (!isObject(media_) || typeof media_["format"] !== "string" || !isObject(media_["source"])) return invalid(`The format of the value at ${where}.${kind} is invalid.`);
        media++;
      } else if (kind === "toolUse" || kind === "toolResult") {
        if (!hasToolConfig) return invalid("The toolConfig field must be defined when using toolUse and toolResult content blocks.");
        const b = block[kind];
        if (!isObject(b) || typeof b["toolUseId"] !== "string") return invalid(`The format of the value at ${where}.${kind} is invalid.`);
        if (kind === "toolUse") {
          if (role !== "assistant") return invalid(`The model returned the following errors: messages.${i}: toolUse blocks are only allowed in assistant messages`);
          if (typeof b["name"] !== "string" || !isObject(b["input"])) return invalid(`The format of the value at ${where}.toolUse is invalid.`);
          text += `${b["name"]}${JSON.stringify(b["input"])}`;
        } else {
          if (role !== "user") return invalid(`The model returned the following errors: messages.${i}: toolResult blocks are only allowed in user messages`);
          const result = toolResultContent(`${where}.toolResult`, b["content"]);
          if (isResult(result)) return result;
          out.push({ role: "tool", text: result.text, media: result.media });
          results++;
        }
      } else if (!IGNORED_BLOCKS.has(kind)) {
        return invalid(`The format of the value at ${where} is invalid.`);
      }
    }
    // A user turn of tool results only is the Chat tool messages and nothing more.
    if (text !== "" || media > 0 || results === 0) out.push({ role, text, media });
  }
  return out;
}

function parseSystem(value: unknown): string | ParseResult {
  if (value === undefined || value === null) return "";
  if (!Array.isArray(value)) return invalid("The format of the value at system is invalid.");
  let text = "";
  for (let i = 0; i < value.length; i++) {
    const block: unknown = value[i];
    if (!isObject(block)) return invalid(`The format of the value at system.${i} is invalid.`);
    if (typeof block["text"] === "string") text += block["text"];
    else if (!isObject(block["cachePoint"]) && !isObject(block["guardContent"])) return invalid(`The format of the value at system.${i} is invalid.`);
  }
  return text;
}

function parseToolConfig(value: unknown): { tools: ToolSpec[]; choice: ToolChoice } | ParseResult {
  if (value === undefined || value === null) return { tools: [], choice: { type: "auto" } };
  if (!isObject(value) || !Array.isArray(value["tools"]) || value["tools"].length === 0) {
    return invalid("1 validation error detected: Value at 'toolConfig.tools' failed to satisfy constraint: Member must have length greater than or equal to 1");
  }
  const tools: ToolSpec[] = [];
  for (let i = 0; i < value["tools"].length; i++) {
    const t: unknown = value["tools"][i];
    if (!isObject(t)) return invalid(`The format of the value at toolConfig.tools.${i} is invalid.`);
    if (isObject(t["cachePoint"])) continue;
    const spec = t["toolSpec"];
    if (!isObject(spec) || typeof spec["name"] !== "string" || !isObject(spec["inputSchema"]) || !isObject(spec["inputSchema"]["json"])) {
      return invalid(`The format of the value at toolConfig.tools.${i}.toolSpec is invalid.`);
    }
    tools.push({ name: spec["name"], description: typeof spec["description"] === "string" ? spec["description"] : undefined, parameters: spec["inputSchema"]["json"] });
  }
  const c = value["toolChoice"];
  if (c === undefined || c === null) return { tools, choice: { type: "auto" } };
  if (!isObject(c)) return invalid("The format of the value at toolConfig.toolChoice is invalid.");
  if (isObject(c["auto"])) return { tools, choice: { type: "auto" } };
  if (isObject(c["any"])) return { tools, choice: { type: "required" } };
  if (isObject(c["tool"]) && typeof c["tool"]["name"] === "string") return { tools, choice: { type: "function", name: c["tool"]["name"] } };
  return invalid("The format of the value at toolConfig.toolChoice is invalid.");
}

/** `inferenceConfig`: the output cap and the stop sequences. */
function parseInference(value: unknown): { maxTokens: number | undefined; stops: string[] } | ParseResult {
  if (value === undefined || value === null) return { maxTokens: undefined, stops: [] };
  if (!isObject(value)) return invalid("The format of the value at inferenceConfig is invalid.");
  const max = value["maxTokens"];
  if (max !== undefined && (typeof max !== "number" || !Number.isInteger(max) || max < 1)) {
    return invalid(`1 validation error detected: Value '${String(max)}' at 'inferenceConfig.maxTokens' failed to satisfy constraint: Member must have value greater than or equal to 1`);
  }
  for (const key of ["temperature", "topP"]) {
    const v = value[key];
    if (v !== undefined && (typeof v !== "number" || v < 0 || v > 1)) {
      return invalid(`1 validation error detected: Value '${String(v)}' at 'inferenceConfig.${key}' failed to satisfy constraint: Member must have value less than or equal to 1`);
    }
  }
  const stops = value["stopSequences"];
  if (stops !== undefined && (!Array.isArray(stops) || stops.some((s) => typeof s !== "string"))) return invalid("The format of the value at inferenceConfig.stopSequences is invalid.");
  return { maxTokens: max as number | undefined, stops: (stops as string[] | undefined) ?? [] };
}

/** Claude's `thinking` in `additionalModelRequestFields`: whether reasoning is shown. */
function thinkingShown(fields: unknown): boolean {
  if (!isObject(fields) || !isObject(fields["thinking"])) return false;
  const type = fields["thinking"]["type"];
  return type === "enabled" || type === "adaptive";
}

function parseBody(body: unknown, model: string, stream: boolean): ParseResult {
  if (!isObject(body)) return invalid("The format of the request body is invalid.");
  const toolConfig = parseToolConfig(body["toolConfig"]);
  if (isResult(toolConfig)) return toolConfig;
  const messages = parseMessages(body["messages"], body["toolConfig"] !== undefined);
  if (isResult(messages)) return messages;
  const system = parseSystem(body["system"]);
  if (isResult(system)) return system;
  const inference = parseInference(body["inferenceConfig"]);
  if (isResult(inference)) return inference;
  const all = system === "" ? messages : [{ role: "system", text: system, media: 0 }, ...messages];
  const request: GenerationRequest = {
    model,
    messages: all,
    tools: toolConfig.tools,
    toolChoice: toolConfig.choice,
    maxTokens: inference.maxTokens,
    stream,
    streamUsage: true,
    directiveText: lastUserText(all),
    stopSequences: inference.stops,
    reasoningText: thinkingShown(body["additionalModelRequestFields"]),
  };
  return { ok: true, request };
}

// ---------------------------------------------------------------------------------------
// Response

/** Bedrock's split: input excludes cache reads; output includes reasoning. */
function usageJson(usage: Usage): Json {
  const input = usage.promptTokens - usage.cachedTokens;
  return {
    inputTokens: input,
    outputTokens: usage.completionTokens,
    totalTokens: input + usage.cachedTokens + usage.completionTokens,
    cacheReadInputTokens: usage.cachedTokens,
    cacheWriteInputTokens: 0,
  };
}

function signature(completion: Completion): string {
  return Buffer.from(`sluice-simulator:${completion.uid}:${completion.reasoning.length}`).toString("base64");
}

function toolInput(args: string): unknown {
  try {
    return JSON.parse(args);
  } catch {
    return {};
  }
}

function renderBuffered(completion: Completion): string {
  const content: Json[] = [];
  if (completion.reasoning.length > 0) content.push({ reasoningContent: { reasoningText: { text: completion.reasoning.join(""), signature: signature(completion) } } });
  const call = completion.toolCall;
  if (call) {
    if (completion.tokens.length > 0) content.push({ text: completion.tokens.join("") });
    content.push({ toolUse: { toolUseId: `tooluse_${call.uid}`, name: call.name, input: toolInput(call.arguments) } });
  } else if (completion.tokens.length > 0) content.push({ text: completion.tokens.join("") });
  const body: Record<string, unknown> = {
    output: { message: { role: "assistant", content } },
    stopReason: STOP_REASONS[completion.finish],
    metrics: { latencyMs: 1 },
  };
  if (completion.usage) body["usage"] = usageJson(completion.usage);
  return JSON.stringify(body);
}

const encoder = new TextEncoder();
/** Bedrock pads every event's JSON with a `p` field of varying length (so sizes do not reveal content). */
const PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0";

function event(type: string, data: Json): Uint8Array {
  const payload = { ...data, p: PADDING.slice(0, 1 + (type.length % PADDING.length)) };
  return encodeEventStreamMessage({ ":event-type": type, ":content-type": "application/json", ":message-type": "event" }, encoder.encode(JSON.stringify(payload)));
}

function join(frames: readonly Uint8Array[]): Uint8Array {
  return Buffer.concat(frames);
}

/**
 * messageStart; reasoning as one delta with its signature in block 0; then the text deltas, or
 * the tool call's contentBlockStart and its input pieces, in the next block; then
 * contentBlockStop, messageStop and metadata (usage). `omit-usage` leaves metadata out.
 */
function renderStream(completion: Completion): StreamScript {
  const head: Uint8Array[] = [event("messageStart", { role: "assistant" })];
  let index = 0;
  if (completion.reasoning.length > 0) {
    head.push(event("contentBlockDelta", { contentBlockIndex: index, delta: { reasoningContent: { text: completion.reasoning.join("") } } }));
    head.push(event("contentBlockDelta", { contentBlockIndex: index, delta: { reasoningContent: { signature: signature(completion) } } }));
    head.push(event("contentBlockStop", { contentBlockIndex: index }));
    index++;
  }
  const call = completion.toolCall;
  let pieces: Uint8Array[] = [];
  const block = index;
  if (call) {
    head.push(event("contentBlockStart", { contentBlockIndex: block, start: { toolUse: { toolUseId: `tooluse_${call.uid}`, name: call.name } } }));
    pieces = call.pieces.map((p) => event("contentBlockDelta", { contentBlockIndex: block, delta: { toolUse: { input: p } } }));
  } else {
    pieces = completion.tokens.map((t) => event("contentBlockDelta", { contentBlockIndex: block, delta: { text: t } }));
  }
  const tail: Uint8Array[] = [];
  if (call || completion.tokens.length > 0) tail.push(event("contentBlockStop", { contentBlockIndex: block }));
  tail.push(event("messageStop", { stopReason: STOP_REASONS[completion.finish] }));
  if (completion.usage) tail.push(event("metadata", { usage: usageJson(completion.usage), metrics: { latencyMs: 1 } }));
  // A failure after the headers is an exception message, after which the stream ends.
  const error = (e: SimError): Uint8Array =>
    encodeEventStreamMessage(
      { ":exception-type": streamExceptionType(errorType(e)), ":content-type": "application/json", ":message-type": "exception" },
      encoder.encode(JSON.stringify({ message: MESSAGES[e.kind] ?? e.message })),
    );
  return { head: join(head), pieces, tail: join(tail), error };
}

/**
 * The error's type: one named in its code (the SigV4 refusals, `…Exception`), else the kind's
 * (simulated failures carry OpenAI-style codes such as `rate_limit_exceeded`).
 */
function errorType(error: SimError): string {
  return error.code !== null && error.code.endsWith("Exception") ? error.code : ERROR_TYPES[error.kind];
}

function renderError(error: SimError): string {
  return JSON.stringify({ message: MESSAGES[error.kind] ?? error.message });
}

function malformedJson(): SimError {
  return { status: 400, kind: "invalid_request", message: "Unable to parse request body", param: null, code: "SerializationException" };
}

function authError(): SimError {
  return { status: 403, kind: "authentication", message: "Missing Authentication Token", param: null, code: "MissingAuthenticationTokenException" };
}

/** The Converse wire format for one model and operation (both come from the path). */
export function bedrockConverse(model: string, stream: boolean): WireFormat {
  return {
    name: "bedrock-converse",
    path: `/model/${encodeURIComponent(model)}/${stream ? "converse-stream" : "converse"}`,
    requestIdHeader: "x-amzn-requestid",
    // The event stream has no keep-alive message: `heartbeat-only` is silence.
    heartbeat: "",
    streamContentType: "application/vnd.amazon.eventstream",
    errorHeaders: (error) => ({ "x-amzn-errortype": errorType(error) }),
    parse: (body) => parseBody(body, model, stream),
    malformedJson,
    authError,
    renderError,
    renderBuffered,
    renderStream,
  };
}

// ---------------------------------------------------------------------------------------
// SigV4

/** The AWS credentials the simulator accepts. */
export interface SimAwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  /** When set, requests must carry it as `x-amz-security-token`. */
  readonly sessionToken?: string;
}

/** How far a request's `x-amz-date` may be from the simulator's clock. */
const MAX_SKEW_MS = 5 * 60 * 1000;

const sigError = (message: string, code: string): SimError => ({ status: 403, kind: "authentication", message, param: null, code });

const MISMATCH =
  "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.";

/** RFC 3986 encoding, SigV4's. */
function uriEncode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function parseAmzDate(value: string): number | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(value);
  return m ? Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!) : undefined;
}

const amz = (ms: number): string => new Date(ms).toISOString().replace(/[-:]/g, "").replace(/\.\d{3}/, "");

function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v.join(",") : v;
}

/**
 * Verifies a request's SigV4 signature the way AWS does, independently of the gateway's signer:
 * the canonical request is rebuilt from the bytes received (the path as sent, encoded once more;
 * the headers the signature lists; the body's own SHA-256), so a wrong secret, a tampered body or
 * header, or a clock more than five minutes off is refused with AWS's 403s.
 */
export function verifySigV4(
  method: string,
  rawUrl: string,
  headers: IncomingHttpHeaders,
  body: Uint8Array,
  credentials: SimAwsCredentials,
  now: number,
): SimError | undefined {
  const auth = headerValue(headers, "authorization");
  if (auth === undefined) return authError();
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) return sigError("Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters.", "IncompleteSignatureException");
  const [, keyId, day, region, service, signedHeaders, signature] = m as unknown as [string, string, string, string, string, string, string];
  if (keyId !== credentials.accessKeyId) return sigError("The security token included in the request is invalid.", "UnrecognizedClientException");
  if (credentials.sessionToken !== undefined && headerValue(headers, "x-amz-security-token") !== credentials.sessionToken) {
    return sigError("The security token included in the request is invalid.", "UnrecognizedClientException");
  }
  if (service !== "bedrock") return sigError(`Credential should be scoped to correct service: 'bedrock'.`, "InvalidSignatureException");
  const dateText = headerValue(headers, "x-amz-date") ?? "";
  const at = parseAmzDate(dateText);
  if (at === undefined || !dateText.startsWith(day)) return sigError("Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP.", "IncompleteSignatureException");
  if (at < now - MAX_SKEW_MS) return sigError(`Signature expired: ${dateText} is now earlier than ${amz(now - MAX_SKEW_MS)} (${amz(now)} - 5 min.)`, "InvalidSignatureException");
  if (at > now + MAX_SKEW_MS) return sigError(`Signature not yet current: ${dateText} is still later than ${amz(now + MAX_SKEW_MS)} (${amz(now)} + 5 min.)`, "InvalidSignatureException");
  const names = signedHeaders.split(";");
  if (!names.includes("host") || !names.includes("x-amz-date")) return sigError(MISMATCH, "InvalidSignatureException");

  const q = rawUrl.indexOf("?");
  const path = q < 0 ? rawUrl : rawUrl.slice(0, q);
  const query = q < 0 ? "" : rawUrl.slice(q + 1);
  const canonicalQuery = query
    .split("&")
    .filter((p) => p !== "")
    .map((p) => {
      const eq = p.indexOf("=");
      const k = eq < 0 ? p : p.slice(0, eq);
      const v = eq < 0 ? "" : p.slice(eq + 1);
      return `${uriEncode(decodeURIComponent(k))}=${uriEncode(decodeURIComponent(v))}`;
    })
    .sort()
    .join("&");
  const canonicalHeaders = names.map((n) => `${n}:${(headerValue(headers, n) ?? "").trim().replace(/\s+/g, " ")}\n`).join("");
  const canonical = [
    method,
    path.split("/").map(uriEncode).join("/"),
    canonicalQuery,
    canonicalHeaders,
    signedHeaders,
    createHash("sha256").update(body).digest("hex"),
  ].join("\n");
  const scope = `${day}/${region}/${service}/aws4_request`;
  const toSign = `AWS4-HMAC-SHA256\n${dateText}\n${scope}\n${createHash("sha256").update(canonical).digest("hex")}`;
  let key: Buffer = createHmac("sha256", `AWS4${credentials.secretAccessKey}`).update(day).digest();
  for (const part of [region, service, "aws4_request"]) key = createHmac("sha256", key).update(part).digest();
  const expected = createHmac("sha256", key).update(toSign).digest();
  if (!timingSafeEqual(expected, Buffer.from(signature, "hex"))) return sigError(MISMATCH, "InvalidSignatureException");
  return undefined;
}
