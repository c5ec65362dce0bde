/**
 * A backend may declare the `logprobs` capability only when its protocol's codec asks for and
 * reads log-probabilities: otherwise the capability check would route a cascade's steps to it
 * and every step would come back without a score. The snapshot is refused, naming the backend
 * and its protocol; which protocols carry them is each codec's own flag, read through the
 * snapshot context.
 */
import { describe, expect, it } from "vitest";
import { BACKEND_PROTOCOL_IDS, type BackendProtocolId } from "../../../src/protocol/codec.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { normalizeSnapshot, type SnapshotContext } from "../../../src/snapshot/normalize.ts";

/** One backend of each protocol that the loader takes as it is. */
const BACKENDS: Record<BackendProtocolId, Record<string, unknown>> = {
  "openai-chat": { protocol: "openai-chat", baseUrl: "https://api.openai.com/v1", credential: { secret: "OPENAI_API_KEY" } },
  "openai-responses": { protocol: "openai-responses", baseUrl: "https://api.openai.com/v1", credential: { secret: "OPENAI_API_KEY" } },
  "anthropic-messages": { protocol: "anthropic-messages", baseUrl: "https://api.anthropic.com/v1", credential: { secret: "ANTHROPIC_API_KEY", scheme: "x-api-key" } },
  "workers-ai": { protocol: "workers-ai", binding: "AI" },
  "azure-openai": { protocol: "azure-openai", baseUrl: "https://contoso.openai.azure.com", apiVersion: "2024-10-21", credential: { secret: "AZURE_OPENAI_API_KEY", scheme: "api-key" } },
  "bedrock-converse": {
    protocol: "bedrock-converse",
    baseUrl: "https://bedrock-runtime.us-east-1.amazonaws.com",
    region: "us-east-1",
    awsCredential: { accessKeyId: "AWS_ACCESS_KEY_ID", secretAccessKey: "AWS_SECRET_ACCESS_KEY" },
  },
  gemini: { protocol: "gemini", baseUrl: "https://generativelanguage.googleapis.com", credential: { secret: "GEMINI_API_KEY", scheme: "x-goog-api-key" } },
};

const snapshot = (protocol: BackendProtocolId, capabilities: readonly string[]) => ({
  version: 1,
  backends: [{ name: "be", ...BACKENDS[protocol], capabilities }],
  pools: [{ name: "p", members: [{ backend: "be", model: "m" }] }],
});

const ctx: SnapshotContext = { supportedProtocols: builtinCodecs.ids(), logprobsProtocols: builtinCodecs.logprobsIds(), requirements: [], egress: { allow: [] } };

describe("the logprobs capability", () => {
  it("is carried by the OpenAI Chat wire (and Azure OpenAI's, the same wire) and by no other codec", () => {
    expect([...builtinCodecs.logprobsIds()].sort()).toEqual(["azure-openai", "openai-chat"]);
    for (const id of BACKEND_PROTOCOL_IDS) expect(builtinCodecs.logprobsIds().has(id)).toBe(builtinCodecs.backend(id)!.logprobs);
  });

  it.each(BACKEND_PROTOCOL_IDS.map((protocol) => ({ protocol })))("on a $protocol backend is taken exactly when its codec carries it", async ({ protocol }) => {
    // Without logprobs, every example is a valid backend: a refusal below is the capability's.
    const plain = await normalizeSnapshot(snapshot(protocol, ["chat"]), ctx);
    expect(plain.ok ? [] : plain.reasons).toEqual([]);
    const r = await normalizeSnapshot(snapshot(protocol, ["chat", "logprobs"]), ctx);
    if (builtinCodecs.backend(protocol)!.logprobs) {
      expect(r.ok ? [] : r.reasons).toEqual([]);
      return;
    }
    expect(r.ok ? [] : r.reasons).toEqual([
      {
        code: "capability_not_carried",
        path: "backends[0].capabilities",
        message: `backend "be" declares logprobs, but protocol ${protocol} carries no log-probabilities (only azure-openai, openai-chat do): remove logprobs from its capabilities`,
      },
    ]);
  });

  it("follows the codecs the build registers, not a list of protocol names", async () => {
    // A build whose Anthropic codec carried them would take the same backend.
    const r = await normalizeSnapshot(snapshot("anthropic-messages", ["chat", "logprobs"]), { ...ctx, logprobsProtocols: new Set(["anthropic-messages"]) });
    expect(r.ok).toBe(true);
    const none = await normalizeSnapshot(snapshot("openai-chat", ["chat", "logprobs"]), { ...ctx, logprobsProtocols: new Set() });
    expect(none.ok ? [] : none.reasons.map((x) => x.message)).toEqual(['backend "be" declares logprobs, but protocol openai-chat carries no log-probabilities: remove logprobs from its capabilities']);
  });

  it("is reported with every other reason of the snapshot", async () => {
    const s = snapshot("bedrock-converse", ["chat", "logprobs"]);
    s.pools[0]!.members.push({ backend: "ghost", model: "m" });
    const r = await normalizeSnapshot(s, ctx);
    expect(r.ok ? [] : r.reasons.map((x) => x.code)).toEqual(["capability_not_carried", "unknown_backend"]);
  });
});
