import { describe, expect, it } from "vitest";
import { validatePlan, type DispatchPlan, type PlannedModel } from "../../../src/decide/dispatch-plan.ts";
import { entrypoint, input, request, rules, T0, user, planRequest } from "./decide-support.ts";

const model = (over: Record<string, unknown> = {}): PlannedModel => ({ logicalModel: "small", revision: 1, pool: "pool-small", requires: ["chat"], downgrades: [], ...over }) as PlannedModel;

/** A well-formed plan, a minute to live at T0; `over` may add fields no plan should have. */
function plan(over: Record<string, unknown> = {}): DispatchPlan {
  return {
    requestId: "req_1",
    publicationRevision: "rev-1",
    entrypoint: "plain",
    route: "default",
    tiers: [[model()], [model({ logicalModel: "large", pool: "pool-large" })]],
    retry: { maxAttempts: 2 },
    deadlineAt: T0 + 60_000,
    affinityKey: undefined,
    clientProtocol: "openai-chat",
    stream: false,
    ...over,
  } as DispatchPlan;
}

describe("validatePlan: the plan's shape", () => {
  it("accepts a well-formed plan", () => {
    expect(validatePlan(plan(), T0)).toEqual([]);
  });

  it("rejects a plan with no tier or with an empty tier", () => {
    expect(validatePlan(plan({ tiers: [] }), T0)).toEqual(["plan has an empty tier"]);
    expect(validatePlan(plan({ tiers: [[model()], []] }), T0)).toEqual(["plan has an empty tier"]);
  });

  it("rejects a plan that allows no attempt", () => {
    expect(validatePlan(plan({ retry: { maxAttempts: 0 } }), T0)).toEqual(["plan allows no attempt"]);
    expect(validatePlan(plan({ retry: { maxAttempts: 1 } }), T0)).toEqual([]);
  });

  it("rejects a deadline that is not strictly in the future", () => {
    expect(validatePlan(plan({ deadlineAt: T0 }), T0)).toEqual(["plan deadline is not in the future"]);
    expect(validatePlan(plan({ deadlineAt: T0 - 1 }), T0)).toEqual(["plan deadline is not in the future"]);
    expect(validatePlan(plan({ deadlineAt: Number.NaN }), T0)).toEqual(["plan deadline is not in the future"]);
    expect(validatePlan(plan({ deadlineAt: T0 + 1 }), T0)).toEqual([]);
  });

  it("reports every problem at once", () => {
    expect(validatePlan(plan({ tiers: [], retry: { maxAttempts: 0 }, deadlineAt: T0, baseUrl: "https://api.example" }), T0)).toEqual([
      "plan has an empty tier",
      "plan allows no attempt",
      "plan deadline is not in the future",
      "plan carries physical detail at plan.baseUrl",
    ]);
  });
});

describe("validatePlan: no address, secret or health in a plan", () => {
  it("rejects each key that would carry an address, a secret or health, wherever it is", () => {
    const keys = ["url", "baseUrl", "address", "host", "secret", "credential", "apiKey", "health"];
    for (const k of keys) {
      expect(validatePlan(plan({ [k]: "x" }), T0)).toEqual([`plan carries physical detail at plan.${k}`]);
      expect(validatePlan(plan({ tiers: [[model(), model({ [k]: "x" })]] }), T0)).toEqual([`plan carries physical detail at plan.tiers.0.1.${k}`]);
      expect(validatePlan(plan({ retry: { maxAttempts: 1, policy: { [k]: { value: 1 } } } }), T0)).toEqual([`plan carries physical detail at plan.retry.policy.${k}`]);
    }
  });

  it("rejects such a key whatever its value: an empty or missing one is still a slot for one", () => {
    expect(validatePlan(plan({ tiers: [[model({ health: undefined })]] }), T0)).toEqual(["plan carries physical detail at plan.tiers.0.0.health"]);
    expect(validatePlan(plan({ tiers: [[model({ credential: null })]] }), T0)).toEqual(["plan carries physical detail at plan.tiers.0.0.credential"]);
  });

  it("names every place a plan carries one", () => {
    const smuggled = plan({ apiKey: "sk-x", tiers: [[model({ baseUrl: "http://10.0.0.1" })], [model({ backend: { host: "10.0.0.2", health: "ok" } })]] });
    expect(validatePlan(smuggled, T0)).toEqual([
      "plan carries physical detail at plan.tiers.0.0.baseUrl",
      "plan carries physical detail at plan.tiers.1.0.backend.host",
      "plan carries physical detail at plan.tiers.1.0.backend.health",
      "plan carries physical detail at plan.apiKey",
    ]);
  });

  it("rescans a mutable part every time: one found clean once is not trusted later", () => {
    const m = model() as PlannedModel & Record<string, unknown>;
    const p = plan({ tiers: [[m]] });
    expect(validatePlan(p, T0)).toEqual([]);
    m["url"] = "http://10.0.0.1";
    expect(validatePlan(p, T0)).toEqual(["plan carries physical detail at plan.tiers.0.0.url"]);
  });

  it("still finds a smuggled field beside a planned model it already found clean", () => {
    const planned = planRequest(rules, entrypoint("ordered"), request("ordered", [user("hello")]), input());
    expect(validatePlan(planned, T0)).toEqual([]);
    const first = planned.tiers[0]![0]!;
    // The same frozen planned model, once more in a plan, next to a model carrying an address.
    const smuggled = { ...planned, tiers: [[first, { ...first, address: "10.0.0.1" }], ...planned.tiers.slice(1)] };
    expect(validatePlan(smuggled, T0)).toEqual(["plan carries physical detail at plan.tiers.0.1.address"]);
    expect(validatePlan({ ...planned, health: { healthy: true } } as DispatchPlan, T0)).toEqual(["plan carries physical detail at plan.health"]);
    expect(validatePlan(planned, T0)).toEqual([]);
  });
});
