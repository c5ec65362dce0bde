import { spawn, type ChildProcess, type SpawnOptions } from "node:child_process";

/**
 * Runs the command in place of a small POSIX shell that first forks a watcher holding the read
 * end of a pipe whose write end only the launcher holds (the child's stdin, duplicated to fd 3).
 * When the launcher exits for any reason — SIGKILL and crashes included — the kernel closes that
 * write end, `read` sees end of file and the watcher stops the command: SIGTERM, then SIGKILL
 * after a grace period. `exec` keeps the pid, so the launcher signals and waits for the command
 * itself. The command gets /dev/null as stdin and never sees fd 3.
 *
 * Why a pipe and not prctl(PR_SET_PDEATHSIG): Node cannot call prctl, a wrapper binary that can
 * (util-linux's setpriv) exists on Linux only, and the parent-death signal fires when the
 * spawning *thread* ends. The pipe needs nothing but /bin/sh and works wherever workerd does.
 */
const WATCHED_EXEC = `exec 3<&0
pid=$$
{
  while read -r _ <&3; do :; done
  kill -TERM "$pid" 2>/dev/null || exit 0
  n=0
  while [ "$n" -lt "$SLUICE_CHILD_GRACE_S" ] && kill -0 "$pid" 2>/dev/null; do sleep 1; n=$((n + 1)); done
  kill -KILL "$pid" 2>/dev/null
} </dev/null >/dev/null 2>&1 &
exec "$@" </dev/null 3<&-`;

/** A child process the launcher owns: its own process group, and it never outlives the launcher. */
export interface OwnedChild {
  readonly process: ChildProcess;
  /** Sends a signal to the child's whole process group (the command and its watcher). */
  signal(signal: NodeJS.Signals): void;
}

/**
 * Spawns `command` so that the launcher owns it:
 * - in its own process group, so a Ctrl-C in the terminal reaches the launcher only, which then
 *   decides (drain first, then stop) instead of the child dying under requests in flight;
 * - watched through a pipe, so it stops when the launcher is gone, however the launcher ended.
 * `stdin` of `options` is ignored (it is the watched pipe); stdout and stderr are as given.
 */
export function spawnOwned(command: string, args: readonly string[], options: Omit<SpawnOptions, "stdio" | "detached"> & { stdout?: "pipe" | "inherit" | "ignore"; stderr?: "pipe" | "inherit" | "ignore"; graceSeconds?: number } = {}): OwnedChild {
  const { stdout = "pipe", stderr = "pipe", graceSeconds = 10, ...rest } = options;
  const env = { ...(rest.env ?? process.env), SLUICE_CHILD_GRACE_S: String(graceSeconds) };
  const proc = spawn("/bin/sh", ["-c", WATCHED_EXEC, "sluice-owned", command, ...args], { ...rest, env, stdio: ["pipe", stdout, stderr], detached: true });
  // Never written: the pipe only signals, by closing, that the launcher is gone.
  proc.stdin!.on("error", () => {});
  const release = () => proc.stdin!.destroy();
  proc.once("exit", release);
  proc.once("error", release);
  const owned: OwnedChild = { process: proc, signal: signalGroup };
  live.add(owned);
  proc.once("exit", () => live.delete(owned));
  if (!stopLiveInstalled) {
    stopLiveInstalled = true;
    process.on("exit", stopLive);
  }
  return owned;
  function signalGroup(signal: NodeJS.Signals): void {
    if (proc.pid === undefined) return;
    try {
      process.kill(-proc.pid, signal);
    } catch {
      // ESRCH: the group has already exited.
    }
  }
}

/** Children still running; stopped on the launcher's way out. */
const live = new Set<OwnedChild>();
let stopLiveInstalled = false;

/**
 * A launcher that exits without stopping its children (an uncaught error, `process.exit`) stops
 * them on the way out; the pipe covers the endings no handler sees (SIGKILL, a crash).
 */
function stopLive(): void {
  for (const child of live) child.signal("SIGTERM");
}
