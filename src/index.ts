import { env as bootEnv, WorkerEntrypoint } from "cloudflare:workers";
import { createAdminApp } from "./http/admin-app.ts";
import { createMetricsApp } from "./http/metrics-endpoint.ts";
import { createPublicApp } from "./http/public-app.ts";
import { isolateConfig } from "./worker/isolate-config.ts";
import { getRuntime } from "./worker/runtime.ts";

// Composition root. Validate config at module load: an invalid config fails the Worker's start
// with every issue listed, instead of failing the Nth request.
isolateConfig(bootEnv as Env);

const publicApp = createPublicApp(getRuntime);
const adminApp = createAdminApp(getRuntime);
const metricsApp = createMetricsApp(getRuntime);

let clockArmed = false;

/**
 * Arms the telemetry clock once per isolate, from its first request of any listener (the
 * supervisor's readiness probe included), when metrics are pushed: after that the clock's alarm
 * pushes them even while no request arrives. Its alarm is durable, so it keeps running across
 * restarts that keep the state directory.
 */
function armTelemetryClock(env: Env, ctx: ExecutionContext): void {
  if (clockArmed) return;
  clockArmed = true;
  if (isolateConfig(env).gateway.observability.otlp?.metrics !== true) return;
  ctx.waitUntil(
    env.TELEMETRY_CLOCK.getByName("global")
      .arm()
      .catch(() => {
        clockArmed = false;
      }),
  );
}

/** Public listener. */
export default class Gateway extends WorkerEntrypoint<Env> {
  override fetch(request: Request): Promise<Response> | Response {
    armTelemetryClock(this.env, this.ctx);
    return publicApp.fetch(request, this.env, this.ctx);
  }
}

/** Admin listener: bound only to the admin socket (workerd) or a service binding, never public. */
export class Admin extends WorkerEntrypoint<Env> {
  override fetch(request: Request): Promise<Response> | Response {
    armTelemetryClock(this.env, this.ctx);
    return adminApp.fetch(request, this.env, this.ctx);
  }
}

/** Metrics listener: `GET /metrics` without a token, bound only to a loopback socket when configured. */
export class Metrics extends WorkerEntrypoint<Env> {
  override fetch(request: Request): Promise<Response> | Response {
    return metricsApp.fetch(request, this.env, this.ctx);
  }
}

/**
 * The telemetry clock's tick (durable-objects/telemetry-clock.ts). No socket is bound to it: it is
 * reached only through `ctx.exports` from inside this Worker.
 */
export class Telemetry extends WorkerEntrypoint<Env> {
  async tick(): Promise<void> {
    const rt = await getRuntime(this.env);
    rt.telemetry.exporter?.tick((p) => this.ctx.waitUntil(p));
  }
}

export { BackendSnapshotController } from "../durable-objects/backend-snapshot-controller.ts";
export { PublicationController } from "../durable-objects/publication-controller.ts";
export { CircuitBreaker } from "../durable-objects/circuit-breaker.ts";
export { AttemptBudget } from "../durable-objects/attempt-budget.ts";
export { HealthMonitor } from "../durable-objects/health-monitor.ts";
export { AgentCardRegistry } from "../durable-objects/agent-card-registry.ts";
export { BudgetLedger } from "../durable-objects/budget-ledger.ts";
export { ApprovalDesk } from "../durable-objects/approval-desk.ts";
export { TaskBinding } from "../durable-objects/task-binding.ts";
export { TaskLedger } from "../durable-objects/task-ledger.ts";
export { ResponseCache } from "../durable-objects/response-cache.ts";
export { TelemetryClock } from "../durable-objects/telemetry-clock.ts";
