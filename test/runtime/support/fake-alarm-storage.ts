import type { AlarmStorage } from "../../../src/deps/alarm-storage.ts";

/** An object's alarm in memory, logging every read and write so a test sees what was asked. */
export class FakeAlarmStorage implements AlarmStorage {
  at: number | null;
  readonly log: string[] = [];

  constructor(at: number | null = null) {
    this.at = at;
  }

  async getAlarm(): Promise<number | null> {
    this.log.push("get");
    return this.at;
  }

  async setAlarm(scheduledTime: number): Promise<void> {
    this.log.push(`set ${scheduledTime}`);
    this.at = scheduledTime;
  }
}
