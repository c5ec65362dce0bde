import { usageError } from "./cli-error.ts";

/** A `HOST:PORT` listener address (IPv6 in brackets); port 0 is refused: the address must be known to be printed. */
export function parseAddress(text: string, flag: string): { host: string; port: number } {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:\s[\]]+):(\d{1,5})$/.exec(text);
  const port = m ? Number(m[2]) : NaN;
  if (!m || !(port >= 1 && port <= 65535)) throw usageError(`${flag} must be HOST:PORT with a port from 1 to 65535, got '${text}'`);
  return { host: m[1]!, port };
}

/** The URL a client on this machine uses to reach a listener bound to `host` (wildcards mean loopback). */
export function localUrl(a: { host: string; port: number }, scheme: "http" | "https" = "http"): string {
  const host = a.host === "0.0.0.0" ? "127.0.0.1" : a.host === "[::]" ? "[::1]" : a.host;
  return `${scheme}://${host}:${a.port}`;
}

