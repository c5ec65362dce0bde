/**
 * A Durable Object's one alarm, as its storage keeps it: the part of `ctx.storage` the logic behind
 * an object needs to schedule its own work, so that logic runs and is tested without the object.
 */
export interface AlarmStorage {
  /** When the alarm is set for (epoch ms); null when none is set. */
  getAlarm(): Promise<number | null>;
  /** Sets the alarm, replacing any set before. */
  setAlarm(scheduledTime: number): Promise<void>;
}
