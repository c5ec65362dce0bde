import type { AlarmStorage } from "../deps/alarm-storage.ts";
import type { Clock } from "../deps/clock.ts";

/** What the TelemetryClock object runs on, so its logic runs and is tested without the object. */
export interface TelemetryClockDeps {
  readonly alarm: AlarmStorage;
  readonly clock: Clock;
  /** The OTLP configuration now (gateway.yaml `observability.otlp`); undefined when there is none. */
  readonly otlp: () => { readonly metrics: boolean; readonly metricsIntervalMs: number } | undefined;
  /** The Worker's `Telemetry` entrypoint: `tick` pushes whatever is due. */
  readonly worker: { tick(): Promise<void> };
}

/**
 * The telemetry clock: an alarm once per metrics interval that has the Worker push its metrics
 * while no request arrives (on workerd nothing else wakes an isolate without a request). `arm`
 * sets the alarm unless one fires within the interval, so every isolate may arm it and a second
 * `arm` never adds a tick. The alarm re-arms before it ticks, so a failed tick never stops the
 * clock, and reads the interval at each run, so a configuration that pushes no metrics lets the
 * clock run down.
 */
export class TelemetryClockService {
  readonly #d: TelemetryClockDeps;

  constructor(deps: TelemetryClockDeps) {
    this.#d = deps;
  }

  /** The metrics push interval, or undefined when no metrics are pushed. */
  #interval(): number | undefined {
    const otlp = this.#d.otlp();
    return otlp?.metrics === true ? otlp.metricsIntervalMs : undefined;
  }

  async arm(): Promise<void> {
    const interval = this.#interval();
    if (interval === undefined) return;
    const next = this.#d.clock.now() + interval;
    const armed = await this.#d.alarm.getAlarm();
    if (armed === null || armed > next) await this.#d.alarm.setAlarm(next);
  }

  async alarm(): Promise<void> {
    const interval = this.#interval();
    if (interval === undefined) return;
    await this.#d.alarm.setAlarm(this.#d.clock.now() + interval);
    // The exporter counts and logs a failed push itself; a tick that could not run waits for the next alarm.
    await this.#d.worker.tick().catch(() => undefined);
  }
}
