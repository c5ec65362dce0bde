import { beforeAll, describe, expect, it } from "vitest";
import { compareThroughGateway, keyed, regressions, type ConformanceComparison } from "./support/conformance-run.ts";

/**
 * Checks that pass against the target direct and do not pass through the gateway yet, keyed
 * `<scenario> <check id>`, each with the reason. The test fails when a check outside this list
 * regresses, and when one in it passes (the entry is stale: remove it), so the list only shrinks.
 */
const KNOWN_GAPS: Readonly<Record<string, string>> = {
  // Not a failure: the gateway answers JSON unless it has something to stream first, so the runner has no SSE stream to check (INFO).
  "server-sse-multiple-streams server-sse-streams-functional": "answers are JSON when nothing is streamed first (INFO)",
};

/**
 * The MCP conformance runner's server scenarios, every one, against the tests' conformance target
 * (SDK 1.x, stateful era) direct and through a gateway at `/mcp/<server>`, both on loopback.
 */
describe("MCP conformance through the gateway", () => {
  let result: ConformanceComparison;

  // Everything is started and stopped inside: the target, the gateway and the key proxy.
  beforeAll(async () => {
    result = await compareThroughGateway({ timeoutMs: 120_000 });
  }, 180_000);

  it("the target passes every scenario direct, so a failure through the gateway is the gateway's", () => {
    const failed = result.direct.checks.filter((c) => c.status === "FAILURE");
    expect(failed, result.direct.output.slice(-3000)).toEqual([]);
    // Every active scenario reported checks (the pending SSE polling one reports INFO and warnings).
    expect(result.direct.checks.filter((c) => c.status === "SUCCESS").length).toBeGreaterThanOrEqual(40);
  });

  it("no check that passes direct fails through the gateway, apart from the known gaps", () => {
    const lost = regressions(result.direct, result.gateway);
    const unexpected = lost.filter((l) => !(l.key in KNOWN_GAPS));
    expect(unexpected, result.gatewayOutput.slice(-3000)).toEqual([]);
    const through = keyed(result.gateway);
    const stale = Object.keys(KNOWN_GAPS).filter((k) => (through.get(k) ?? []).some((c) => c.status === "SUCCESS"));
    expect(stale, "these known gaps pass through the gateway now: remove them from KNOWN_GAPS").toEqual([]);
  });

  it("passes through the gateway what it serves: initialize, ping, tools, resources, prompts, DNS-rebinding protection", () => {
    const through = keyed(result.gateway);
    const passes = (k: string) => (through.get(k) ?? []).length > 0 && through.get(k)!.every((c) => c.status === "SUCCESS");
    for (const k of [
      "server-initialize server-initialize",
      "ping ping",
      "tools-list tools-list",
      "tools-call-simple-text tools-call-simple-text",
      "tools-call-image tools-call-image",
      "tools-call-audio tools-call-audio",
      "tools-call-embedded-resource tools-call-embedded-resource",
      "tools-call-mixed-content tools-call-mixed-content",
      "tools-call-error tools-call-error",
      "json-schema-2020-12 json-schema-2020-12-$defs",
      "resources-list resources-list",
      "resources-read-text resources-read-text",
      "resources-read-binary resources-read-binary",
      "resources-templates-read resources-templates-read",
      "prompts-list prompts-list",
      "prompts-get-with-args prompts-get-with-args",
      "prompts-get-embedded-resource prompts-get-embedded-resource",
      "prompts-get-with-image prompts-get-with-image",
      "dns-rebinding-protection localhost-host-rebinding-rejected",
      "dns-rebinding-protection localhost-host-valid-accepted",
    ]) {
      expect(passes(k), `${k} through the gateway: ${JSON.stringify(through.get(k))}`).toBe(true);
    }
  });
});
