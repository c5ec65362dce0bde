/** How often the launcher checks that the process that started it is still there. */
const PARENT_POLL_MS = 1_000;

/**
 * Calls `onGone` once when the process that started this one has exited (this one was
 * reparented). The parent of a launcher (a shell, npx, npm) may end without passing its signal
 * on: npm forwards SIGTERM to the shell it runs the command in, and that shell dies without
 * forwarding it further. Not watched when the parent is init already (a container's PID 1, a
 * daemon started on purpose). Returns a function that stops watching; the timer never keeps the
 * process alive.
 */
export function watchParent(onGone: (parentPid: number) => void): () => void {
  const parentPid = process.ppid;
  if (parentPid <= 1) return () => {};
  const timer = setInterval(() => {
    if (process.ppid === parentPid) return;
    clearInterval(timer);
    onGone(parentPid);
  }, PARENT_POLL_MS);
  timer.unref();
  return () => clearInterval(timer);
}
