/**
 * CPU accounting of server processes from `/proc/<pid>/stat` (Linux only): user + system time of
 * the whole process, all threads included.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";

/** Clock ticks per second (`getconf CLK_TCK`), 100 on practically every Linux. */
export function clockTicksPerSecond(): number {
  const res = spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" });
  const ticks = Number(res.stdout?.trim());
  return res.status === 0 && Number.isInteger(ticks) && ticks > 0 ? ticks : 100;
}

/** Whether per-process CPU time can be read on this system. */
export function procAvailable(): boolean {
  return existsSync(`/proc/${process.pid}/stat`);
}

/** utime + stime of a process in clock ticks. Throws when the process is gone. */
export function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // The command name (field 2) may contain spaces; the fields after its closing paren do not.
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // rest[0] is field 3 (state); utime and stime are fields 14 and 15.
  return Number(rest[11]) + Number(rest[12]);
}

/** The command name of a process (`/proc/<pid>/comm`), or `undefined` when it is gone. */
export function commandName(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return undefined;
  }
}

/**
 * The pid doing the work: `pid` itself when its command is `name`, else a direct child named `name`
 * (in case a launcher script wraps the binary). Throws when neither is found, so CPU figures never
 * silently come from a wrapper that merely waits.
 */
export function resolveWorkerPid(pid: number, name: string): number {
  if (commandName(pid) === name) return pid;
  let children: string[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean);
  } catch {
    // no children file: fall through
  }
  for (const child of children) {
    if (commandName(Number(child)) === name) return Number(child);
  }
  throw new Error(`process ${pid} (${commandName(pid) ?? "gone"}) is not ${name} and has no ${name} child`);
}

/** Busy clock ticks of the whole machine (all CPUs) from `/proc/stat`: everything but idle and iowait. */
export function machineBusyTicks(): number {
  const line = readFileSync("/proc/stat", "utf8").split("\n", 1)[0] ?? "";
  const [, user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).map(Number);
  return (user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0);
}
