/**
 * backends.yaml: a `gemini` backend is the Gemini API (an API key in `x-goog-api-key`, or a
 * service account) or Vertex AI (a project and a location, and a service account); what does not
 * fit its mode is refused with the key it names, and no other protocol takes its fields.
 */
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/load-config.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { normalizeSnapshot } from "../../../src/snapshot/normalize.ts";
import { issuesOf } from "../support/config-issues.ts";
import { bundled, textsWith } from "../support/fixtures.ts";

const geminiApi = (over: Record<string, unknown> = {}) => ({
  name: "gemini",
  protocol: "gemini",
  baseUrl: "https://generativelanguage.googleapis.com",
  credential: { secret: "GEMINI_API_KEY", scheme: "x-goog-api-key" },
  capabilities: ["chat", "streaming"],
  ...over,
});
const vertex = (over: Record<string, unknown> = {}) => ({
  name: "vertex",
  protocol: "gemini",
  baseUrl: "https://us-central1-aiplatform.googleapis.com",
  project: "acme-prod",
  location: "us-central1",
  credential: { kind: "google-service-account", secret: "GOOGLE_SERVICE_ACCOUNT_JSON" },
  capabilities: ["chat", "streaming"],
  ...over,
});

function backendsWith(backend: Record<string, unknown>) {
  const b = bundled("backends");
  b.backends.push(backend);
  b.pools.push({ name: "gemini-pool", members: [{ backend: backend.name, model: "gemini-2.5-flash" }] });
  return b;
}
const issues = (backend: Record<string, unknown>) =>
  issuesOf(() => loadConfig(textsWith({ backends: backendsWith(backend) }))).map((i) => ({ path: i.path, message: i.message }));
const seeded = (backend: Record<string, unknown>) => loadConfig(textsWith({ backends: backendsWith(backend) })).backendsSeed.backends.find((x) => x.name === backend.name)!;

describe("a gemini backend in backends.yaml", () => {
  it("is accepted on the Gemini API with an API key, and on Vertex AI with a project, a location and a service account", () => {
    expect(seeded(geminiApi())).toMatchObject({ protocol: "gemini", baseUrl: "https://generativelanguage.googleapis.com", credential: { secret: "GEMINI_API_KEY", scheme: "x-goog-api-key" } });
    expect(seeded(geminiApi()).project).toBeUndefined();
    expect(seeded(vertex())).toMatchObject({
      project: "acme-prod",
      location: "us-central1",
      credential: { kind: "google-service-account", secret: "GOOGLE_SERVICE_ACCOUNT_JSON", scope: "https://www.googleapis.com/auth/cloud-platform" },
    });
    // The global location at the global host; a service account on the Gemini API; a token URL override.
    expect(seeded(vertex({ baseUrl: "https://aiplatform.googleapis.com", location: "global" }))).toMatchObject({ location: "global" });
    expect(seeded(geminiApi({ credential: { kind: "google-service-account", secret: "SA", tokenUrl: "https://oauth2.googleapis.com/token", scope: "https://www.googleapis.com/auth/generative-language" } }))).toMatchObject({
      credential: { kind: "google-service-account", tokenUrl: "https://oauth2.googleapis.com/token" },
    });
  });

  it("refuses a key scheme the Gemini API does not take, an API key on Vertex AI (express mode) and an Entra application", () => {
    expect(issues(geminiApi({ credential: { secret: "K" } }))).toEqual([{ path: "backends[1].credential", message: "the Gemini API takes its key in x-goog-api-key (scheme: x-goog-api-key), not bearer" }]);
    expect(issues(vertex({ credential: { secret: "K", scheme: "x-goog-api-key" } }))).toEqual([
      { path: "backends[1].credential", message: "a gemini backend on Vertex AI is called with a service account's token (kind: google-service-account); API keys (Vertex AI express mode) are not supported" },
    ]);
    expect(issues(geminiApi({ credential: { kind: "entra", tenantId: "t", clientId: "c", secret: "S" } })).map((i) => i.path)).toEqual(["backends[1].credential"]);
  });

  it("needs the project and the location together, and checks Google's hosts against the mode", () => {
    const { location: _l, ...noLocation } = vertex();
    expect(issues(noLocation)).toEqual([{ path: "backends[1].location", message: "a gemini backend on Vertex AI names its location with its project (location: us-central1, or global)" }]);
    const { project: _p, ...noProject } = vertex();
    expect(issues(noProject).map((i) => i.path)).toEqual(["backends[1].project"]);
    const { project: _q, location: _m, ...neither } = vertex();
    expect(issues(neither)).toEqual([{ path: "backends[1].project", message: "us-central1-aiplatform.googleapis.com is Vertex AI: name the project and location (project: my-project, location: us-central1)" }]);
    expect(issues(vertex({ location: "europe-west4" }))).toEqual([{ path: "backends[1].location", message: "us-central1-aiplatform.googleapis.com serves location us-central1, not europe-west4" }]);
    expect(issues(geminiApi({ project: "acme-prod", location: "us-central1", credential: { kind: "google-service-account", secret: "SA" } }))).toEqual([
      { path: "backends[1].project", message: "generativelanguage.googleapis.com is the Gemini API, which names no project or location: remove them, or point baseUrl at Vertex AI" },
    ]);
    expect(issues(geminiApi({ baseUrl: "https://generativelanguage.googleapis.com/v1beta" })).map((i) => i.path)).toEqual(["backends[1].baseUrl"]);
    expect(issues(vertex({ baseUrl: "https://aiplatform.googleapis.com", project: "Acme Prod", location: "US" })).map((i) => i.path)).toEqual(["backends[1].project", "backends[1].location"]);
  });

  it("refuses a health probe with a service account, whose token is minted per request", () => {
    expect(issues(vertex({ healthCheck: {} }))).toEqual([
      { path: "backends[1].healthCheck", message: "active health probes send a stored secret; a google-service-account credential's token is minted per request, so probe this backend passively" },
    ]);
    // An API key is a stored secret: the Gemini API's model list can be probed with it.
    expect(seeded(geminiApi({ healthCheck: {} })).healthCheck).toMatchObject({ path: "/models" });
  });

  it("is refused on other protocols", () => {
    expect(issues({ name: "oai", protocol: "openai-chat", baseUrl: "https://api.openai.com/v1", project: "acme-prod", location: "us-central1", credential: { kind: "google-service-account", secret: "SA" }, capabilities: ["chat"] })).toEqual([
      { path: "backends[1].project", message: "project is for gemini backends on Vertex AI, not openai-chat" },
      { path: "backends[1].location", message: "location is for gemini backends on Vertex AI, not openai-chat" },
      { path: "backends[1].credential", message: "a google-service-account credential is for gemini backends, not openai-chat" },
    ]);
    expect(issues({ name: "edge", protocol: "workers-ai", binding: "AI", project: "acme-prod", capabilities: ["chat"] }).map((i) => i.path)).toEqual(["backends[1].project"]);
  });

  it("passes a token URL override through the egress guard at load, and gives another Vertex project another backend id", async () => {
    const ctx = { supportedProtocols: builtinCodecs.ids(), logprobsProtocols: builtinCodecs.logprobsIds(), requirements: [], egress: { allow: [] } };
    const snapshot = (backend: Record<string, unknown>) => ({ version: 1, backends: [backend], pools: [{ name: "p", members: [{ backend: backend.name, model: "gemini-2.5-flash" }] }] });
    const refused = await normalizeSnapshot(snapshot(vertex({ credential: { kind: "google-service-account", secret: "SA", tokenUrl: "http://10.0.0.1/token" } })), ctx);
    expect(refused.ok === false && refused.reasons.map((r) => [r.code, r.path])).toEqual([["url_not_allowed", "backends[0].credential.tokenUrl"]]);
    const a = await normalizeSnapshot(snapshot(vertex()), ctx);
    const b = await normalizeSnapshot(snapshot(vertex({ project: "acme-staging" })), ctx);
    if (!a.ok || !b.ok) throw new Error("expected both to normalize");
    expect(a.snapshot.backends[0]).toMatchObject({ project: "acme-prod", location: "us-central1" });
    expect(a.snapshot.backends[0]!.id).not.toBe(b.snapshot.backends[0]!.id);
    // A Gemini API backend records neither, so its digest is what it would be without them.
    const api = await normalizeSnapshot(snapshot(geminiApi()), ctx);
    expect(api.ok && "project" in api.snapshot.backends[0]!).toBe(false);
  });
});
