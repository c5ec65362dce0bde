import { describe, expect, it } from "vitest";
import { workloadOf } from "../../../src/attribution/workload.ts";
import { loadConfig } from "../../../src/config/load-config.ts";
import { issuesOf } from "../support/config-issues.ts";
import { bundled, textsWith } from "../support/fixtures.ts";

function issuesOrNone(fn: () => unknown) {
  try {
    fn();
    return [];
  } catch (err) {
    return (err as { issues?: unknown[] }).issues ?? [String(err)];
  }
}

describe("the workload behind a call", () => {
  it("is read only from the headers configured for it, bounded, and absent when none is sent", () => {
    const names = { agentHeader: "x-agent-id", endUserHeader: "x-end-user" };
    expect(workloadOf(new Headers({ "x-agent-id": " agent-7 ", "x-end-user": "u-1", "x-other": "x" }), names)).toEqual({ agent: "agent-7", endUser: "u-1" });
    expect(workloadOf(new Headers({ "x-agent-id": "a".repeat(300) }), names)?.agent).toHaveLength(128);
    expect(workloadOf(new Headers({ "x-agent-id": "agent-7" }), {})).toBeUndefined();
    expect(workloadOf(new Headers({ "x-agent-id": "  " }), names)).toBeUndefined();
  });

  it("must come from trusted headers: a workload header outside security.trustedHeaders is refused at load", () => {
    const gateway = (over: Record<string, unknown>) => ({ ...bundled("gateway"), ...over });
    const issues = issuesOf(() => loadConfig(textsWith({ gateway: gateway({ governance: { workload: { agentHeader: "x-agent-id" } } }) })));
    expect(issues.map((i) => `${i.path}: ${i.message}`), JSON.stringify(issues)).toContain('governance.workload.agentHeader: header "x-agent-id" is not in gateway.yaml security.trustedHeaders');
    const security = { ...bundled("gateway").security, trustedHeaders: [...bundled("gateway").security.trustedHeaders, "x-agent-id"] };
    expect(issuesOrNone(() => loadConfig(textsWith({ gateway: gateway({ security, governance: { workload: { agentHeader: "x-agent-id" } } }) })))).toEqual([]);
  });
});
