import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/load-config.ts";
import { createEngine, type Action, type DispatchAction, type Ingress } from "../../../src/engine/engine.ts";
import { validatePlan } from "../../../src/plan/dispatch-plan.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { bundled, bundledTexts, FakeClock, textsWith } from "../support/fixtures.ts";

const clock = new FakeClock();
const config = loadConfig(bundledTexts);
const engine = createEngine(config.gateway, config.publication, { clock, codecs: builtinCodecs });
const demo = { tenantId: "demo", keyId: "demo" };
const limited = { tenantId: "demo", keyId: "limited" };

function ingress(body: unknown, over: Partial<Ingress> = {}): Ingress {
  return {
    principal: demo,
    protocol: "openai-chat",
    body,
    requestId: "req_test",
    receivedAt: clock.now(),
    trustedHeaders: new Map(),
    ...over,
  };
}
const chat = (content: string, extra: Record<string, unknown> = {}) => ({
  model: "sluice-chat",
  messages: [{ role: "user", content }],
  ...extra,
});
function dispatch(a: Action): DispatchAction {
  if (a.kind !== "dispatch") throw new Error(`expected dispatch, got ${a.error.code}: ${a.error.message}`);
  return a;
}
const models = (a: Action) => dispatch(a).plan.tiers.map((t) => t.map((m) => m.logicalModel));

describe("engine", () => {
  it("plans the default tiers for a plain request", () => {
    const a = dispatch(engine.begin(ingress(chat("Hello there"))).prepare());
    expect(a.plan.route).toBe("default");
    expect(models(a)).toEqual([["chat-small"], ["chat-large"]]);
    expect(a.plan.publicationRevision).toBe("demo-1");
    expect(a.plan.entrypoint).toBe("sluice-chat");
  });

  it("matches keyword rules on whole words of the last user message only", () => {
    expect(dispatch(engine.begin(ingress(chat("Why does this function fail?"))).prepare()).plan.route).toBe("code");
    expect(dispatch(engine.begin(ingress(chat("malfunctioning toaster"))).prepare()).plan.route).toBe("default");
    const earlier = {
      model: "sluice-chat",
      messages: [
        { role: "user", content: "write code" },
        { role: "assistant", content: "ok" },
        { role: "user", content: "thanks" },
      ],
    };
    expect(dispatch(engine.begin(ingress(earlier)).prepare()).plan.route).toBe("default");
  });

  it("routes long prompts by estimated tokens", () => {
    const a = dispatch(engine.begin(ingress(chat("word ".repeat(5000)))).prepare());
    expect(a.plan.route).toBe("long-prompt");
    expect(models(a)).toEqual([["chat-large"]]);
  });

  it("reads only trusted headers, and only values in the rule", () => {
    const premium = new Map([["x-sluice-tier", "premium"]]);
    expect(dispatch(engine.begin(ingress(chat("hi"), { trustedHeaders: premium })).prepare()).plan.route).toBe("premium");
    const other = new Map([["x-sluice-tier", "basic"]]);
    expect(dispatch(engine.begin(ingress(chat("hi"), { trustedHeaders: other })).prepare()).plan.route).toBe("default");
  });

  it("evaluates tools and images conditions", () => {
    const p = bundled("publication");
    p.entrypoints[0].routes = [
      { name: "vision", when: { imagesPresent: true }, models: [["chat-large"]] },
      { name: "agent", when: { toolsPresent: true }, models: [["chat-large"]] },
      { name: "pattern", when: { regex: { pattern: "^translate", flags: "i" } }, models: [["chat-large"]] },
      { name: "short", when: { promptTokensAtMost: 5 }, models: [["chat-small"]] },
    ];
    const c = loadConfig(textsWith({ publication: p }));
    const e = createEngine(c.gateway, c.publication, { clock, codecs: builtinCodecs });
    const image = { model: "sluice-chat", messages: [{ role: "user", content: [{ type: "text", text: "what is this" }, { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }] }] };
    expect(dispatch(e.begin(ingress(image)).prepare()).plan.route).toBe("vision");
    const tools = chat("weather in Paris please", { tools: [{ type: "function", function: { name: "weather", parameters: { type: "object" } } }] });
    const t = dispatch(e.begin(ingress(tools)).prepare());
    expect(t.plan.route).toBe("agent");
    expect(t.plan.tiers[0]?.[0]?.requires).toContain("tools");
    expect(dispatch(e.begin(ingress(chat("Translate this sentence into French for me please"))).prepare()).plan.route).toBe("pattern");
    // "hi": 1 token of text + 4 of message overhead.
    expect(dispatch(e.begin(ingress(chat("hi"))).prepare()).plan.route).toBe("short");
    expect(dispatch(e.begin(ingress(chat("hello world"))).prepare()).plan.route).toBe("default");
  });

  it("adds the request's own needs to each planned model's requirements", () => {
    const a = dispatch(engine.begin(ingress(chat("hello", { stream: true }))).prepare());
    expect(a.plan.stream).toBe(true);
    expect(a.plan.tiers[0]?.[0]?.requires).toEqual(expect.arrayContaining(["chat", "streaming", "stream-usage"]));
  });

  it("sets one absolute deadline from the receive time", () => {
    const a = dispatch(engine.begin(ingress(chat("hello"), { receivedAt: clock.now() - 1000 })).prepare());
    expect(a.plan.deadlineAt).toBe(clock.now() - 1000 + config.gateway.traffic.requestDeadlineMs);
  });

  it("lets a caller's deadline shorten the request's, never lengthen it", () => {
    const now = clock.now();
    const shorter = dispatch(engine.begin(ingress(chat("hello"), { receivedAt: now, callerDeadlineAt: now + 1000 })).prepare());
    expect(shorter.plan.deadlineAt).toBe(now + 1000);
    const longer = dispatch(engine.begin(ingress(chat("hello"), { receivedAt: now, callerDeadlineAt: now + 10 * config.gateway.traffic.requestDeadlineMs })).prepare());
    expect(longer.plan.deadlineAt).toBe(now + config.gateway.traffic.requestDeadlineMs);
  });

  it("takes the affinity key from the configured trusted header", () => {
    const h = new Map([["x-sluice-session", "s-42"]]);
    expect(dispatch(engine.begin(ingress(chat("hello"), { trustedHeaders: h })).prepare()).plan.affinityKey).toBe("s-42");
  });

  it("answers unknown models with 404 and forbidden ones with 403", () => {
    const unknown = engine.begin(ingress({ model: "gpt-9", messages: [{ role: "user", content: "x" }] })).prepare();
    expect(unknown.kind === "immediate" && unknown.error.code).toBe("model_not_found");
    expect(unknown.kind === "immediate" && unknown.error.status).toBe(404);
    const forbidden = engine.begin(ingress({ model: "sluice-large", messages: [{ role: "user", content: "x" }] }, { principal: limited })).prepare();
    expect(forbidden.kind === "immediate" && forbidden.error.code).toBe("model_not_allowed");
    expect(forbidden.kind === "immediate" && forbidden.error.status).toBe(403);
  });

  it("turns a malformed body into a protocol error naming the parameter", () => {
    const a = engine.begin(ingress({ model: "sluice-chat", messages: [], temperature: 9 })).prepare();
    expect(a.kind).toBe("immediate");
    if (a.kind === "immediate") {
      expect(a.error.code).toBe("invalid_request");
      expect(a.error.param).toBe("messages");
    }
  });

  it("lists only the models a key may use", () => {
    expect(engine.listModels(demo).map((m) => m.id).sort()).toEqual(["sluice-chat", "sluice-large"]);
    expect(engine.listModels(limited).map((m) => m.id)).toEqual(["sluice-chat"]);
    expect(engine.listModels({ tenantId: "demo", keyId: "nobody" })).toEqual([]);
  });

  it("never puts physical detail in a plan", () => {
    const plan = dispatch(engine.begin(ingress(chat("hello"))).prepare()).plan;
    expect(validatePlan(plan, clock.now())).toEqual([]);
    const text = JSON.stringify(plan);
    expect(text).not.toMatch(/127\.0\.0\.1|http:|SIMULATOR_API_KEY|sim-local/);
    const smuggled = { ...plan, tiers: [[{ ...plan.tiers[0]![0]!, baseUrl: "http://x" }]] };
    expect(validatePlan(smuggled, clock.now())).toContain("plan carries physical detail at plan.tiers.0.0.baseUrl");
  });
});
