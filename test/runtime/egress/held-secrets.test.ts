import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { loadConfig } from "../../../src/config/load-config.ts";
import { heldSecretValues, secretNamesIn } from "../../../src/egress/held-secrets.ts";
import { passedResponseHeaders } from "../../../src/egress/response-headers.ts";
import { normalizeSnapshot } from "../../../src/snapshot/normalize.ts";
import { compilePublication } from "../../../src/publication/compile-publication.ts";
import { bundled, bundledTexts, textsWith } from "../support/fixtures.ts";

describe("the secrets the gateway holds", () => {
  it("names every secret gateway.yaml and the backends refer to, however deep, and an AWS credential's parts", async () => {
    const g = bundled("gateway");
    g.governance = { ...(g.governance ?? {}), approverTokenSecret: "APPROVER_TOKEN", approvals: { stateSecret: "APPROVAL_STATE" } };
    g.observability = { ...g.observability, otlp: { endpoint: "https://otel.example.com", headersSecret: "OTLP_HEADERS" } };
    const cfg = loadConfig(textsWith({ gateway: g }));
    const names = secretNamesIn(cfg.gateway);
    expect([...names].sort()).toEqual(["APPROVAL_STATE", "APPROVER_TOKEN", "OTLP_HEADERS", "SLUICE_ADMIN_TOKEN"]);
    const seed = parse(bundledTexts.backends) as { backends: Record<string, unknown>[] };
    seed.backends.push({ name: "bedrock", protocol: "bedrock-converse", baseUrl: "https://bedrock-runtime.us-east-1.amazonaws.com", region: "us-east-1", awsCredential: { accessKeyId: "AWS_ID", secretAccessKey: "AWS_SECRET", sessionToken: "AWS_SESSION" }, capabilities: ["chat"] });
    const r = await normalizeSnapshot(seed, { supportedProtocols: new Set(["openai-chat", "bedrock-converse"]), logprobsProtocols: new Set(["openai-chat"]), requirements: compilePublication(cfg.publication).poolRequirements, egress: cfg.gateway.security.egress });
    if (!r.ok) throw new Error(JSON.stringify(r.reasons));
    expect([...secretNamesIn(r.snapshot.backends)].sort()).toEqual(["AWS_ID", "AWS_SECRET", "AWS_SESSION", "SIMULATOR_API_KEY"]);
    // Values of those that are set, none empty.
    const env: Record<string, string> = { SLUICE_ADMIN_TOKEN: "admin-tok", SIMULATOR_API_KEY: "sim-key", AWS_ID: "AKIA123", AWS_SECRET: "", UNRELATED: "not-a-secret" };
    expect([...heldSecretValues([cfg.gateway, ...r.snapshot.backends], (n) => env[n])].sort()).toEqual(["AKIA123", "admin-tok", "sim-key"]);
  });

  it("keeps a passed header whose value holds none of them, and reads them only when a value would pass", () => {
    let reads = 0;
    const held = () => (reads++, ["sim-key"]);
    const headers = new Headers({ "x-request-id": "r-1", "x-echo": "token sim-key here" });
    expect(passedResponseHeaders(headers, ["x-request-id", "x-echo"], held)).toEqual({ "x-request-id": "r-1" });
    expect(reads).toBeGreaterThan(0);
    reads = 0;
    expect(passedResponseHeaders(headers, ["x-absent"], held)).toEqual({});
    expect(passedResponseHeaders(headers, undefined, held)).toEqual({});
    expect(reads).toBe(0);
  });
});
