/**
 * backends.yaml: a `bedrock-converse` backend names its region and the secrets of its AWS access
 * key; nothing else carries its authorization, and no other protocol takes either field.
 */
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/load-config.ts";
import { issuesOf } from "../support/config-issues.ts";
import { bundled, textsWith } from "../support/fixtures.ts";

const bedrock = (over: Record<string, unknown> = {}) => ({
  name: "bedrock-us",
  protocol: "bedrock-converse",
  baseUrl: "https://bedrock-runtime.us-east-1.amazonaws.com",
  region: "us-east-1",
  awsCredential: { accessKeyId: "AWS_ACCESS_KEY_ID", secretAccessKey: "AWS_SECRET_ACCESS_KEY" },
  capabilities: ["chat", "streaming"],
  ...over,
});

function backendsWith(backend: Record<string, unknown>) {
  const b = bundled("backends");
  b.backends.push(backend);
  b.pools.push({ name: "bedrock-pool", members: [{ backend: backend.name, model: "anthropic.claude-3-5-haiku-20241022-v1:0" }] });
  return b;
}
const issues = (backend: Record<string, unknown>) =>
  issuesOf(() => loadConfig(textsWith({ backends: backendsWith(backend) }))).map((i) => ({ path: i.path, message: i.message }));

describe("a bedrock-converse backend in backends.yaml", () => {
  it("is accepted with a region and an AWS key by secret names", () => {
    const seed = loadConfig(textsWith({ backends: backendsWith(bedrock({ awsCredential: { accessKeyId: "K", secretAccessKey: "S", sessionToken: "T" } })) })).backendsSeed;
    const b = seed.backends.find((x) => x.name === "bedrock-us")!;
    expect(b).toMatchObject({ protocol: "bedrock-converse", region: "us-east-1", awsCredential: { accessKeyId: "K", secretAccessKey: "S", sessionToken: "T" } });
    expect(b.credential).toBeUndefined();
  });

  it("needs its region and key, and refuses a bearer credential and a health probe, each with the reason", () => {
    const { region: _r, awsCredential: _k, ...bare } = bedrock();
    expect(issues(bare)).toEqual([
      { path: "backends[1].region", message: "protocol bedrock-converse signs every request with AWS SigV4: name the region (region: us-east-1)" },
      { path: "backends[1].awsCredential", message: "protocol bedrock-converse signs every request with AWS SigV4: name the secrets of the access key (awsCredential: {accessKeyId, secretAccessKey})" },
    ]);
    expect(issues(bedrock({ credential: { secret: "KEY" }, healthCheck: { path: "/x" } })).map((i) => i.path)).toEqual(["backends[1].credential", "backends[1].healthCheck"]);
  });

  it("refuses a malformed region and a key given as a value rather than a secret name", () => {
    expect(issues(bedrock({ region: "US East" })).map((i) => i.path)).toEqual(["backends[1].region"]);
    expect(issues(bedrock({ awsCredential: { accessKeyId: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG" } })).map((i) => i.path)).toEqual([
      "backends[1].awsCredential.secretAccessKey",
    ]);
  });

  it("is refused on other protocols", () => {
    expect(
      issues({ name: "oai", protocol: "openai-chat", baseUrl: "https://api.openai.com/v1", region: "us-east-1", awsCredential: { accessKeyId: "A", secretAccessKey: "B" }, capabilities: ["chat"] }),
    ).toEqual([
      { path: "backends[1].region", message: "region is for protocols signed with AWS SigV4 (bedrock-converse), not openai-chat" },
      { path: "backends[1].awsCredential", message: "awsCredential is for protocols signed with AWS SigV4 (bedrock-converse); protocol openai-chat takes a credential" },
    ]);
    expect(issues({ name: "edge", protocol: "workers-ai", binding: "AI", region: "us-east-1", capabilities: ["chat"] }).map((i) => i.path)).toEqual(["backends[1].region"]);
  });
});
