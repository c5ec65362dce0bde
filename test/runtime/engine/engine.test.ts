import { describe, expect, it } from "vitest";
import type { Action, DispatchAction } from "../../../src/engine/session-api.ts";
import type { Ingress } from "../../../src/kinds/model/model-api.ts";
import { validatePlan } from "../../../src/decide/dispatch-plan.ts";
import { bundled, textsWith } from "../support/fixtures.ts";
import { chat, DEMO_KEY, engineHarness, LIMITED_KEY } from "../support/engine-harness.ts";

const h = engineHarness();
const { engine, clock, config } = h;
const ingress = (body: unknown, over: Partial<Ingress> = {}) => h.ingress(body, over);
const prepare = (body: unknown, over: Partial<Ingress> = {}) => engine.begin(ingress(body, over)).prepare();
function dispatch(a: Action): DispatchAction {
  if (a.kind !== "dispatch") throw new Error(`expected dispatch, got ${a.error.code}: ${a.error.message}`);
  return a;
}
const models = (a: Action) => dispatch(a).plan.tiers.map((t) => t.map((m) => m.logicalModel));

describe("engine: authenticate → decode → authorize → decide", () => {
  it("plans the default tiers for a plain request", async () => {
    const a = dispatch(await prepare(chat("Hello there")));
    expect(a.plan.route).toBe("default");
    expect(models(a)).toEqual([["chat-small"], ["chat-large"]]);
    expect(a.plan.publicationRevision).toBe("demo-1");
    expect(a.plan.entrypoint).toBe("sluice-chat");
  });

  it("matches keyword rules on whole words of the last user message only", async () => {
    expect(dispatch(await prepare(chat("Why does this function fail?"))).plan.route).toBe("code");
    expect(dispatch(await prepare(chat("malfunctioning toaster"))).plan.route).toBe("default");
    const earlier = {
      model: "sluice-chat",
      messages: [
        { role: "user", content: "write code" },
        { role: "assistant", content: "ok" },
        { role: "user", content: "thanks" },
      ],
    };
    expect(dispatch(await prepare(earlier)).plan.route).toBe("default");
  });

  it("routes long prompts by estimated tokens", async () => {
    const a = dispatch(await prepare(chat("word ".repeat(5000))));
    expect(a.plan.route).toBe("long-prompt");
    expect(models(a)).toEqual([["chat-large"]]);
  });

  it("reads only trusted headers, and only values in the rule", async () => {
    const premium = new Map([["x-sluice-tier", "premium"]]);
    expect(dispatch(await prepare(chat("hi"), { trustedHeaders: premium })).plan.route).toBe("premium");
    const other = new Map([["x-sluice-tier", "basic"]]);
    expect(dispatch(await prepare(chat("hi"), { trustedHeaders: other })).plan.route).toBe("default");
  });

  it("evaluates tools and images conditions", async () => {
    const p = bundled("publication");
    p.entrypoints[0].routes = [
      { name: "vision", when: { imagesPresent: true }, models: [["chat-large"]] },
      { name: "agent", when: { toolsPresent: true }, models: [["chat-large"]] },
      { name: "pattern", when: { regex: { pattern: "^translate", flags: "i" } }, models: [["chat-large"]] },
      { name: "short", when: { promptTokensAtMost: 5 }, models: [["chat-small"]] },
    ];
    const e = engineHarness({ texts: textsWith({ publication: p }) });
    const image = { model: "sluice-chat", messages: [{ role: "user", content: [{ type: "text", text: "what is this" }, { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }] }] };
    expect(dispatch((await e.engine.begin(e.ingress(image)).prepare())).plan.route).toBe("vision");
    const tools = chat("weather in Paris please", { tools: [{ type: "function", function: { name: "weather", parameters: { type: "object" } } }] });
    const t = dispatch((await e.engine.begin(e.ingress(tools)).prepare()));
    expect(t.plan.route).toBe("agent");
    expect(t.plan.tiers[0]?.[0]?.requires).toContain("tools");
    expect(dispatch((await e.engine.begin(e.ingress(chat("Translate this sentence into French for me please"))).prepare())).plan.route).toBe("pattern");
    // "hi": 1 token of text + 4 of message overhead.
    expect(dispatch((await e.engine.begin(e.ingress(chat("hi"))).prepare())).plan.route).toBe("short");
    expect(dispatch((await e.engine.begin(e.ingress(chat("hello world"))).prepare())).plan.route).toBe("default");
  });

  it("adds the request's own needs to each planned model's requirements", async () => {
    const a = dispatch(await prepare(chat("hello", { stream: true })));
    expect(a.plan.stream).toBe(true);
    expect(a.plan.tiers[0]?.[0]?.requires).toEqual(expect.arrayContaining(["chat", "streaming", "stream-usage"]));
  });

  it("sets one absolute deadline from the receive time", async () => {
    const a = dispatch(await prepare(chat("hello"), { receivedAt: clock.now() - 1000 }));
    expect(a.plan.deadlineAt).toBe(clock.now() - 1000 + config.gateway.traffic.requestDeadlineMs);
  });

  it("lets a caller's deadline shorten the request's, never lengthen it", async () => {
    const now = clock.now();
    const shorter = dispatch(await prepare(chat("hello"), { receivedAt: now, call: { callId: "c-1", budget: 3, deadlineAt: now + 1000 } }));
    expect(shorter.plan.deadlineAt).toBe(now + 1000);
    const longer = dispatch(await prepare(chat("hello"), { receivedAt: now, call: { callId: "c-2", budget: 3, deadlineAt: now + 10 * config.gateway.traffic.requestDeadlineMs } }));
    expect(longer.plan.deadlineAt).toBe(now + config.gateway.traffic.requestDeadlineMs);
  });

  it("takes the affinity key from the configured trusted header", async () => {
    const h = new Map([["x-sluice-session", "s-42"]]);
    expect(dispatch(await prepare(chat("hello"), { trustedHeaders: h })).plan.affinityKey).toBe("s-42");
  });

  it("answers unknown models with 404 and forbidden ones with 403", async () => {
    const unknown = (await prepare({ model: "gpt-9", messages: [{ role: "user", content: "x" }] }));
    expect(unknown.kind === "immediate" && unknown.error.code).toBe("model_not_found");
    expect(unknown.kind === "immediate" && unknown.error.status).toBe(404);
    const forbidden = (await prepare({ model: "sluice-large", messages: [{ role: "user", content: "x" }] }, { apiKey: LIMITED_KEY }));
    expect(forbidden.kind === "immediate" && forbidden.error.code).toBe("model_not_allowed");
    expect(forbidden.kind === "immediate" && forbidden.error.status).toBe(403);
  });

  it("turns a malformed body into a protocol error naming the parameter", async () => {
    const a = (await prepare({ model: "sluice-chat", messages: [], temperature: 9 }));
    expect(a.kind).toBe("immediate");
    if (a.kind === "immediate") {
      expect(a.error.code).toBe("invalid_request");
      expect(a.error.param).toBe("messages");
    }
  });

  it("lists only the models a key may use", async () => {
    expect((await engine.listModels({ apiKey: DEMO_KEY, bearer: DEMO_KEY })).map((m) => m.id).sort()).toEqual(["sluice-auto", "sluice-cascade", "sluice-chat", "sluice-embed", "sluice-faq", "sluice-large", "sluice-moderation"]);
    expect((await engine.listModels({ apiKey: LIMITED_KEY, bearer: LIMITED_KEY })).map((m) => m.id)).toEqual(["sluice-chat"]);
    await expect(engine.listModels({ apiKey: "sk-nobody", bearer: undefined })).rejects.toMatchObject({ code: "invalid_api_key" });
  });

  it("never puts physical detail in a plan", async () => {
    const plan = dispatch(await prepare(chat("hello"))).plan;
    expect(validatePlan(plan, clock.now())).toEqual([]);
    const text = JSON.stringify(plan);
    expect(text).not.toMatch(/127\.0\.0\.1|http:|SIMULATOR_API_KEY|sim-local/);
    const smuggled = { ...plan, tiers: [[{ ...plan.tiers[0]![0]!, baseUrl: "http://x" }]] };
    expect(validatePlan(smuggled, clock.now())).toContain("plan carries physical detail at plan.tiers.0.0.baseUrl");
  });
});
