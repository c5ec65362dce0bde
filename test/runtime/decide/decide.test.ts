import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/load-config.ts";
import { validatePlan } from "../../../src/decide/dispatch-plan.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import type { NeutralRequest } from "../../../src/protocol/neutral.ts";
import { compilePublication } from "../../../src/publication/compile-publication.ts";
import { bundledTexts } from "../support/fixtures.ts";
import { compileUnchecked, entrypoint, image, input, request, rules, T0, tierIds, tool, user, planRequest } from "./decide-support.ts";

/** Whatever planRequest throws (fails the test when it returns a plan). */
function thrownBy(fn: () => unknown): GatewayError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError);
    return err as GatewayError;
  }
  throw new Error("expected planRequest to throw");
}

/** Every property name anywhere in a value. */
function keysOf(value: unknown, into = new Set<string>()): Set<string> {
  if (value !== null && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      into.add(k);
      keysOf(v, into);
    }
  }
  return into;
}

const hello = [user("hello")];
const plainPlan = (extra: Partial<NeutralRequest> = {}) => planRequest(rules, entrypoint("plain"), request("plain", hello, extra), input());

describe("planRequest: the plan", () => {
  it("names the request, the pinned publication revision, the entrypoint, the rule and the retry bound", () => {
    const plan = planRequest(rules, entrypoint("ordered"), request("ordered", hello, { stream: true }), input({ requestId: "req_42", clientProtocol: "anthropic-messages" }));
    expect(plan).toMatchObject({
      requestId: "req_42",
      publicationRevision: "decide-test-1",
      entrypoint: "ordered",
      route: "default",
      retry: { maxAttempts: 4 },
      clientProtocol: "anthropic-messages",
      stream: true,
    });
    // An entrypoint that sets no retry bound allows one attempt.
    expect(plainPlan().retry).toEqual({ maxAttempts: 1 });
    expect(plainPlan().stream).toBe(false);
  });

  it("resolves each tier's logical models to their active revision, its pool and declared downgrades", () => {
    const plan = planRequest(rules, entrypoint("ordered"), request("ordered", hello), input());
    expect(plan.tiers).toEqual([
      [{ logicalModel: "small", revision: 1, pool: "pool-small", requires: ["chat"], downgrades: [] }],
      // large's active revision is 2: neither revision 1 nor its pool may appear.
      [{ logicalModel: "large", revision: 2, pool: "pool-large", requires: ["chat", "streaming", "tools"], downgrades: ["top_k"] }],
      [{ logicalModel: "vision", revision: 1, pool: "pool-vision", requires: ["chat", "images"], downgrades: [] }],
    ]);
  });

  it("drops models the publication does not know, and a tier left with none", () => {
    const pub = compileUnchecked(`
version: 1
revision: ghosts-1
tenants: [{ id: t }]
entrypoints:
  - name: haunted
    default: [[ghost], [ghost, small], [retired], [small, phantom]]
models:
  - id: small
    activeRevision: 1
    revisions: [{ revision: 1, pool: pool-small }]
  # Its active revision is not among its revisions, so it has none to plan.
  - id: retired
    activeRevision: 3
    revisions: [{ revision: 1, pool: pool-retired }]
`);
    const plan = planRequest(pub, entrypoint("haunted", pub), request("haunted", hello), input());
    expect(tierIds(plan)).toEqual([["small"], ["small"]]);
  });

  it("refuses as the gateway's own fault when no tier has a known model left", () => {
    const pub = compileUnchecked(`
version: 1
revision: ghosts-2
tenants: [{ id: t }]
entrypoints:
  - { name: empty, default: [[ghost], [phantom]] }
models:
  - { id: small, activeRevision: 1, revisions: [{ revision: 1, pool: pool-small }] }
`);
    const err = thrownBy(() => planRequest(pub, entrypoint("empty", pub), request("empty", hello), input()));
    expect(err.code).toBe("internal_error");
    expect(err.status).toBe(500);
    expect(err.cause).toEqual(["plan has an empty tier"]);
  });
});

describe("planRequest: capabilities the request needs", () => {
  const requiresOf = (extra: Partial<NeutralRequest>, messages = hello) => plainPlan({ ...extra, messages }).tiers[0]![0]!.requires;

  it("adds chat always, and streaming, tools, images and json-schema when the request uses them", () => {
    expect(requiresOf({})).toEqual(["chat"]);
    expect(requiresOf({ stream: true })).toEqual(["chat", "streaming"]);
    expect(requiresOf({ tools: [tool] })).toEqual(["chat", "tools"]);
    expect(requiresOf({}, [user("what is this?", image())])).toEqual(["chat", "images"]);
    expect(requiresOf({ responseFormat: { type: "json_schema", name: "x", schema: { type: "object" } } })).toEqual(["chat", "json-schema"]);
    // Plain JSON mode is not a schema: every chat backend can be asked for it.
    expect(requiresOf({ responseFormat: { type: "json_object" } })).toEqual(["chat"]);
    // An empty tool list needs no tool support.
    expect(requiresOf({ tools: [] })).toEqual(["chat"]);
  });

  it("merges them into each planned model's own requirements, once each", () => {
    const plan = planRequest(rules, entrypoint("ordered"), request("ordered", [user("look", image())], { stream: true, tools: [tool] }), input());
    const requires = Object.fromEntries(plan.tiers.flat().map((m) => [m.logicalModel, m.requires]));
    expect(requires).toEqual({
      small: ["chat", "images", "streaming", "tools"],
      large: ["chat", "images", "streaming", "tools"],
      vision: ["chat", "images", "streaming", "tools"],
    });
    const json = planRequest(rules, entrypoint("ordered"), request("ordered", hello, { responseFormat: { type: "json_schema", schema: {} } }), input());
    expect(Object.fromEntries(json.tiers.flat().map((m) => [m.logicalModel, m.requires]))).toEqual({
      small: ["chat", "json-schema"],
      large: ["chat", "json-schema", "streaming", "tools"],
      vision: ["chat", "images", "json-schema"],
    });
  });

  it("keeps one request's needs out of the next request's plan and out of the publication", () => {
    expect(requiresOf({ stream: true, tools: [tool] }, [user("look", image())])).toEqual(["chat", "images", "streaming", "tools"]);
    expect(requiresOf({})).toEqual(["chat"]);
    expect(requiresOf({ stream: true })).toEqual(["chat", "streaming"]);
    expect(rules.models.get("small")!.requires).toEqual(["chat"]);
    expect(rules.models.get("large")!.requires).toEqual(["tools", "chat", "streaming"]);
  });
});

describe("planRequest: the deadline", () => {
  it("counts the gateway's bound from when the request was received, not from when it is planned", () => {
    expect(planRequest(rules, entrypoint("plain"), request("plain", hello), input({ now: T0 + 5_000 })).deadlineAt).toBe(T0 + 60_000);
  });

  it("is the earlier of the gateway's bound and the caller's deadline", () => {
    expect(planRequest(rules, entrypoint("plain"), request("plain", hello), input({ callerDeadlineAt: T0 + 10_000 })).deadlineAt).toBe(T0 + 10_000);
    expect(planRequest(rules, entrypoint("plain"), request("plain", hello), input({ callerDeadlineAt: T0 + 600_000 })).deadlineAt).toBe(T0 + 60_000);
  });

  it("throws deadline_exceeded when the gateway's bound ran out before planning", () => {
    const plan = (now: number) => planRequest(rules, entrypoint("plain"), request("plain", hello), input({ now }));
    expect(plan(T0 + 59_999).deadlineAt).toBe(T0 + 60_000);
    for (const now of [T0 + 60_000, T0 + 90_000]) {
      const err = thrownBy(() => plan(now));
      expect(err.code).toBe("deadline_exceeded");
      expect(err.status).toBe(504);
    }
  });

  it("throws deadline_exceeded when the caller's deadline already passed, however much of ours is left", () => {
    for (const callerDeadlineAt of [T0, T0 - 1_000]) {
      expect(thrownBy(() => planRequest(rules, entrypoint("plain"), request("plain", hello), input({ callerDeadlineAt }))).code).toBe("deadline_exceeded");
    }
  });
});

describe("planRequest: affinity", () => {
  it("takes the key from the entrypoint's configured trusted header", () => {
    const headers = new Map([["x-sluice-session", "s-42"], ["x-sluice-tier", "gold"]]);
    expect(planRequest(rules, entrypoint("ordered"), request("ordered", hello), input({ trustedHeaders: headers })).affinityKey).toBe("s-42");
  });

  it("has none when that header is absent, whatever other trusted header is present", () => {
    const headers = new Map([["x-sluice-tier", "gold"], ["x-sluice-end-user", "u-1"]]);
    expect(planRequest(rules, entrypoint("ordered"), request("ordered", hello), input({ trustedHeaders: headers })).affinityKey).toBeUndefined();
  });

  it("has none for an entrypoint that configures no affinity header, even when a session header is sent", () => {
    const headers = new Map([["x-sluice-session", "s-42"]]);
    expect(planRequest(rules, entrypoint("plain"), request("plain", hello), input({ trustedHeaders: headers })).affinityKey).toBeUndefined();
  });
});

describe("planRequest: no physical detail", () => {
  const forbidden = ["url", "baseUrl", "address", "host", "secret", "credential", "apiKey", "health"];

  it("makes plans the structural check accepts, with no address, secret or health key anywhere", () => {
    const cases: [string, Partial<NeutralRequest>, Record<string, string>][] = [
      ["ordered", {}, {}],
      ["ordered", { stream: true, tools: [tool], messages: [user("my code", image())] }, { "x-sluice-session": "s-1" }],
      ["ordered", {}, { "x-sluice-tier": "premium" }],
      ["by-tokens", { messages: [user("x".repeat(500))] }, {}],
    ];
    for (const [ep, extra, headers] of cases) {
      const plan = planRequest(rules, entrypoint(ep), request(ep, hello, extra), input({ trustedHeaders: new Map(Object.entries(headers)) }));
      expect(validatePlan(plan, T0)).toEqual([]);
      expect([...keysOf(plan)].filter((k) => forbidden.includes(k))).toEqual([]);
    }
  });

  it("carries nothing of the bundled backends: no address, credential name or backend name", () => {
    const config = loadConfig(bundledTexts);
    const pub = compilePublication(config.publication);
    const ep = pub.entrypoints.get("sluice-chat")!;
    const req = request("sluice-chat", [user("fix this code", image())], { stream: true, tools: [tool] });
    const plan = planRequest(pub, ep, req, input({ trustedHeaders: new Map([["x-sluice-session", "s-9"]]), requestDeadlineMs: config.gateway.traffic.requestDeadlineMs }));
    expect(plan.route).toBe("code");
    expect(validatePlan(plan, T0)).toEqual([]);
    const text = JSON.stringify(plan);
    for (const b of config.backendsSeed.backends) {
      expect(text).not.toContain(b.baseUrl);
      if (b.credential) expect(text).not.toContain(b.credential.secret);
      expect(text).not.toContain(b.name);
    }
    expect(text).not.toMatch(/https?:|127\.0\.0\.1/);
  });
});
