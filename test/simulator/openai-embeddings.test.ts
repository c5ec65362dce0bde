/**
 * `POST /v1/embeddings`: OpenAI's shape through the official client, and the recipe's promises
 * (deterministic, close by shared words, far otherwise) that routing tests build on.
 */

import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import OpenAI from "openai";
import { EMBEDDING_DIMENSIONS, cosine, embed, fromBase64 } from "../../simulator/embedding.ts";
import type { Simulator } from "../../simulator/server.ts";
import { client, post, reset, start, stats } from "./helpers.ts";

let sim: Simulator;
let openai: OpenAI;

beforeAll(async () => {
  sim = await start();
  openai = client(sim);
});
afterAll(() => sim.close());
beforeEach(() => reset(sim));

const MODEL = "text-embedding-3-small";

/** Float vectors by `encoding_format: "float"`, as plain arrays. */
async function vectors(input: string | string[], extra: { dimensions?: number } = {}): Promise<number[][]> {
  const res = await openai.embeddings.create({ model: MODEL, input, encoding_format: "float", ...extra });
  return res.data.map((d) => d.embedding);
}

const norm = (v: readonly number[]): number => Math.sqrt(v.reduce((sum, x) => sum + x * x, 0));

describe("shape", () => {
  it("answers one input as a list of one embedding, decoded by the client's default base64 path", async () => {
    const res = await openai.embeddings.create({ model: MODEL, input: "Where is my parcel?" });
    expect(res.object).toBe("list");
    expect(res.model).toBe(MODEL);
    expect(res.data).toHaveLength(1);
    expect(res.data[0]).toMatchObject({ object: "embedding", index: 0 });
    expect(res.data[0]?.embedding).toHaveLength(EMBEDDING_DIMENSIONS);
    // "Where is my parcel?" is 19 characters: ⌈19 / 4⌉ tokens.
    expect(res.usage).toEqual({ prompt_tokens: 5, total_tokens: 5 });
    const [float] = await vectors("Where is my parcel?");
    expect(Array.from(res.data[0]?.embedding ?? [])).toEqual(float);
  });

  it("answers a batch in order, usage summed over the inputs", async () => {
    const input = ["alpha", "bravo charlie", "delta echo foxtrot golf"];
    const res = await openai.embeddings.create({ model: MODEL, input, encoding_format: "float" });
    expect(res.data.map((d) => d.index)).toEqual([0, 1, 2]);
    for (const [i, text] of input.entries()) expect(res.data[i]?.embedding).toEqual(Array.from(embed(text)));
    expect(res.usage.prompt_tokens).toBe(2 + 4 + 6);
    expect(res.usage.total_tokens).toBe(res.usage.prompt_tokens);
  });

  it("sends base64 as little-endian float32, bit for bit the float answer", async () => {
    const res = await openai.embeddings.create({ model: MODEL, input: ["one text", "another"], encoding_format: "base64" });
    const [a, b] = await vectors(["one text", "another"]);
    const encoded = res.data.map((d) => d.embedding);
    expect(encoded.every((e) => typeof e === "string")).toBe(true);
    const bytes = Buffer.from(encoded[0] ?? "", "base64");
    expect(bytes.length).toBe(EMBEDDING_DIMENSIONS * 4);
    expect(bytes.readFloatLE(4)).toBe(a?.[1]);
    expect(Array.from(fromBase64(encoded[0] ?? ""))).toEqual(a);
    expect(Array.from(fromBase64(encoded[1] ?? ""))).toEqual(b);
  });

  it("takes token arrays, each token id a word, usage one per token", async () => {
    const one = await openai.embeddings.create({ model: MODEL, input: [1, 22, 333], encoding_format: "float" });
    expect(one.data).toHaveLength(1);
    expect(one.data[0]?.embedding).toEqual(Array.from(embed("1 22 333")));
    expect(one.usage.prompt_tokens).toBe(3);
    const many = await openai.embeddings.create({ model: MODEL, input: [[1, 2], [3, 4, 5]], encoding_format: "float" });
    expect(many.data.map((d) => d.embedding)).toEqual([Array.from(embed("1 2")), Array.from(embed("3 4 5"))]);
    expect(many.usage.prompt_tokens).toBe(5);
  });

  it("shortens vectors to `dimensions`, still unit length", async () => {
    const [short] = await vectors("a shorter vector", { dimensions: 32 });
    expect(short).toHaveLength(32);
    expect(norm(short ?? [])).toBeCloseTo(1, 5);
    const [full] = await vectors("a shorter vector");
    expect(norm(full ?? [])).toBeCloseTo(1, 5);
  });

  it("leaves usage out under omit-usage", async () => {
    const res = await post(sim, "/v1/embeddings", { model: MODEL, input: "x" }, { "x-sim-fault": "omit-usage" });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).not.toHaveProperty("usage");
    expect(body["data"]).toHaveLength(1);
  });
});

describe("recipe", () => {
  it("is deterministic: the same text gives the same vector, whatever the model or the batch", async () => {
    const [a] = await vectors("Reset my router please");
    const [, b] = await vectors(["something else", "Reset my router please"]);
    const other = await openai.embeddings.create({ model: "another-model", input: "Reset my router please", encoding_format: "float" });
    expect(b).toEqual(a);
    expect(other.data[0]?.embedding).toEqual(a);
  });

  it("puts a paraphrase that shares words near its category and an unrelated prompt far from it", async () => {
    const [billing, travel, paraphrase, unrelated] = await vectors([
      "Billing questions: refunds, invoices and payment methods",
      "Travel planning: flights, hotels and itineraries",
      "How can I get a refund for this invoice?",
      "Write a short poem about autumn leaves",
    ]);
    const near = cosine(paraphrase ?? [], billing ?? []);
    expect(near).toBeGreaterThan(0.3);
    expect(near - cosine(unrelated ?? [], billing ?? [])).toBeGreaterThan(0.25);
    expect(near - cosine(paraphrase ?? [], travel ?? [])).toBeGreaterThan(0.25);
    for (const category of [billing, travel]) expect(Math.abs(cosine(unrelated ?? [], category ?? []))).toBeLessThan(0.2);
  });

  it("scores about shared words / √(words × words), stop words and plural -s left out", () => {
    expect(cosine(embed("refund invoice"), embed("refunds invoices"))).toBeCloseTo(1, 6);
    expect(cosine(embed("What is the refund?"), embed("refund"))).toBeCloseTo(1, 6);
    const half = cosine(embed("parcel delivery"), embed("parcel weather"));
    expect(half).toBeGreaterThan(0.5 - 0.2);
    expect(half).toBeLessThan(0.5 + 0.2);
  });

  it("ignores the simulator's own markers", () => {
    expect(Array.from(embed("slow parcel [[sim latency-ms=5]] [[mod:violence=0.9]]"))).toEqual(Array.from(embed("slow parcel")));
  });

  it("gives punctuation alone a unit vector of its own", () => {
    const v = Array.from(embed("?!"));
    expect(norm(v)).toBeCloseTo(1, 5);
    expect(v).not.toEqual(Array.from(embed("...")));
  });
});

describe("errors", () => {
  const cases: { name: string; body: unknown; param?: string | null; code?: string | null; message: RegExp }[] = [
    { name: "an empty string", body: { model: MODEL, input: "" }, message: /'\$\.input' is invalid/ },
    { name: "an empty array", body: { model: MODEL, input: [] }, message: /'\$\.input' is invalid/ },
    { name: "an empty string in the batch", body: { model: MODEL, input: ["a", ""] }, message: /'\$\.input' is invalid/ },
    { name: "a mixed array", body: { model: MODEL, input: ["a", 1] }, message: /'\$\.input' is invalid/ },
    { name: "a negative token id", body: { model: MODEL, input: [1, -2] }, message: /'\$\.input' is invalid/ },
    { name: "an object", body: { model: MODEL, input: { text: "a" } }, message: /'\$\.input' is invalid/ },
    {
      name: "more than 2048 inputs",
      body: { model: MODEL, input: Array.from({ length: 2049 }, () => "x") },
      param: "input",
      code: "array_above_max_length",
      message: /maximum length 2048, but got an array with length 2049/,
    },
    { name: "an input over 8192 tokens", body: { model: MODEL, input: ["ok", "x".repeat(8192 * 4 + 1)] }, message: /maximum context length is 8192 tokens/ },
    { name: "no input", body: { model: MODEL }, param: "input", code: "missing_required_parameter", message: /Missing required parameter: 'input'/ },
    { name: "no model", body: { input: "a" }, message: /you must provide a model parameter/ },
    { name: "dimensions 0", body: { model: MODEL, input: "a", dimensions: 0 }, param: "dimensions", code: "integer_below_min_value", message: /below minimum/ },
    { name: "dimensions above 256", body: { model: MODEL, input: "a", dimensions: 257 }, param: "dimensions", code: "integer_above_max_value", message: /<= 256/ },
    { name: "an unknown encoding", body: { model: MODEL, input: "a", encoding_format: "int8" }, param: "encoding_format", code: "invalid_value", message: /'float', and 'base64'/ },
  ];
  for (const c of cases) {
    it(`refuses ${c.name} with a 400 in OpenAI's envelope`, async () => {
      const res = await post(sim, "/v1/embeddings", c.body);
      expect(res.status).toBe(400);
      const { error } = (await res.json()) as { error: { message: string; type: string; param: unknown; code: unknown } };
      expect(error.type).toBe("invalid_request_error");
      expect(error.message).toMatch(c.message);
      expect(error.param).toBe(c.param ?? null);
      expect(error.code).toBe(c.code ?? null);
      expect((await stats(sim)).outcomes.rejected).toBe(1);
    });
  }

  it("refuses a body that is not JSON, and surfaces refusals as BadRequestError", async () => {
    expect((await post(sim, "/v1/embeddings", "{not json")).status).toBe(400);
    const error = await openai.embeddings.create({ model: MODEL, input: "" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
  });

  it("asks for the API key when one is set", async () => {
    const locked = await start({ apiKey: "secret" });
    try {
      const error = await client(locked, "wrong").embeddings.create({ model: MODEL, input: "a" }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
      const ok = await client(locked, "secret").embeddings.create({ model: MODEL, input: "a" });
      expect(ok.data).toHaveLength(1);
    } finally {
      await locked.close();
    }
  });
});
