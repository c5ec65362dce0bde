/*
 * Where a Gemini backend is reached. The Gemini API (`generativelanguage.googleapis.com`) names
 * the model under `/v1beta/models/`; Vertex AI names it under a project and a location, through
 * Google's publisher. Both take the same body; streaming is another method of the same resource
 * and answers server-sent events only when asked with `alt=sse`.
 */

/** How a Gemini backend is addressed: the Gemini API, or Vertex AI in a project and location. */
export type GeminiEndpoint = { readonly mode: "gemini-api" } | { readonly mode: "vertex"; readonly project: string; readonly location: string };

/** The path after the backend's base URL for one call (`generateContent`, or its streaming form). */
export function geminiPath(endpoint: GeminiEndpoint, model: string, stream: boolean): string {
  const method = stream ? "streamGenerateContent?alt=sse" : "generateContent";
  const m = encodeURIComponent(model);
  if (endpoint.mode === "gemini-api") return `/v1beta/models/${m}:${method}`;
  return `/v1/projects/${encodeURIComponent(endpoint.project)}/locations/${encodeURIComponent(endpoint.location)}/publishers/google/models/${m}:${method}`;
}

/** What a Google error body says: its canonical status, the `RetryInfo` delay and the `ErrorInfo` reasons, when present. */
export interface GoogleError {
  /** `RESOURCE_EXHAUSTED`, `UNAVAILABLE`, `INVALID_ARGUMENT`, `PERMISSION_DENIED`… */
  readonly status?: string | undefined;
  /** Whole seconds from `google.rpc.RetryInfo.retryDelay` (a Duration such as `"17s"` or `"0.5s"`). */
  readonly retryDelaySeconds?: number | undefined;
  /** `google.rpc.ErrorInfo.reason` of each detail that has one (`API_KEY_INVALID`…), in order. */
  readonly reasons?: readonly string[] | undefined;
}

const RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo";

/**
 * Reads Google's error envelope, `{ error: { code, message, status, details: [...] } }`, from an
 * error body's text; anything else reads as nothing. Bounded to an hour, like `retry-after`.
 */
export function readGoogleError(text: string): GoogleError {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return {};
  }
  // Some Google front ends answer a list holding one envelope.
  if (Array.isArray(body)) body = body[0];
  const error = typeof body === "object" && body !== null ? (body as { error?: unknown }).error : undefined;
  if (typeof error !== "object" || error === null) return {};
  const e = error as { status?: unknown; details?: unknown };
  const out: { status?: string; retryDelaySeconds?: number; reasons?: string[] } = {};
  if (typeof e.status === "string") out.status = e.status;
  if (Array.isArray(e.details)) {
    for (const d of e.details) {
      if (typeof d !== "object" || d === null) continue;
      // ErrorInfo is the detail with a `reason` (some front ends leave its `@type` out).
      const reason = (d as { reason?: unknown }).reason;
      if (typeof reason === "string" && reason.length <= 128) (out.reasons ??= []).push(reason);
      if ((d as Record<string, unknown>)["@type"] !== RETRY_INFO) continue;
      const delay = (d as { retryDelay?: unknown }).retryDelay;
      const m = typeof delay === "string" ? /^(\d+(?:\.\d+)?)s$/.exec(delay) : null;
      if (m) out.retryDelaySeconds = Math.min(3600, Math.ceil(Number(m[1])));
    }
  }
  return out;
}
