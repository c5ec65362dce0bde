/**
 * The simulator's HTTP server: routing, API-key check, request recording, knob
 * resolution, and the `/__sim/*` test-support endpoints. Usable in-process through
 * {@link startSimulator}; `main.ts` wraps it as a CLI.
 */

import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Exchange, serveGeneration, serveJson } from "./exchange.ts";
import { bedrockConverse, bedrockRoute, verifySigV4, type SimAwsCredentials } from "./formats/bedrock-converse.ts";
import { azureEnvelope, azureOpenaiChat, azureRoute, ENTRA_TOKEN_PATH, entraTokenAnswer, IssuedTokens, type EntraClient } from "./formats/azure-openai.ts";
import { anthropicCountTokens, anthropicMessages, anthropicModelNotFound, renderAnthropicModel, renderAnthropicModelList } from "./formats/anthropic-messages.ts";
import { geminiFormat, geminiRoute, renderGeminiModelList, vertexAuthError, type GeminiRoute } from "./formats/gemini.ts";
import { openaiChat } from "./formats/openai-chat.ts";
import { openaiEmbeddings } from "./formats/openai-embeddings.ts";
import { openaiModerations } from "./formats/openai-moderations.ts";
import { modelNotFound, renderModel, renderModelList } from "./formats/openai-models.ts";
import { openaiResponses } from "./formats/openai-responses.ts";
import { conversationHash } from "./generate.ts";
import { GoogleTokens, TOKEN_PATH } from "./google-token.ts";
import { BASE_KNOBS, KnobError, knobRejection, knobsForPath, knobsToSettings, resolveRequestKnobs, resolveSettings } from "./knobs.ts";
import type { KnobSettings, Knobs } from "./knobs.ts";
import { MCP_PATH, mcpUnauthorized, serveMcp } from "./mcp.ts";
import { Recorder } from "./stats.ts";
import type { JsonEndpoint, SimError, WireFormat } from "./wire-format.ts";

/** Wire formats by the POST path they serve; a new format is one more entry. */
const FORMATS: ReadonlyMap<string, WireFormat> = new Map([openaiChat, openaiResponses, anthropicMessages].map((f) => [f.path, f]));

/** Endpoints that generate no text, by POST path; they answer in their envelope (OpenAI's unless they name another). */
const JSON_ENDPOINTS: ReadonlyMap<string, JsonEndpoint> = new Map([openaiEmbeddings, openaiModerations, anthropicCountTokens].map((e) => [e.path, e]));

/**
 * Envelope for requests outside any format's route (unknown paths, `/v1/models`):
 * Anthropic's when the request carries `anthropic-version` (what Anthropic clients send),
 * OpenAI's otherwise.
 */
function envelopeFor(req: IncomingMessage): WireFormat {
  return req.headers["anthropic-version"] === undefined ? openaiChat : anthropicMessages;
}

/** Model ids listed by `GET /v1/models` when none are configured. */
export const DEFAULT_MODELS: readonly string[] = ["sim-small", "sim-large", "sim-reasoning"];

/** Default port of the CLI. */
export const DEFAULT_PORT = 9901;

/** Bodies above this are refused rather than buffered. */
const MAX_BODY_BYTES = 32 * 1024 * 1024;

/** Bound on distinct `times` keys remembered; past it the counters start over. */
const MAX_TIMES_KEYS = 10_000;

/** Options of {@link startSimulator}. */
export interface SimulatorOptions {
  /** TCP port; 0 (the default here) picks a free one. */
  readonly port?: number;
  /** Interface to bind; default `127.0.0.1`. */
  readonly host?: string;
  /** When set, API requests need `Authorization: Bearer <key>` or `x-api-key: <key>`. */
  readonly apiKey?: string;
  /** Ids listed by `GET /v1/models`; default {@link DEFAULT_MODELS}. Any id is accepted for generation. */
  readonly models?: readonly string[];
  /** Instance default knobs; throws `KnobError` when one is invalid. */
  readonly knobs?: KnobSettings;
  /** How many recent requests `GET /__sim/requests` can return; default 200. */
  readonly history?: number;
  /**
   * Google service accounts the fake token endpoint (`POST /token`) grants tokens to: client
   * email → the account's public key (SPKI PEM). With any, Vertex routes require a token it issued
   * (or `apiKey` as a bearer token).
   */
  readonly googleServiceAccounts?: Readonly<Record<string, string>>;
  /** When set, Bedrock routes need a valid SigV4 signature made with these credentials. */
  readonly aws?: SimAwsCredentials;
  /**
   * The application the fake Entra ID token endpoint accepts (client id and secret); any when
   * unset. Azure OpenAI requests with `Authorization: Bearer` need a token it issued.
   */
  readonly entraClient?: EntraClient;
}

/** A running simulator. */
export interface Simulator {
  /** Base URL, e.g. `http://127.0.0.1:9901` (no trailing slash, no `/v1`). */
  readonly url: string;
  readonly port: number;
  /** Stops listening and destroys open connections, in-flight streams included. */
  close(): Promise<void>;
}

interface State {
  readonly apiKey: string | undefined;
  readonly aws: SimAwsCredentials | undefined;
  readonly models: readonly string[];
  readonly startupKnobs: Knobs;
  knobs: Knobs;
  readonly recorder: Recorder;
  /** Requests seen per `times` key. */
  readonly attempts: Map<string, number>;
  readonly google: GoogleTokens;
  readonly entraClient: EntraClient | undefined;
  /** Access tokens the fake Entra token endpoint issued. */
  readonly tokens: IssuedTokens;
}

function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.once("end", () => resolve(size > MAX_BODY_BYTES ? undefined : chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    req.once("error", reject);
    // After a complete body this is a no-op; before it, the client is gone.
    req.once("close", () => reject(new Error("request closed before its body ended")));
  });
}

/** The API key the caller presented, if any. */
function presentedKey(req: IncomingMessage): string | undefined {
  const auth = req.headers.authorization;
  if (auth !== undefined && /^bearer\s/i.test(auth)) return auth.slice(7).trim();
  const key = req.headers["x-api-key"];
  return typeof key === "string" ? key : undefined;
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

function controlError(res: ServerResponse, status: number, message: string): void {
  sendJson(res, status, { error: { message, type: "invalid_request_error", param: null, code: null } });
}

/** Whether this request's `status`/`fault` knobs apply, counting it against `times`. */
function faultApplies(state: State, knobs: Knobs, model: string | undefined, seed: number): boolean {
  if (knobs.status === undefined && knobs.fault === undefined) return false;
  if (knobs.onlyModel !== undefined && knobs.onlyModel !== model) return false;
  if (knobs.times === undefined) return true;
  const key = knobs.key ?? seed.toString(16);
  if (state.attempts.size >= MAX_TIMES_KEYS && !state.attempts.has(key)) state.attempts.clear();
  const seen = (state.attempts.get(key) ?? 0) + 1;
  state.attempts.set(key, seen);
  return seen <= knobs.times;
}

/** This request's knobs on `path`, or `undefined` once a bad knob was answered with a 400. */
function requestKnobs(state: State, ex: Exchange, envelope: WireFormat, path: string, directiveText: string): Knobs | undefined {
  try {
    return knobsForPath(resolveRequestKnobs(state.knobs, directiveText, ex.req.headers), path);
  } catch (error) {
    if (!(error instanceof KnobError)) throw error;
    ex.error(envelope, knobRejection(error), "rejected");
    return undefined;
  }
}

async function handleGeneration(state: State, ex: Exchange, format: WireFormat, body: unknown, malformed: boolean): Promise<void> {
  if (malformed) return ex.error(format, format.malformedJson(), "rejected");
  const parsed = format.parse(body);
  if (!parsed.ok) return ex.error(format, parsed.error, "rejected");
  const request = parsed.request;
  const knobs = requestKnobs(state, ex, format, format.path, request.directiveText);
  if (knobs === undefined) return;
  const seed = conversationHash(request.messages);
  await serveGeneration(ex, format, request, knobs, seed, faultApplies(state, knobs, request.model, seed));
}

async function handleJson(state: State, ex: Exchange, endpoint: JsonEndpoint, body: unknown, malformed: boolean): Promise<void> {
  const envelope = endpoint.envelope ?? openaiChat;
  if (malformed) return ex.error(envelope, envelope.malformedJson(), "rejected");
  const parsed = endpoint.parse(body);
  if (!parsed.ok) return ex.error(envelope, parsed.error, "rejected");
  const call = parsed.call;
  const knobs = requestKnobs(state, ex, envelope, endpoint.path, call.directiveText);
  if (knobs === undefined) return;
  await serveJson(ex, envelope, knobs, faultApplies(state, knobs, call.model, call.seed), (omitUsage) => call.render(omitUsage));
}

/**
 * Who may call a Gemini route: the Gemini API takes the key in `x-goog-api-key` (or `?key=`) or a
 * bearer token the token endpoint issued;
 * Vertex a bearer token the token endpoint issued and has not expired (or the instance key).
 */
function geminiAuthError(state: State, req: IncomingMessage, route: GeminiRoute, query: string): SimError | undefined {
  if (route.mode === "gemini-api") {
    // A service account's token is accepted too, as the Gemini API accepts OAuth tokens.
    const auth = req.headers.authorization;
    if (auth !== undefined && /^bearer\s/i.test(auth) && state.google.valid(auth.slice(7).trim())) return undefined;
    if (state.apiKey === undefined) return undefined;
    const header = req.headers["x-goog-api-key"];
    const given = typeof header === "string" ? header : (new URLSearchParams(query).get("key") ?? undefined);
    return given === state.apiKey ? undefined : geminiFormat(route, "").authError(given);
  }
  if (state.apiKey === undefined && !state.google.enabled) return undefined;
  const auth = req.headers.authorization;
  const token = auth !== undefined && /^bearer\s/i.test(auth) ? auth.slice(7).trim() : undefined;
  if (token !== undefined && (token === state.apiKey || state.google.valid(token))) return undefined;
  return vertexAuthError(token);
}

async function handleGemini(state: State, ex: Exchange, route: GeminiRoute, path: string, query: string, body: unknown, malformed: boolean): Promise<void> {
  const format = geminiFormat(route, path);
  ex.idHeader = format.requestIdHeader;
  const denied = geminiAuthError(state, ex.req, route, query);
  if (denied !== undefined) return ex.error(format, denied, "rejected");
  if (route.stream && !route.sse) {
    return ex.error(format, { status: 400, kind: "invalid_request", message: "The simulator serves streamGenerateContent with alt=sse only.", param: null, code: null }, "rejected");
  }
  return handleGeneration(state, ex, format, body, malformed);
}

/** Bedrock Converse: SigV4 instead of an API key, the model and operation from the path. */
async function handleBedrock(state: State, ex: Exchange, raw: Buffer, body: unknown, malformed: boolean, route: { model: string; stream: boolean }): Promise<void> {
  const format = bedrockConverse(route.model, route.stream);
  ex.idHeader = format.requestIdHeader;
  if (state.aws !== undefined) {
    const refused = verifySigV4(ex.req.method ?? "POST", ex.req.url ?? "/", ex.req.headers, raw, state.aws, Date.now());
    if (refused !== undefined) return ex.error(format, refused, "rejected");
  }
  return handleGeneration(state, ex, format, body, malformed);
}

/** Routes of the provider API and of MCP (everything outside `/__sim/` and `/health`). */
async function handleApi(state: State, req: IncomingMessage, res: ServerResponse, path: string, query: string): Promise<void> {
  const raw = await readBody(req);
  if (raw === undefined) {
    state.recorder.request(req.method ?? "", path, query, req.headers, null);
    state.recorder.outcome("rejected");
    controlError(res, 413, `Request body larger than ${MAX_BODY_BYTES} bytes.`);
    return;
  }
  let body: unknown = null;
  let malformed = false;
  if (raw.length > 0) {
    const text = raw.toString("utf8");
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
      malformed = true;
    }
  }
  const tokenRequest = req.method === "POST" && (ENTRA_TOKEN_PATH.test(path) || path === TOKEN_PATH);
  // The client secret and the signed assertion stay out of the request history.
  state.recorder.request(req.method ?? "", path, query, req.headers, tokenRequest ? redactedForm(raw) : body);
  const ex = new Exchange(req, res, state.recorder);
  if (tokenRequest && path !== TOKEN_PATH) return handleEntraToken(state, ex, path, raw);
  const azure = req.method === "POST" ? azureRoute(path, query) : undefined;
  if (azure !== undefined) {
    ex.idHeader = azureEnvelope.requestIdHeader;
    if ("error" in azure) return ex.error(azureEnvelope, azure.error, "rejected");
    const format = azureOpenaiChat(azure.deployment);
    const authError = azureAuthError(state, req);
    if (authError !== undefined) return ex.error(format, authError, "rejected");
    return handleGeneration(state, ex, format, body, malformed);
  }
  if (req.method === "GET" && path === "/openai/models") {
    // Azure's model list: the resource's models, behind the same key and API version.
    ex.idHeader = azureEnvelope.requestIdHeader;
    if (!new URLSearchParams(query).has("api-version")) return ex.error(azureEnvelope, { status: 404, kind: "not_found", message: "Resource not found", param: null, code: "404" }, "rejected");
    const authError = azureAuthError(state, req);
    if (authError !== undefined) return ex.error(azureEnvelope, authError, "rejected");
    return ex.json(200, renderModelList(state.models), "completed");
  }
  if (path === MCP_PATH) {
    if (state.apiKey !== undefined && presentedKey(req) !== state.apiKey) return mcpUnauthorized(ex);
    return serveMcp(ex, body, malformed);
  }
  if (req.method === "POST" && path === TOKEN_PATH) {
    const answer = await state.google.grant(req, raw.toString("utf8"));
    return ex.json(answer.status, JSON.stringify(answer.body), answer.status === 200 ? "completed" : "rejected");
  }
  if (req.method === "GET" && path === "/v1beta/models") {
    // The Gemini API's model list: behind the same key, non-billable (what a health probe asks).
    const route: GeminiRoute = { mode: "gemini-api", model: "", stream: false, sse: false };
    const format = geminiFormat(route, path);
    ex.idHeader = format.requestIdHeader;
    const denied = geminiAuthError(state, req, route, query);
    if (denied !== undefined) return ex.error(format, denied, "rejected");
    return ex.json(200, renderGeminiModelList(state.models), "completed");
  }
  const gemini = req.method === "POST" ? geminiRoute(path, query) : undefined;
  if (gemini !== undefined) return handleGemini(state, ex, gemini, path, query, body, malformed);
  const bedrock = req.method === "POST" ? bedrockRoute(path) : undefined;
  if (bedrock !== undefined) return handleBedrock(state, ex, raw, body, malformed, bedrock);
  const route = req.method === "POST" ? FORMATS.get(path) : undefined;
  const endpoint = req.method === "POST" ? JSON_ENDPOINTS.get(path) : undefined;
  const format = route ?? (endpoint === undefined ? envelopeFor(req) : (endpoint.envelope ?? openaiChat));
  ex.idHeader = format.requestIdHeader;

  if (state.apiKey !== undefined) {
    const given = presentedKey(req);
    if (given !== state.apiKey) return ex.error(format, format.authError(given), "rejected");
  }
  const headerError = format.checkHeaders?.(req.headers);
  if (headerError !== undefined) return ex.error(format, headerError, "rejected");

  if (route !== undefined) return handleGeneration(state, ex, route, body, malformed);
  if (endpoint !== undefined) return handleJson(state, ex, endpoint, body, malformed);
  const anthropic = format === anthropicMessages;
  if (req.method === "GET" && path === "/v1/models") {
    if (!anthropic) return ex.json(200, renderModelList(state.models), "completed");
    const list = renderAnthropicModelList(state.models, new URLSearchParams(query));
    return typeof list === "string" ? ex.json(200, list, "completed") : ex.error(format, list, "rejected");
  }
  if (req.method === "GET" && path.startsWith("/v1/models/")) {
    const id = decodeURIComponent(path.slice("/v1/models/".length));
    if (state.models.includes(id)) return ex.json(200, anthropic ? renderAnthropicModel(id) : renderModel(id), "completed");
    return ex.error(format, anthropic ? anthropicModelNotFound(id) : modelNotFound(id), "rejected");
  }
  const notFound: SimError = {
    status: 404,
    kind: "not_found",
    message: anthropic ? "Not Found" : `Invalid URL (${req.method ?? ""} ${path})`,
    param: null,
    code: null,
  };
  ex.error(format, notFound, "rejected");
}

/**
 * Azure's check of a deployment request: a bearer token must be one the fake Entra endpoint
 * issued and still valid; otherwise the `api-key` header must match the configured key (any,
 * when none is configured).
 */
function azureAuthError(state: State, req: IncomingMessage): SimError | undefined {
  const auth = req.headers.authorization;
  if (auth !== undefined && /^bearer\s/i.test(auth)) {
    if (state.tokens.valid(auth.slice(7).trim())) return undefined;
    return { status: 401, kind: "authentication", message: "Unauthorized. Access token is missing, invalid, audience is incorrect (https://cognitiveservices.azure.com), or have expired.", param: null, code: "401" };
  }
  if (state.apiKey === undefined || req.headers["api-key"] === state.apiKey) return undefined;
  return azureOpenaiChat("").authError(undefined);
}

/** A token request's form as recorded: every field but the client secret and the assertion. */
function redactedForm(raw: Buffer): Record<string, string> {
  const form = Object.fromEntries(new URLSearchParams(raw.toString("utf8")));
  if ("client_secret" in form) form["client_secret"] = "[redacted]";
  if ("assertion" in form) form["assertion"] = "[redacted]";
  return form;
}

/**
 * The fake Entra ID token endpoint. The status and fault knobs apply to it only when `only-path`
 * names its path, so a chat's fault never fails the token mint that precedes it.
 */
async function handleEntraToken(state: State, ex: Exchange, path: string, raw: Buffer): Promise<void> {
  let knobs: Knobs;
  try {
    knobs = resolveRequestKnobs(state.knobs, "", ex.req.headers);
  } catch (error) {
    if (!(error instanceof KnobError)) throw error;
    return ex.json(400, JSON.stringify({ error: "invalid_request", error_description: error.message }), "rejected");
  }
  if (knobs.onlyPath === path) {
    if (knobs.latencyMs > 0 && !(await ex.sleep(knobs.latencyMs))) return;
    if (faultApplies(state, knobs, undefined, 0)) {
      if (knobs.fault === "reset-before-headers") return ex.reset("faulted");
      const status = knobs.status ?? 503;
      return ex.json(status, JSON.stringify({ error: "temporarily_unavailable", error_description: "AADSTS50196: The server is temporarily unavailable (simulated)." }), "faulted");
    }
  }
  const answer = entraTokenAnswer(new URLSearchParams(raw.toString("utf8")), state.entraClient, state.tokens, knobs.tokenExpiresIn);
  ex.json(answer.status, JSON.stringify(answer.body), answer.status === 200 ? "completed" : "rejected");
}

/** `/health` and `/__sim/*`: never recorded, never authenticated. */
async function handleControl(state: State, req: IncomingMessage, res: ServerResponse, path: string, query: string): Promise<void> {
  const raw = await readBody(req);
  const route = `${req.method ?? ""} ${path}`;
  switch (route) {
    case "GET /health":
      return sendJson(res, 200, { status: "ok" });
    case "GET /__sim/stats":
      return sendJson(res, 200, state.recorder.snapshot());
    case "GET /__sim/requests": {
      const limitText = new URLSearchParams(query).get("limit");
      const limit = limitText === null ? Infinity : Number(limitText);
      if (!(limit >= 0)) return controlError(res, 400, "limit must be a non-negative number");
      return sendJson(res, 200, { requests: state.recorder.recent(limit) });
    }
    case "POST /__sim/reset":
      state.recorder.reset();
      state.attempts.clear();
      state.google.reset();
      return sendJson(res, 200, { reset: true });
    case "GET /__sim/config":
      return sendJson(res, 200, knobsToSettings(state.knobs));
    case "PUT /__sim/config": {
      let settings: unknown;
      try {
        settings = JSON.parse(raw === undefined || raw.length === 0 ? "{}" : raw.toString("utf8"));
      } catch {
        return controlError(res, 400, "config body must be a JSON object of knob settings");
      }
      if (typeof settings !== "object" || settings === null || Array.isArray(settings)) {
        return controlError(res, 400, "config body must be a JSON object of knob settings");
      }
      try {
        state.knobs = resolveSettings(state.startupKnobs, settings as Record<string, unknown>);
      } catch (error) {
        if (error instanceof KnobError) return controlError(res, 400, error.message);
        throw error;
      }
      return sendJson(res, 200, knobsToSettings(state.knobs));
    }
    case "PUT /__sim/google-token": {
      let settings: unknown;
      try {
        settings = JSON.parse(raw === undefined || raw.length === 0 ? "{}" : raw.toString("utf8"));
      } catch {
        settings = undefined;
      }
      if (typeof settings !== "object" || settings === null || Array.isArray(settings)) return controlError(res, 400, "google-token body must be a JSON object");
      try {
        return sendJson(res, 200, state.google.configure(settings as Record<string, unknown>));
      } catch (error) {
        return controlError(res, 400, (error as Error).message);
      }
    }
    case "GET /__sim/google-token":
      return sendJson(res, 200, { ...state.google.knobs, granted: state.google.granted });
    case "DELETE /__sim/google-token":
      return sendJson(res, 200, { revoked: state.google.revoke() });
    default:
      return controlError(res, 404, `Unknown simulator endpoint: ${route}`);
  }
}

function handle(state: State, req: IncomingMessage, res: ServerResponse): void {
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  const path = q === -1 ? url : url.slice(0, q);
  const query = q === -1 ? "" : url.slice(q + 1);
  const handler = path === "/health" || path.startsWith("/__sim/") ? handleControl : handleApi;
  handler(state, req, res, path, query).catch(() => {
    // A read or write failed, almost always because the peer vanished; nothing to answer.
    if (!res.headersSent && !res.destroyed) controlError(res, 500, "simulator internal error");
    else res.destroy();
  });
}

/** Starts a simulator; resolves once it is listening. */
export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const startupKnobs = resolveSettings(BASE_KNOBS, options.knobs ?? {});
  const state: State = {
    apiKey: options.apiKey,
    aws: options.aws,
    models: options.models ?? DEFAULT_MODELS,
    startupKnobs,
    knobs: startupKnobs,
    recorder: new Recorder(options.history ?? 200),
    attempts: new Map(),
    google: new GoogleTokens(options.googleServiceAccounts),
    entraClient: options.entraClient,
    tokens: new IssuedTokens(),
  };
  const server: Server = createServer((req, res) => handle(state, req, res));
  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  let closing: Promise<void> | undefined;
  return {
    url,
    port,
    close() {
      closing ??= new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
