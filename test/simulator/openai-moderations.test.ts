/**
 * `POST /v1/moderations`: OpenAI's shape through the official client, and the documented
 * triggers (vocabulary and exact `[[mod:…]]` markers) that moderation tests build on.
 */

import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import OpenAI from "openai";
import { MODERATION_CATEGORIES } from "../../simulator/moderation.ts";
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

/** The one result for `input`. */
async function moderate(input: string): Promise<OpenAI.Moderation> {
  const res = await openai.moderations.create({ input });
  const [result] = res.results;
  if (result === undefined) throw new Error("no result");
  return result;
}

/** The categories with a non-zero score. */
const raised = (result: OpenAI.Moderation): Record<string, number> =>
  Object.fromEntries(Object.entries(result.category_scores).filter(([, score]) => score > 0));

describe("shape", () => {
  it("answers one result with every OpenAI category, unflagged for plain text", async () => {
    const res = await openai.moderations.create({ input: "The weather is lovely today." });
    expect(res.id).toMatch(/^modr-/);
    expect(res.model).toBe("omni-moderation-latest");
    expect(res.results).toHaveLength(1);
    const result = res.results[0];
    expect(Object.keys(result?.categories ?? {})).toEqual([...MODERATION_CATEGORIES]);
    expect(Object.keys(result?.category_scores ?? {})).toEqual([...MODERATION_CATEGORIES]);
    expect(result?.flagged).toBe(false);
    expect(Object.values(result?.category_scores ?? {}).every((s) => s === 0)).toBe(true);
    expect(result?.category_applied_input_types.violence).toEqual(["text"]);
  });

  it("echoes the model and answers a batch in order", async () => {
    const res = await openai.moderations.create({ model: "omni-moderation-2024-09-26", input: ["fine", "you idiot", "also fine"] });
    expect(res.model).toBe("omni-moderation-2024-09-26");
    expect(res.results.map((r) => r.flagged)).toEqual([false, true, false]);
  });

  it("takes multi-modal parts as one item, images accepted and not looked at", async () => {
    const res = await openai.moderations.create({
      input: [
        { type: "text", text: "a gory scene" },
        { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
      ],
    });
    expect(res.results).toHaveLength(1);
    const result = res.results[0];
    expect(result?.categories["violence/graphic"]).toBe(true);
    expect(result?.category_applied_input_types["violence/graphic"]).toEqual(["text", "image"]);
    expect(result?.category_applied_input_types.harassment).toEqual(["text"]);
  });
});

describe("triggers", () => {
  it("raises a category per trigger word: 0.7, then 0.91, flagged from 0.5", async () => {
    const one = await moderate("I will murder this exam");
    expect(raised(one)).toEqual({ violence: 0.7 });
    expect(one.flagged).toBe(true);
    expect(one.categories.violence).toBe(true);
    expect(one.categories.harassment).toBe(false);
    expect((await moderate("Murder, then murder again.")).category_scores.violence).toBeCloseTo(0.91, 10);
    // Whole words only: "skill" holds "kill" but is not it.
    expect((await moderate("a skill to learn")).flagged).toBe(false);
  });

  it("matches phrases, and a subcategory raises its category too", async () => {
    expect(raised(await moderate("Sometimes I want to die."))).toEqual({ "self-harm": 0.7, "self-harm/intent": 0.7 });
    expect(raised(await moderate("Self-harm is discussed here."))).toEqual({ "self-harm": 0.7 });
    expect(raised(await moderate("Watch your back."))).toEqual({ harassment: 0.7, "harassment/threatening": 0.7 });
  });

  it("sets scores exactly with markers, which win over the vocabulary and do not propagate", async () => {
    expect(raised(await moderate("plain [[mod:hate=0.42]]"))).toEqual({ hate: 0.42 });
    expect((await moderate("plain [[mod:hate=0.42]]")).flagged).toBe(false);
    const edge = await moderate("plain [[mod:violence=0.5 sexual=0.1]]");
    expect(raised(edge)).toEqual({ violence: 0.5, sexual: 0.1 });
    expect(edge.flagged).toBe(true);
    expect(raised(await moderate("murder [[mod:violence=0]]"))).toEqual({});
    expect(raised(await moderate("x [[mod:violence/graphic=0.9]]"))).toEqual({ "violence/graphic": 0.9 });
    expect(raised(await moderate("[[mod:illicit=0.2]] then [[mod:illicit=0.8]]"))).toEqual({ illicit: 0.8 });
  });
});

describe("errors", () => {
  it("refuses a bad marker like a bad knob, loudly", async () => {
    for (const input of ["x [[mod:violent=0.9]]", "x [[mod:violence=1.5]]", "x [[mod:violence]]"]) {
      const res = await post(sim, "/v1/moderations", { input });
      expect(res.status).toBe(400);
      const { error } = (await res.json()) as { error: { code: string; param: string } };
      expect(error).toMatchObject({ code: "invalid_sim_knob", param: "input" });
    }
    expect((await stats(sim)).outcomes.rejected).toBe(3);
  });

  it("refuses a missing, empty or mistyped input with OpenAI's messages", async () => {
    const cases: [unknown, string | null, RegExp][] = [
      [{}, "missing_required_parameter", /Missing required parameter: 'input'/],
      [{ input: [] }, "empty_array", /empty array/],
      [{ input: 7 }, "invalid_type", /Invalid type for 'input'/],
      [{ input: [{ type: "audio", audio: "x" }] }, "invalid_value", /Supported values are: 'text', and 'image_url'/],
      [{ input: "x", model: 3 }, "invalid_type", /Invalid type for 'model'/],
    ];
    for (const [body, code, message] of cases) {
      const res = await post(sim, "/v1/moderations", body);
      expect(res.status).toBe(400);
      const { error } = (await res.json()) as { error: { code: string | null; message: string; type: string } };
      expect(error.type).toBe("invalid_request_error");
      expect(error.code).toBe(code);
      expect(error.message).toMatch(message);
    }
  });
});
