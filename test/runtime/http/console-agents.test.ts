import { describe, expect, it } from "vitest";
import { a2aAgentsSection } from "../../../src/http/console-pages.ts";

const NOW = Date.parse("2026-12-07T12:00:00Z");

describe("console backends: the A2A agents", () => {
  it("shows each agent's probe verdict and where its card stands", () => {
    const out = a2aAgentsSection(
      [
        { name: "summarizer", probed: true, status: "healthy", lastReason: "ok", lastProbeAt: "2026-12-07T11:59:50Z", consecutiveFailures: 0, card: { source: "fetched", fetchedAt: "2026-12-07T11:58:00Z", lastFailure: null } },
        { name: "flaky", probed: true, status: "unhealthy", lastReason: "http_503", lastProbeAt: "2026-12-07T11:59:55Z", consecutiveFailures: 3, card: { source: "fetched", fetchedAt: "2026-12-07T11:00:00Z", lastFailure: { at: "2026-12-07T11:59:00Z", reasons: ["skills: required", "<b>"] } } },
        { name: "pending", probed: false, status: "unknown", lastReason: null, lastProbeAt: null, consecutiveFailures: 0, card: { source: "fetched", fetchedAt: null, lastFailure: null } },
        { name: "local", probed: false, status: "unknown", lastReason: null, lastProbeAt: null, consecutiveFailures: 0, card: { source: "inline" } },
        { name: "gone", probed: false, status: "unknown", lastReason: null, lastProbeAt: null, consecutiveFailures: 0, card: { source: "fetched", fetchedAt: null, lastFailure: null, error: "registry unreachable" } },
      ],
      NOW,
    ).text;
    const rows = out.split("<tr>").slice(2);
    expect(rows).toHaveLength(5);
    expect(rows[0]).toContain("<code>summarizer</code>");
    expect(rows[0]).toContain("fetched 2 min ago");
    expect(rows[0]).toContain("healthy");
    expect(rows[1]).toContain("unhealthy");
    expect(rows[1]).toContain("http_503");
    expect(rows[1]).toContain("last failure 1 min ago: skills: required; &lt;b&gt;");
    expect(rows[2]).toContain("not fetched yet");
    expect(rows[3]).toContain("inline");
    expect(rows[4]).toContain("registry unreachable");
    expect(a2aAgentsSection([], NOW).text).toContain("No A2A agents are configured.");
  });
});
