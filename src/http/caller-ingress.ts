import type { Context } from "hono";
import { workloadOf } from "../attribution/workload.ts";
import { parseTraceparent } from "../context/trace-context.ts";
import type { CallerIngress } from "../kinds/traffic-kind.ts";
import type { GatewayRuntime } from "../worker/runtime.ts";
import { presentedCredentials } from "./generation.ts";
import { readJsonBody } from "./limits.ts";

type CallerEnv = { Bindings: Env; Variables: { runtime: GatewayRuntime; requestId: string; receivedAt: number } };

/**
 * What the MCP and A2A adapters hand the engine about every request alike: its id and receipt
 * time, the credentials presented, its headers, its body (bounded by `limits`), the trace it
 * continues and the workload behind it. Each adapter adds its kind's own fields.
 */
export function callerIngressOf(c: Context<CallerEnv>): CallerIngress {
  const rt = c.get("runtime");
  const request = c.req.raw;
  const limits = rt.config.gateway.limits;
  return {
    requestId: c.get("requestId"),
    receivedAt: c.get("receivedAt"),
    ...presentedCredentials(request.headers),
    headers: request.headers,
    readBody: () => readJsonBody(request, limits),
    traceParent: parseTraceparent(request.headers.get("traceparent"), request.headers.get("tracestate")),
    waitUntil: (p) => c.executionCtx.waitUntil(p),
    workload: workloadOf(request.headers, rt.config.gateway.governance.workload),
  };
}
