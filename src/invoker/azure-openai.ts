import type { HttpBackend } from "../snapshot/normalize.ts";

/**
 * An Azure OpenAI backend's address for one request: its endpoint, the deployment (the pool
 * member's `model`), the operation's path and the backend's API version
 * (`{baseUrl}/openai/deployments/{deployment}/chat/completions?api-version=…`).
 */
export function azureOpenAiUrl(backend: HttpBackend, deployment: string, path: string): string {
  // The schema requires apiVersion for this protocol; a snapshot without one is refused there.
  const version = encodeURIComponent(backend.apiVersion ?? "");
  return `${backend.baseUrl}/openai/deployments/${encodeURIComponent(deployment)}${path}?api-version=${version}`;
}
