/**
 * Azure OpenAI's data plane: Chat Completions at a deployment's address
 * (`POST /openai/deployments/{deployment}/chat/completions?api-version=…`), OpenAI Chat's body
 * and answers with Azure's additions (content filter results, `apim-request-id`), Azure's error
 * envelope (`{error: {code, message}}`, the code a status string or a name), and its fake Entra
 * ID token endpoint (`POST /{tenant}/oauth2/v2.0/token`, the client credentials grant).
 */

import type { Completion, GenerationRequest, ParseResult, SimError, StreamScript, WireFormat } from "../wire-format.ts";
import { openaiChat } from "./openai-chat.ts";

/** The deployment's chat path; group 1 is the deployment name. */
const CHAT_PATH = /^\/openai\/deployments\/([^/]+)\/chat\/completions$/;

/** What Azure's API versions look like (`2024-10-21`, `2025-04-01-preview`). */
const API_VERSION = /^\d{4}-\d{2}-\d{2}(-preview)?$/;

/** The fake Entra ID token endpoint's path; group 1 is the tenant. */
export const ENTRA_TOKEN_PATH = /^\/([A-Za-z0-9.-]+)\/oauth2\/v2\.0\/token$/;

/** An Azure chat request's deployment and API version, or the error Azure answers with. */
export function azureRoute(path: string, query: string): { readonly deployment: string; readonly apiVersion: string } | { readonly error: SimError } | undefined {
  const m = CHAT_PATH.exec(path);
  if (m === null) return undefined;
  const apiVersion = new URLSearchParams(query).get("api-version");
  // Azure answers a request without an API version as an unknown resource.
  if (apiVersion === null) return { error: { status: 404, kind: "not_found", message: "Resource not found", param: null, code: "404" } };
  if (!API_VERSION.test(apiVersion)) return { error: { status: 400, kind: "invalid_request", message: "API version not supported", param: null, code: "BadRequest" } };
  return { deployment: decodeURIComponent(m[1]!), apiVersion };
}

/** Azure's quota refusal text. */
function rateLimitMessage(): string {
  return "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version have exceeded call rate limit of your current OpenAI S0 pricing tier. Please retry after 1 second. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit.";
}

/**
 * Azure's error envelope: the gateway-level refusals (auth, quota, routing) carry the status as
 * `code` and no `type`; the model's own validation errors keep OpenAI's fields.
 */
function renderError(error: SimError): string {
  if (error.kind === "invalid_request" && error.code !== "BadRequest") {
    return JSON.stringify({ error: { message: error.message, type: "invalid_request_error", param: error.param, code: error.code } });
  }
  const message = error.kind === "rate_limit" ? rateLimitMessage() : error.message;
  return JSON.stringify({ error: { code: error.kind === "rate_limit" ? "429" : (error.code ?? String(error.status)), message } });
}

function authError(): SimError {
  return {
    status: 401,
    kind: "authentication",
    message: "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.",
    param: null,
    code: "401",
  };
}

const FILTER_OK = { hate: { filtered: false, severity: "safe" }, self_harm: { filtered: false, severity: "safe" }, sexual: { filtered: false, severity: "safe" }, violence: { filtered: false, severity: "safe" } };

/** OpenAI's body with Azure's content filter results beside it. */
function renderBuffered(completion: Completion, request: GenerationRequest): string {
  const body = JSON.parse(openaiChat.renderBuffered(completion, request)) as Record<string, unknown> & { choices: Record<string, unknown>[] };
  for (const c of body.choices) c["content_filter_results"] = FILTER_OK;
  body["prompt_filter_results"] = [{ prompt_index: 0, content_filter_results: FILTER_OK }];
  delete body["service_tier"];
  return JSON.stringify(body);
}

/** OpenAI's chunks, after Azure's first chunk: no choices, only the prompt's filter results. */
function renderStream(completion: Completion, request: GenerationRequest): StreamScript {
  const script = openaiChat.renderStream(completion, request);
  const filters = `data: ${JSON.stringify({ choices: [], created: 0, id: "", model: "", object: "", prompt_filter_results: [{ prompt_index: 0, content_filter_results: FILTER_OK }] })}\n\n`;
  return { ...script, head: filters + script.head, error: (e, sent) => script.error(e, sent) };
}

/** The Azure OpenAI chat format for one deployment (the body names no model: the URL does). */
export function azureOpenaiChat(deployment: string): WireFormat {
  return {
    name: "azure-openai",
    path: `/openai/deployments/${encodeURIComponent(deployment)}/chat/completions`,
    requestIdHeader: "apim-request-id",
    heartbeat: openaiChat.heartbeat,
    parse(body: unknown): ParseResult {
      if (typeof body !== "object" || body === null || Array.isArray(body)) return openaiChat.parse(body);
      return openaiChat.parse({ ...body, model: deployment });
    },
    malformedJson: openaiChat.malformedJson,
    authError,
    renderError,
    renderBuffered,
    renderStream,
  };
}

/** The envelope of Azure answers outside one deployment (a missing API version). */
export const azureEnvelope: Pick<WireFormat, "renderError" | "authError" | "requestIdHeader"> = { renderError, authError, requestIdHeader: "apim-request-id" };

/**
 * Access tokens the fake token endpoint issued, with their expiry (epoch ms). Kept across
 * `POST /__sim/reset`, as an identity provider's tokens outlive a provider's request history.
 */
export class IssuedTokens {
  readonly #tokens = new Map<string, number>();

  issue(expiresInSeconds: number): string {
    if (this.#tokens.size >= 10_000) this.#tokens.clear();
    const token = `sim-entra-${crypto.randomUUID()}`;
    this.#tokens.set(token, Date.now() + expiresInSeconds * 1000);
    return token;
  }

  /** Whether the token was issued here and has not expired. */
  valid(token: string): boolean {
    const at = this.#tokens.get(token);
    return at !== undefined && Date.now() < at;
  }
}

/** The client the fake token endpoint accepts, when it checks one. */
export interface EntraClient {
  readonly clientId: string;
  readonly clientSecret: string;
}

/**
 * The token endpoint's answer to a form body: an access token for a client-credentials grant
 * from the configured client (any client when none is configured), else Entra's error shape.
 */
export function entraTokenAnswer(form: URLSearchParams, client: EntraClient | undefined, tokens: IssuedTokens, expiresIn: number): { readonly status: number; readonly body: unknown } {
  const fail = (status: number, error: string, description: string) => ({ status, body: { error, error_description: description, error_codes: [7000215], timestamp: new Date().toISOString(), trace_id: crypto.randomUUID(), correlation_id: crypto.randomUUID() } });
  if (form.get("grant_type") !== "client_credentials") return fail(400, "unsupported_grant_type", "AADSTS70003: The app requested an unsupported grant type.");
  const scope = form.get("scope");
  if (scope === null || !scope.endsWith("/.default")) return fail(400, "invalid_scope", "AADSTS1002012: The provided value for scope is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier.");
  if (client !== undefined && (form.get("client_id") !== client.clientId || form.get("client_secret") !== client.clientSecret)) {
    return fail(401, "invalid_client", "AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID.");
  }
  return { status: 200, body: { token_type: "Bearer", expires_in: expiresIn, ext_expires_in: expiresIn, access_token: tokens.issue(expiresIn) } };
}
