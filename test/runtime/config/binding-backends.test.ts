/**
 * backends.yaml: a `workers-ai` backend names its Worker binding instead of an address, and each
 * protocol's backend names exactly the fields of how it is reached, or the file says which field
 * is wrong and why. Such a backend normalizes to a stable id without a URL, past the egress guard.
 */
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/load-config.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { normalizeSnapshot } from "../../../src/snapshot/normalize.ts";
import { issuesOf } from "../support/config-issues.ts";
import { bundled, textsWith } from "../support/fixtures.ts";

const caps = ["chat", "streaming", "stream-usage", "tools", "embeddings"];
const workersAi = (over: Record<string, unknown> = {}) => ({ name: "edge", protocol: "workers-ai", binding: "AI", capabilities: caps, ...over });

/** The bundled backends with one more, used by a pool of its own. */
function backendsWith(backend: Record<string, unknown>) {
  const b = bundled("backends");
  b.backends.push(backend);
  b.pools.push({ name: "edge-pool", members: [{ backend: backend.name, model: "@cf/meta/llama-3.1-8b-instruct" }] });
  return b;
}
const issues = (backend: Record<string, unknown>) =>
  issuesOf(() => loadConfig(textsWith({ backends: backendsWith(backend) }))).map((i) => ({ path: i.path, message: i.message }));

describe("a workers-ai backend in backends.yaml", () => {
  it("is accepted with a binding, and keeps nothing an HTTP backend has", () => {
    const seed = loadConfig(textsWith({ backends: backendsWith(workersAi()) })).backendsSeed;
    const b = seed.backends.find((x) => x.name === "edge")!;
    expect(b).toMatchObject({ protocol: "workers-ai", binding: "AI", headers: {}, connectCheck: false });
    expect(b.baseUrl).toBeUndefined();
    expect(b.credential).toBeUndefined();
  });

  it("needs its binding, and says so", () => {
    const { binding: _, ...noBinding } = workersAi();
    expect(issues(noBinding)).toEqual([{ path: "backends[1].binding", message: "protocol workers-ai is reached through a Worker binding: name it (binding: AI) instead of a baseUrl" }]);
  });

  it("refuses every field of an HTTP backend, each with the reason", () => {
    const found = issues(
      workersAi({
        baseUrl: "https://api.cloudflare.com/client/v4",
        credential: { secret: "CF_TOKEN" },
        headers: { "x-extra": "1" },
        connectCheck: true,
        propagateTraceContext: true,
        healthCheck: { path: "/models" },
      }),
    );
    expect(found.map((i) => i.path).sort()).toEqual(["baseUrl", "connectCheck", "credential", "headers", "healthCheck", "propagateTraceContext"].map((k) => `backends[1].${k}`));
    expect(found.find((i) => i.path.endsWith(".baseUrl"))!.message).toMatch(/reached through a Worker binding, not a URL/);
    expect(found.find((i) => i.path.endsWith(".credential"))!.message).toMatch(/no credential is sent/);
  });

  it("takes a binding name, not anything else", () => {
    expect(issues(workersAi({ binding: "env.AI" }))).toEqual([{ path: "backends[1].binding", message: expect.stringContaining("a binding name") }]);
  });
});

describe("an HTTP backend in backends.yaml", () => {
  it("needs a baseUrl and refuses a binding, each said plainly", () => {
    const b = { name: "openai", protocol: "openai-chat", binding: "AI", capabilities: caps };
    expect(issues(b)).toEqual([
      { path: "backends[1].baseUrl", message: "protocol openai-chat is reached over HTTP: the backend needs a baseUrl" },
      { path: "backends[1].binding", message: expect.stringContaining("protocol openai-chat is reached at the backend's baseUrl") },
    ]);
  });
});

describe("normalizing a binding backend", () => {
  const ctx = { supportedProtocols: builtinCodecs.ids(), logprobsProtocols: builtinCodecs.logprobsIds(), requirements: [], egress: { allow: [] } };
  const source = (binding: string) => ({ version: 1, backends: [workersAi({ binding })], pools: [{ name: "p", members: [{ backend: "edge", model: "@cf/baai/bge-base-en-v1.5" }] }] });

  it("gives it a deterministic id from its binding, no URL, and skips the egress guard (there is no address)", async () => {
    const a = await normalizeSnapshot(source("AI"), ctx);
    const again = await normalizeSnapshot(source("AI"), ctx);
    const other = await normalizeSnapshot(source("AI_EU"), ctx);
    if (!a.ok || !again.ok || !other.ok) throw new Error("expected the snapshots to normalize");
    const b = a.snapshot.backends[0]!;
    expect(b).toEqual({ id: expect.stringMatching(/^be_[0-9a-f]{16}$/), name: "edge", protocol: "workers-ai", binding: "AI", capabilities: [...caps].sort(), headers: {}, responseHeaders: undefined });
    expect(again.snapshot.backends[0]!.id).toBe(b.id);
    expect(again.digest).toBe(a.digest);
    // Another binding is another physical backend.
    expect(other.snapshot.backends[0]!.id).not.toBe(b.id);
  });

  it("is refused by a build without the protocol", async () => {
    const r = await normalizeSnapshot(source("AI"), { ...ctx, supportedProtocols: new Set(["openai-chat"] as const) });
    expect(r).toMatchObject({ ok: false, reasons: [{ code: "unsupported_protocol", path: "backends[0].protocol" }] });
  });
});
