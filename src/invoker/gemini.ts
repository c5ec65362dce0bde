import { GatewayError } from "../errors/gateway-error.ts";
import { geminiPath, type GeminiEndpoint, type GoogleError } from "../protocol/gemini/endpoint.ts";
import type { HttpBackend } from "../snapshot/normalize.ts";
import { upstreamAuthFailed } from "./upstream-error.ts";
import type { StatusFailure } from "./workers-ai-binding.ts";

/** A gemini backend's endpoint mode: Vertex AI when it names a project (the schema pairs it with a location), else the Gemini API. */
export function geminiEndpoint(backend: HttpBackend): GeminiEndpoint {
  return backend.project !== undefined ? { mode: "vertex", project: backend.project, location: backend.location ?? "" } : { mode: "gemini-api" };
}

/**
 * A gemini backend's address for one call: its base URL, then the endpoint mode's path to the
 * model's `generateContent` (or `streamGenerateContent?alt=sse`).
 */
export function geminiUrl(backend: HttpBackend, model: string, stream: boolean): string {
  return `${backend.baseUrl}${geminiPath(geminiEndpoint(backend), model, stream)}`;
}

/** A gemini backend's health probe address: the Gemini API's model list is under its version prefix. */
export function geminiProbeUrl(backend: HttpBackend, path: string): string {
  return `${backend.baseUrl}/v1beta${path}`;
}

/**
 * ErrorInfo reasons that say the gateway's own key was refused, though Google answers them with a
 * 400 `INVALID_ARGUMENT` like a bad request (the Gemini API's answer to an unknown or revoked key).
 */
const CREDENTIAL_REASONS: ReadonlySet<string> = new Set(["API_KEY_INVALID"]);

/**
 * Google errors whose meaning differs from their status's usual one, else undefined (the status
 * decides: `RESOURCE_EXHAUSTED` 429 and `UNAVAILABLE` 503 are refusals before any work).
 *
 * - 401 `UNAUTHENTICATED`, 403 `PERMISSION_DENIED` and a 400 whose ErrorInfo reason is
 *   `API_KEY_INVALID`: the gateway's credential was refused, never the caller's request:
 *   `upstream_auth_failed`, with the client-error evidence a 4xx has: no retry with the same credential helps.
 *   The reason is read from the structured detail, never from the message.
 */
export function geminiStatusFailure(status: number, google: GoogleError, detail: string): StatusFailure | undefined {
  const credential = status === 401 || status === 403 || (status === 400 && (google.reasons ?? []).some((r) => CREDENTIAL_REASONS.has(r)));
  if (!credential) return undefined;
  return {
    error: upstreamAuthFailed({ status, googleStatus: google.status, reasons: google.reasons, detail: detail.slice(0, 2000) }),
    evidence: { class: "client_error", reason: "status_client_error", status },
    outcome: "upstream_status",
  };
}
