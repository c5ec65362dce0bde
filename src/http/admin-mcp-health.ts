import { mcpHealthId } from "../mcp/health-probe.ts";
import type { HealthClient } from "../traffic/health-client.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";

/** One MCP server in `GET /admin/status`: what it is and what its probes last said. */
export interface McpServerStatus {
  readonly name: string;
  /** `stateful` or `stateless` (its era), or `rest` (served by the gateway from an HTTP API). */
  readonly kind: "stateful" | "stateless" | "rest";
  /** False when it has no `healthCheck` (or health is disabled): its status is then `unknown`. */
  readonly probed: boolean;
  readonly status: "unknown" | "healthy" | "unhealthy";
  /** The last probe's reason (`ok`, `http_503`, `timeout`, …); null before the first. */
  readonly lastReason: string | null;
  readonly lastProbeAt: string | null;
  readonly consecutiveFailures: number;
}

/**
 * The configured MCP servers with their monitors' verdicts, read from the monitors themselves (not
 * an isolate's cache), so an operator sees the state the next requests will act on. A server whose
 * probes have not started yet (they start with its first use) or whose monitor cannot be read is
 * `unknown`.
 */
export async function mcpServerStatuses(rt: GatewayRuntime, monitors: HealthClient): Promise<McpServerStatus[]> {
  const enabled = rt.config.gateway.health.enabled;
  return await Promise.all(
    rt.config.gateway.mcp.servers.map(async (s): Promise<McpServerStatus> => {
      const base = { name: s.name, kind: s.rest !== undefined ? "rest" : s.era, lastReason: null, lastProbeAt: null, consecutiveFailures: 0 } as const;
      const probed = enabled && s.rest === undefined && s.healthCheck !== undefined;
      if (!probed) return { ...base, probed: false, status: "unknown" };
      try {
        const v = await monitors.state(mcpHealthId(s.name));
        if (!v.watching) return { ...base, probed: true, status: "unknown" };
        return { ...base, probed: true, status: v.status, lastReason: v.lastReason ?? null, lastProbeAt: v.lastProbeAt === undefined ? null : new Date(v.lastProbeAt).toISOString(), consecutiveFailures: v.consecutiveFailures };
      } catch {
        return { ...base, probed: true, status: "unknown", lastReason: "monitor unreachable" };
      }
    }),
  );
}
