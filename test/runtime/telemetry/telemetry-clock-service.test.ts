import { describe, expect, it } from "vitest";
import { TelemetryClockService } from "../../../src/telemetry/telemetry-clock-service.ts";
import { FakeAlarmStorage } from "../support/fake-alarm-storage.ts";
import { FakeClock } from "../traffic/helpers.ts";

function harness(interval: number | undefined, tick: () => Promise<void> = async () => {}) {
  const clock = new FakeClock(1_000);
  const alarm = new FakeAlarmStorage();
  let ticks = 0;
  let current = interval;
  const service = new TelemetryClockService({
    alarm,
    clock,
    otlp: () => (current === undefined ? undefined : { metrics: true, metricsIntervalMs: current }),
    worker: {
      tick: async () => {
        ticks++;
        await tick();
      },
    },
  });
  return { clock, alarm, service, ticks: () => ticks, configure: (i: number | undefined) => (current = i) };
}

describe("telemetry clock", () => {
  it("arms once per interval however many isolates arm it, and re-arms each time it ticks", async () => {
    const h = harness(60_000);
    await h.service.arm();
    expect(h.alarm.at).toBe(61_000);
    h.clock.advance(30_000);
    await h.service.arm();
    // A second isolate's arm neither adds a tick nor delays the one set.
    expect(h.alarm.at).toBe(61_000);
    h.clock.advance(30_000);
    await h.service.alarm();
    expect(h.ticks()).toBe(1);
    expect(h.alarm.at).toBe(121_000);
  });

  it("a shorter interval brings the next tick forward", async () => {
    const h = harness(60_000);
    await h.service.arm();
    h.configure(5_000);
    await h.service.arm();
    expect(h.alarm.at).toBe(6_000);
  });

  it("keeps ticking when a tick fails, and runs down once no metrics are pushed", async () => {
    const h = harness(1_000, async () => {
      throw new Error("the Worker could not be reached");
    });
    await h.service.arm();
    h.clock.advance(1_000);
    await h.service.alarm();
    expect(h.ticks()).toBe(1);
    expect(h.alarm.at).toBe(3_000);
    h.configure(undefined);
    h.clock.advance(1_000);
    const before = h.alarm.log.length;
    await h.service.alarm();
    expect(h.ticks()).toBe(1);
    expect(h.alarm.log.length).toBe(before);
    await h.service.arm();
    expect(h.alarm.log.length).toBe(before);
  });
});
