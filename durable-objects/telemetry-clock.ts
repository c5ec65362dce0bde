import { DurableObject } from "cloudflare:workers";
import { systemClock } from "../src/deps/clock.ts";
import { TelemetryClockService } from "../src/telemetry/telemetry-clock-service.ts";
import { isolateConfig } from "../src/worker/isolate-config.ts";

/**
 * TelemetryClock: one instance (`TELEMETRY_CLOCK.getByName("global")`) whose alarm has the Worker
 * push its OTLP metrics while no request arrives. A thin shell over TelemetryClockService.
 *
 * On workerd a timer runs only while a request (or its `waitUntil`) is alive, and standalone
 * workerd has no cron triggers; a Durable Object alarm fires with no request, under `sluice serve`
 * and on the edge alike. The tick reaches the Worker's `Telemetry` entrypoint through
 * `ctx.exports`, a loopback to this Worker's own exports that no socket or binding exposes.
 */
export class TelemetryClock extends DurableObject<Env> {
  readonly #clock: TelemetryClockService;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#clock = new TelemetryClockService({
      alarm: ctx.storage,
      clock: systemClock,
      otlp: () => isolateConfig(env).gateway.observability.otlp,
      worker: ctx.exports.Telemetry,
    });
  }

  async arm(): Promise<void> {
    await this.#clock.arm();
  }

  override async alarm(): Promise<void> {
    await this.#clock.alarm();
  }
}
