import { describe, expect, it } from "vitest";
import { generationsOf, readAgentCard, type AgentCardView } from "../../../src/protocol/a2a/agent-card.ts";
import { a2aConfigSchema } from "../../../src/config/a2a-agents-schema.ts";
import { REWRITTEN_NOTE, requestedCardShape, rewriteAgentCard, type CardRewrite } from "../../../src/a2a/card-rewrite.ts";
import { cardV03, cardV1 } from "./cards.ts";

function viewOf(raw: unknown): AgentCardView {
  const r = readAgentCard(raw);
  if (!r.ok) throw new Error(r.reasons.join("; "));
  return r.view;
}

const rewrite: CardRewrite = { agent: "echo", publicOrigin: "https://gw.example.com", skillVisible: () => true, security: { openIdConnectUrls: [] } };

describe("reading agent cards", () => {
  it("normalizes a 1.0 card: its generation, JSON-RPC URL, skills and capabilities", () => {
    const v = viewOf(cardV1());
    expect(v.shape).toBe("1.0");
    expect(v.jsonRpc).toEqual({ "1.0": "https://agent.test/rpc" });
    expect(generationsOf(v)).toEqual(["1.0"]);
    expect(v.skills.map((s) => s.id)).toEqual(["summarize", "translate"]);
    expect(v.streaming).toBe(true);
    expect(v.signed).toBe(true);
  });

  it("reads each JSON-RPC interface of a hybrid 1.0 card by its protocolVersion, the first of each generation winning", () => {
    const v = viewOf(
      cardV1({
        url: "https://ignored.test/",
        supportedInterfaces: [
          { url: "https://agent.test/rest", protocolBinding: "HTTP+JSON", protocolVersion: "1.0" },
          { url: "https://agent.test/rpc", protocolBinding: "JSONRPC", protocolVersion: "1.0" },
          { url: "https://agent.test/rpc-old", protocolBinding: "JSONRPC", protocolVersion: "0.3" },
          { url: "https://agent.test/rpc-second", protocolBinding: "JSONRPC", protocolVersion: "1.0.1" },
        ],
      }),
    );
    expect(v.jsonRpc).toEqual({ "1.0": "https://agent.test/rpc", "0.3": "https://agent.test/rpc-old" });
    expect(generationsOf(v)).toEqual(["1.0", "0.3"]);
  });

  it("normalizes a 0.3 card: its url when JSON-RPC is preferred, else a JSON-RPC additional interface", () => {
    expect(viewOf(cardV03()).jsonRpc).toEqual({ "0.3": "https://old-agent.test/rpc" });
    expect(viewOf(cardV03({ preferredTransport: "GRPC", additionalInterfaces: [{ url: "https://old-agent.test/jsonrpc", transport: "JSONRPC" }] })).jsonRpc).toEqual({ "0.3": "https://old-agent.test/jsonrpc" });
    expect(viewOf(cardV03({ preferredTransport: undefined })).jsonRpc).toEqual({ "0.3": "https://old-agent.test/rpc" });
  });

  it("refuses bad cards with every reason", () => {
    expect(readAgentCard([])).toEqual({ ok: false, reasons: ["an agent card is a JSON object"] });
    const missing = readAgentCard(cardV1({ name: "", skills: [{ id: "a", name: "A", description: "", tags: [] }, { id: "a", name: "B", description: "", tags: [] }] }));
    expect(missing.ok).toBe(false);
    if (!missing.ok) {
      expect(missing.reasons.some((r) => r.startsWith("name:"))).toBe(true);
      expect(missing.reasons).toContain('skills.1.id: duplicate skill id "a"');
    }
    const badUrl = readAgentCard(cardV1({ supportedInterfaces: [{ url: "ftp://agent.test/", protocolBinding: "JSONRPC", protocolVersion: "1.0" }] }));
    expect(badUrl.ok).toBe(false);
    const badVersion = readAgentCard(cardV03({ protocolVersion: "0.2.5" }));
    expect(badVersion.ok).toBe(false);
  });

  it("refuses a card the gateway could not reach over JSON-RPC in a version it speaks", () => {
    const grpcOnly = readAgentCard(cardV1({ supportedInterfaces: [{ url: "https://agent.test/", protocolBinding: "GRPC", protocolVersion: "1.0" }] }));
    expect(grpcOnly.ok).toBe(false);
    const future = readAgentCard(cardV1({ supportedInterfaces: [{ url: "https://agent.test/", protocolBinding: "JSONRPC", protocolVersion: "2.0" }] }));
    expect(future.ok).toBe(false);
    if (!future.ok) expect(future.reasons[0]).toMatch(/no JSON-RPC interface/);
  });
});

describe("the card the gateway serves", () => {
  it("a 1.0 card: the gateway's URL, JSON-RPC in the agent's version only, the gateway's schemes, no signatures, the note", () => {
    const served = rewriteAgentCard(viewOf(cardV1()), rewrite, "1.0");
    expect(served.supportedInterfaces).toEqual([{ url: "https://gw.example.com/a2a/echo", protocolBinding: "JSONRPC", protocolVersion: "1.0" }]);
    expect(Object.keys(served.securitySchemes as object)).toEqual(["sluiceApiKey", "sluiceApiKeyHeader"]);
    expect(JSON.stringify(served)).not.toContain("agentBearer");
    expect(JSON.stringify(served)).not.toContain("agent.test");
    expect(served.signatures).toBeUndefined();
    expect(served.description).toBe(`An echo agent.\n\n${REWRITTEN_NOTE}`);
    // Push notifications only when the gateway relays them; no extended card.
    expect(served.capabilities).toEqual({ streaming: true, pushNotifications: false, extendedAgentCard: false });
    expect(rewriteAgentCard(viewOf(cardV1()), { ...rewrite, pushNotifications: true }, "1.0").capabilities).toMatchObject({ pushNotifications: true });
    // A 1.0-only agent: a 0.3 caller gets the 1.0 card, never one claiming 0.3.
    expect(rewriteAgentCard(viewOf(cardV1()), rewrite, "0.3")).toEqual(served);
  });

  it("a 0.3 agent's card: the 0.3 shape for a 0.3 caller, a 1.0 card listing only 0.3 for a 1.0 caller", () => {
    const v = viewOf(cardV03());
    const old = rewriteAgentCard(v, rewrite, "0.3");
    expect(old).toMatchObject({ url: "https://gw.example.com/a2a/echo", preferredTransport: "JSONRPC", protocolVersion: "0.3.0" });
    expect(old.security).toEqual([{ sluiceApiKey: [] }, { sluiceApiKeyHeader: [] }]);
    expect(old.signatures).toBeUndefined();
    expect(old.additionalInterfaces).toBeUndefined();
    const modern = rewriteAgentCard(v, rewrite, "1.0");
    expect(modern.supportedInterfaces).toEqual([{ url: "https://gw.example.com/a2a/echo", protocolBinding: "JSONRPC", protocolVersion: "0.3" }]);
  });

  it("lists both versions only when the gateway speaks both for the agent", () => {
    const both = rewriteAgentCard(viewOf(cardV1()), { ...rewrite, generations: ["0.3", "1.0"] }, "1.0");
    expect((both.supportedInterfaces as { protocolVersion: string }[]).map((i) => i.protocolVersion)).toEqual(["1.0", "0.3"]);
  });

  it("filters skills by the caller's predicate and adds OAuth issuers as alternatives", () => {
    const served = rewriteAgentCard(viewOf(cardV1()), { ...rewrite, skillVisible: (id) => id === "translate", security: { openIdConnectUrls: ["https://idp.example.com/.well-known/openid-configuration"] } }, "1.0");
    expect((served.skills as { id: string }[]).map((s) => s.id)).toEqual(["translate"]);
    expect(served.securitySchemes).toMatchObject({ sluiceOAuth: { openIdConnectSecurityScheme: { openIdConnectUrl: "https://idp.example.com/.well-known/openid-configuration" } } });
    expect(served.securityRequirements).toHaveLength(3);
  });

  it("picks the card shape from A2A-Version: none or 0.3 → 0.3, 1.x or unknown → 1.0", () => {
    expect(requestedCardShape(null)).toBe("0.3");
    expect(requestedCardShape("0.3")).toBe("0.3");
    expect(requestedCardShape("1.0")).toBe("1.0");
    expect(requestedCardShape("9.9")).toBe("1.0");
  });
});

describe("a2a config", () => {
  it("defaults, and validates an inline card at load", () => {
    const ok = a2aConfigSchema.parse({ stateSecret: "A2A_STATE_SECRET", agents: [{ name: "echo", card: "https://agent.test/.well-known/agent-card.json" }, { name: "inline", card: cardV03() }] });
    expect(ok.agents[0]).toMatchObject({ refreshMs: 300_000 });
    const bad = a2aConfigSchema.safeParse({ stateSecret: "A2A_STATE_SECRET", agents: [{ name: "bad", card: cardV03({ url: "nope" }) }] });
    expect(bad.success).toBe(false);
    if (!bad.success) expect(bad.error.issues[0]?.message).toMatch(/^invalid agent card: url:/);
    expect(a2aConfigSchema.safeParse({ stateSecret: "A2A_STATE_SECRET", agents: [{ name: "Bad_Name", card: "https://agent.test/" }] }).success).toBe(false);
    // Agents without the secret their task ids are bound with are refused, naming it.
    const unbound = a2aConfigSchema.safeParse({ agents: [{ name: "echo", card: "https://agent.test/" }] });
    expect(unbound.success).toBe(false);
    if (!unbound.success) expect(unbound.error.issues[0]).toMatchObject({ path: ["stateSecret"], message: expect.stringMatching(/^required with a2a.agents/) });
    expect(a2aConfigSchema.parse({}).agents).toEqual([]);
  });
});
