import type { BackendCodec } from "../protocol/codec.ts";
import { geminiProbeUrl } from "./gemini.ts";
import type { NormalizedBackend } from "../snapshot/normalize.ts";
import type { ProbeTarget } from "../traffic/health.ts";

/**
 * The active probe for a backend with `healthCheck` configured: GET on a non-billable path, with
 * the protocol's own headers and the backend's credential by secret NAME (the monitor reads the
 * value from its own bindings at probe time; storage never holds it).
 */
export function probeTargetFor(backend: NormalizedBackend, codec: BackendCodec): ProbeTarget | undefined {
  const hc = backend.healthCheck;
  // A backend reached through a binding has no address to probe (its schema refuses a healthCheck).
  if (!hc || backend.baseUrl === undefined) return undefined;
  return {
    // Azure OpenAI's non-billable paths sit under `/openai` and need the API version too (the default `/models` lists the resource's models).
    // The Gemini API's sit under its version (`/v1beta/models` lists the models the key may call).
    url:
      backend.protocol === "azure-openai"
        ? `${backend.baseUrl}/openai${hc.path}?api-version=${encodeURIComponent(backend.apiVersion ?? "")}`
        : backend.protocol === "gemini"
          ? geminiProbeUrl(backend, hc.path)
          : `${backend.baseUrl}${hc.path}`,
    method: "GET",
    headers: { ...codec.upstreamHeaders, ...backend.headers, "accept-encoding": "identity" },
    // A minted credential's token (entra, google-service-account) is minted per request; its backends have no probe (the schema refuses one).
    ...(backend.credential && "scheme" in backend.credential ? { credential: { authorizationSecret: backend.credential.secret, scheme: backend.credential.scheme } } : {}),
    ...(backend.tls !== undefined ? { binding: backend.tls.binding } : {}),
    timeoutMs: hc.timeoutMs,
    intervalMs: hc.intervalMs,
    jitterRatio: 0.2,
  };
}
