import { describe, expect, it } from "vitest";
import { describeCondition, describeRouteWhen, entrypointSection, recentKey, type EntrypointRoutesView } from "../../../src/http/console-routes.ts";
import { explainForm, explainRequestOf, signalText } from "../../../src/http/console-explain.ts";

const model = (id: string) => ({ model: id, revision: 1, pool: `pool-${id}`, backends: [{ name: `be-${id}`, protocol: "openai-chat", model: `up-${id}` }] });

const EP: EntrypointRoutesView = {
  name: "auto",
  operation: "chat",
  plugins: ["redact"],
  routes: [],
  decisions: [
    { name: "gate", priority: 100, when: { signal: "jailbreak" }, onUnknown: "refuse", tiers: null, plugins: ["refuse"], algorithm: null },
    { name: "code<b>", priority: 0, when: { all: [{ signal: "topic", is: "code" }, { not: { signal: "tokens", above: 4000 } }] }, onUnknown: "skip", tiers: [[model("large")], [model("small")]], plugins: [], algorithm: null },
  ],
  default: [[model("small")]],
  maxAttempts: 3,
  affinityHeader: null,
};

const ENTITIES: Record<string, string> = { "&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&#39;": "'", "&#96;": "`" };

/** The header cells and body rows of the rendered table as text: tags stripped, entities read. */
function cells(text: string): { head: string[]; rows: string[][] } {
  const strip = (s: string) => s.replace(/<[^>]+>/g, "").replace(/&(?:amp|lt|gt|quot|#39|#96);/g, (e) => ENTITIES[e]!).trim();
  const head = [...text.matchAll(/<th[^>]*>(.*?)<\/th>/g)].map((m) => strip(m[1]!));
  const body = text.slice(text.indexOf("<tbody>"));
  const rows = [...body.matchAll(/<tr>(.*?)<\/tr>/g)].map((r) => [...r[1]!.matchAll(/<td>(.*?)<\/td>/g)].map((m) => strip(m[1]!)));
  return { head, rows };
}

describe("console routes: conditions in words", () => {
  it("writes each operator, keys, and all/any/not", () => {
    expect(describeCondition({ signal: "jailbreak" })).toBe("jailbreak is on");
    expect(describeCondition({ signal: "topic", is: "code" })).toBe('topic is "code"');
    expect(describeCondition({ signal: "who", key: "team", in: ["research", 7] })).toBe('who.team in ["research", 7]');
    expect(describeCondition({ signal: "tokens", atMost: 10 })).toBe("tokens at most 10");
    expect(describeCondition({ signal: "modality", contains: "images" })).toBe('modality contains "images"');
    expect(describeCondition({ any: [{ signal: "a", is: true }, { not: { signal: "b", above: 2 } }] })).toBe("any of (a is true; not (b above 2))");
  });

  it("writes a route's tests joined by and", () => {
    expect(describeRouteWhen({ keywords: ["code", "bug"], promptTokensAbove: 10 })).toBe('the last user message has any of the words "code", "bug" and prompt tokens above 10');
    expect(describeRouteWhen({ header: { name: "x-tier", in: ["gold"] }, regex: { pattern: "^a+$", flags: "i" } })).toBe('the last user message matches /^a+$/i and header x-tier in ["gold"]');
  });
});

describe("console routes: an entrypoint's decisions", () => {
  it("lists the decisions in the order given, then the default, escaping names, with no traffic column when no figures are given", () => {
    const { text } = entrypointSection(EP, new Map([["refuse", { name: "refuse", kind: "block" }]]));
    const { head, rows } = cells(text);
    expect(head).not.toContain("Requests, last 15 min");
    expect(rows.map((r) => r[0])).toEqual(["gate", "code<b>", "default"]);
    expect(text).not.toContain("code<b>");
    expect(rows[0]!.slice(1, 4)).toEqual(["100", "jailbreak is on", "the default tiers"]);
    expect(rows[0]![5]).toBe("refuse (block)");
    expect(rows[0]![6]).toContain("refuse");
    expect(rows[1]![2]).toBe('all of (topic is "code"; not (tokens above 4000))');
    expect(rows[1]![3]).toContain("be-large");
    expect(text).toContain("/admin/console/explain?entrypoint=auto");
  });

  it("shows each decision's recent figure (zero for one the window did not see) when figures are given", () => {
    const recent = new Map([
      [recentKey("auto", "gate"), 1234],
      [recentKey("auto", "default"), 5],
      [recentKey("other", "code<b>"), 99],
    ]);
    const { head, rows } = cells(entrypointSection(EP, new Map(), recent).text);
    expect(head.at(-1)).toBe("Requests, last 15 min");
    expect(rows.map((r) => r.at(-1))).toEqual(["1,234", "0", "5"]);
  });
});

describe("console explain: the form's fields as an explain", () => {
  const form = { caller: "demo/k1", protocol: "openai-chat", headers: "", body: '{"model":"m"}' };

  it("reads the caller, protocol, header lines and body", () => {
    expect(explainRequestOf({ ...form, headers: "X-Tier: gold\n\n x-session :  abc " })).toEqual({
      request: { model: "m" },
      protocol: "openai-chat",
      tenant: "demo",
      key: "k1",
      headers: { "x-tier": "gold", "x-session": "abc" },
    });
    expect(explainRequestOf({ ...form, caller: "demo/" })).toEqual({ request: { model: "m" }, protocol: "openai-chat", tenant: "demo" });
  });

  it("says what is wrong instead of asking the API", () => {
    expect(explainRequestOf({ ...form, body: "{nope" })).toMatchObject({ problem: expect.stringContaining("not JSON") });
    expect(explainRequestOf({ ...form, body: "[1]" })).toMatchObject({ problem: expect.stringContaining("JSON object") });
    expect(explainRequestOf({ ...form, headers: "no colon here" })).toMatchObject({ problem: 'Header line 1 is not "name: value".' });
    expect(explainRequestOf({ ...form, protocol: "gopher" })).toMatchObject({ problem: expect.stringContaining("openai-chat") });
    expect(explainRequestOf({ ...form, caller: "" })).toMatchObject({ problem: expect.stringContaining("caller") });
  });

  it("gives back what was typed, escaped, and names the trusted headers", () => {
    const typed = '\n{"model": "</textarea><b>x"}';
    const { text } = explainForm({ ...form, body: typed }, [{ tenant: "demo" }, { tenant: "demo", key: "k1", note: "disabled" }], ["x-tier"], "tok");
    expect(text).toContain(`>\n\n{&quot;model&quot;: &quot;&lt;/textarea&gt;&lt;b&gt;x&quot;}</textarea>`);
    expect(text).toContain('<option value="demo/k1" selected>demo · key k1 (disabled)</option>');
    expect(text).toContain("<code>x-tier</code>");
  });

  it("writes a signal's value, a record's fields, and why an unknown is unknown", () => {
    expect(signalText({ state: "known", value: { category: "", score: 0.12, rules: [] } })).toBe('category: ""; score: 0.12; rules: none');
    expect(signalText({ state: "known", value: ["images", "tools"] })).toBe("images, tools");
    expect(signalText({ state: "known", value: false })).toBe("false");
    expect(signalText({ state: "unknown", reason: "timeout" })).toBe("unknown (timeout): not back before the signal deadline");
  });
});
