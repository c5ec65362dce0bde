import { describe, expect, it } from "vitest";
import { memoizedModels, type SignalModels } from "../../../src/signals/signal-models.ts";
import { SignalSet, signalIndex, type SignalDefinition } from "../../../src/signals/signal-set.ts";

/** An embedder that records each call's texts, answers one vector per text (its length), or fails while `failing`. */
function recordingModels(): SignalModels & { readonly calls: string[][]; failing: boolean } {
  const calls: string[][] = [];
  const m = {
    calls,
    failing: false,
    async embed(_model: string, texts: readonly string[]): Promise<readonly Float32Array[]> {
      calls.push([...texts]);
      if (m.failing) throw new Error("backend down");
      return texts.map((t) => Float32Array.of(t.length));
    },
  };
  return m;
}

const noSignal = () => new AbortController().signal;

describe("a request's embedding memo", () => {
  it("embeds a text once per model however often it is asked, and only the texts not asked before", async () => {
    const backend = recordingModels();
    const models = memoizedModels(backend);
    const [a] = await models.embed("embed", ["hello"], noSignal());
    const [b, c] = await models.embed("embed", ["hello", "world!"], noSignal());
    await models.embed("other", ["hello"], noSignal());
    expect([a![0], b![0], c![0]]).toEqual([5, 5, 6]);
    expect(backend.calls).toEqual([["hello"], ["world!"], ["hello"]]);
  });

  it("is the request's own: another request's wrapper embeds again", async () => {
    const backend = recordingModels();
    await memoizedModels(backend).embed("embed", ["hello"], noSignal());
    await memoizedModels(backend).embed("embed", ["hello"], noSignal());
    expect(backend.calls).toEqual([["hello"], ["hello"]]);
  });

  it("does not remember a failed embedding: the next ask tries again", async () => {
    const backend = recordingModels();
    const models = memoizedModels(backend);
    backend.failing = true;
    await expect(models.embed("embed", ["hello"], noSignal())).rejects.toThrow("backend down");
    backend.failing = false;
    const [v] = await models.embed("embed", ["hello"], noSignal());
    expect(v![0]).toBe(5);
    expect(backend.calls).toEqual([["hello"], ["hello"]]);
  });
});

describe("a signal index shared by requests", () => {
  it("gives each request's set its own values, computed once per request", () => {
    let computed = 0;
    const defs: SignalDefinition[] = [{ name: "n", cost: "local", compute: () => ++computed }];
    const index = signalIndex(defs);
    const options = { input: () => ({ subject: undefined, principal: undefined, trustedHeaders: new Map<string, string>(), models: undefined }), signal: noSignal(), scheduler: { schedule: () => () => {} }, onFailure: () => {} };
    const first = new SignalSet(index, options);
    const second = new SignalSet(index, options);
    expect(first.local("n")).toEqual({ state: "known", value: 1 });
    expect(first.local("n")).toEqual({ state: "known", value: 1 });
    expect(second.local("n")).toEqual({ state: "known", value: 2 });
    expect(first.names).toEqual(["n"]);
    expect(() => second.local("undeclared")).toThrow(/not declared/);
  });
});

describe("a signal set that lets go of its input", () => {
  it("keeps the values it computed, and asks for the input again only for a signal not asked before", () => {
    let inputs = 0;
    const defs: SignalDefinition[] = [
      { name: "a", cost: "local", compute: (i) => i.principal?.tenantId ?? "none" },
      { name: "b", cost: "local", compute: (i) => i.principal?.tenantId ?? "none" },
    ];
    let principal: { tenantId: string; keyId: string } | undefined = { tenantId: "acme", keyId: "k" };
    const set = new SignalSet(defs, {
      input: () => (inputs++, { subject: undefined, principal, trustedHeaders: new Map<string, string>(), models: undefined }),
      signal: noSignal(),
      scheduler: { schedule: () => () => {} },
      onFailure: () => {},
    });
    expect(set.local("a")).toEqual({ state: "known", value: "acme" });
    principal = undefined;
    set.releaseInput();
    expect(set.local("a")).toEqual({ state: "known", value: "acme" });
    expect(inputs).toBe(1);
    expect(set.local("b")).toEqual({ state: "known", value: "none" });
    expect(inputs).toBe(2);
  });
});
