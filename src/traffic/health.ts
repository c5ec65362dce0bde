import type { Clock } from "../deps/clock.ts";
import type { Rng } from "../deps/rng.ts";
import { checkEgress, type EgressPolicy } from "../egress/egress-guard.ts";
import { credentialHeader } from "../egress/credential-header.ts";

/**
 * Active health checking: pure pieces, no I/O of their own (the probe's fetch, clock and randomness
 * are injected), so every rule is testable without a network. The HealthMonitor Durable Object (one
 * per backend id) is a thin shell: it stores the probe target, probes on its alarm with
 * {@link probeOnce}, records the result with {@link recordProbe} in one synchronous transaction and
 * re-arms at {@link nextProbeAt}. Because probing runs in that one object, any number of isolates
 * serving traffic never multiply the probes a backend receives.
 *
 * Health is advisory and only ever narrows routing: `unknown` (never probed, not watched, or
 * unreachable) counts as healthy, and {@link minimumAvailable} never empties a pool.
 */

export type HealthStatus = "unknown" | "healthy" | "unhealthy";

/**
 * A credential the probe sends, named, never stored: the Durable Object reads the secret called
 * `authorizationSecret` from its own `env` at probe time, so storage only ever holds the name.
 * - `bearer`: `Authorization: Bearer <secret>`
 * - `x-api-key`: `x-api-key: <secret>`
 * - `api-key`: `api-key: <secret>` (Azure OpenAI)
 * - `x-goog-api-key`: `x-goog-api-key: <secret>` (the Gemini API)
 */
export interface ProbeCredential {
  readonly authorizationSecret: string;
  readonly scheme: "bearer" | "x-api-key" | "api-key" | "x-goog-api-key";
}

/** What to probe and how often, as the caller passes it (from the gateway's config). */
export interface ProbeTarget {
  readonly url: string;
  /** `GET` for a backend; `POST` for an MCP server, whose probe is a protocol message (`mcp`). */
  readonly method: "GET" | "POST";
  /**
   * An MCP server's probe: `server/discover` for a stateless-era server, `initialize` (the session
   * ended at once) for a stateful one; never a tool call. Absent: the GET probe of a backend.
   */
  readonly mcp?: { readonly era: "stateful" | "stateless" };
  /**
   * Plain headers (e.g. a version header). Credential headers (`authorization`, `x-api-key`,
   * `api-key`, `x-goog-api-key`, `proxy-authorization`, `cookie`) are refused here: a credential goes in `credential`,
   * by secret name.
   */
  readonly headers: Readonly<Record<string, string>>;
  readonly credential?: ProbeCredential;
  /** A backend with `tls`: the Worker's fetcher binding its probes go through, as its requests do. */
  readonly binding?: string | undefined;
  /** A probe not answered (headers received) within this long fails as `timeout`, in ms. */
  readonly timeoutMs: number;
  /** Mean time between probes, in ms. */
  readonly intervalMs: number;
  /** Each interval is drawn uniformly from `intervalMs * (1 ± jitterRatio)`; in [0, 1). */
  readonly jitterRatio: number;
  /** Consecutive failures that make a backend `unhealthy`. Default 3. */
  readonly unhealthyAfter?: number;
  /** Consecutive successes that make an `unhealthy` backend `healthy` again. Default 2. */
  readonly healthyAfter?: number;
}

/** A target with defaults applied and every field validated. */
export interface ResolvedProbeTarget extends ProbeTarget {
  readonly unhealthyAfter: number;
  readonly healthyAfter: number;
}

export const DEFAULT_UNHEALTHY_AFTER = 3;
export const DEFAULT_HEALTHY_AFTER = 2;

const CREDENTIAL_HEADERS = new Set(["authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie"]);

/**
 * Defaults applied and validated; the result is a fresh frozen object holding only known fields.
 *
 * @throws RangeError listing every invalid field.
 */
export function resolveProbeTarget(input: ProbeTarget): ResolvedProbeTarget {
  const bad: string[] = [];
  const t = input ?? ({} as ProbeTarget);
  let url = "";
  try {
    const u = new URL(String(t.url));
    if (u.protocol !== "http:" && u.protocol !== "https:") bad.push(`url must be http(s), got ${u.protocol}`);
    url = u.toString();
  } catch {
    bad.push(`url is not a valid URL: ${String(t.url)}`);
  }
  const mcp = t.mcp === undefined || t.mcp === null ? undefined : t.mcp;
  if (mcp !== undefined && mcp.era !== "stateful" && mcp.era !== "stateless") bad.push(`mcp.era must be "stateful" or "stateless", got ${String(mcp.era)}`);
  const method = mcp === undefined ? "GET" : "POST";
  if (t.method !== method) bad.push(`method must be "${method}"${mcp === undefined ? "" : " for an MCP probe"}, got ${String(t.method)}`);
  const headers: Record<string, string> = {};
  if (t.headers !== undefined && (typeof t.headers !== "object" || t.headers === null)) bad.push("headers must be an object");
  else {
    for (const [k, v] of Object.entries(t.headers ?? {})) {
      if (typeof v !== "string") bad.push(`header ${k} must be a string`);
      else if (CREDENTIAL_HEADERS.has(k.toLowerCase())) bad.push(`header ${k} carries a credential: name a secret in credential instead`);
      else headers[k.toLowerCase()] = v;
    }
  }
  let credential: ProbeCredential | undefined;
  if (t.credential !== undefined && t.credential !== null) {
    const c = t.credential;
    if (typeof c.authorizationSecret !== "string" || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(c.authorizationSecret)) {
      bad.push(`credential.authorizationSecret must be a secret name, got ${String(c.authorizationSecret)}`);
    }
    if (c.scheme !== "bearer" && c.scheme !== "x-api-key" && c.scheme !== "api-key" && c.scheme !== "x-goog-api-key") bad.push(`credential.scheme must be "bearer", "x-api-key", "api-key" or "x-goog-api-key", got ${String(c.scheme)}`);
    credential = Object.freeze({ authorizationSecret: c.authorizationSecret, scheme: c.scheme });
  }
  if (t.binding !== undefined && (typeof t.binding !== "string" || !/^[A-Z_][A-Z0-9_]{0,63}$/.test(t.binding))) bad.push(`binding must be a binding name, got ${String(t.binding)}`);
  const positive = (k: "timeoutMs" | "intervalMs") => {
    if (!(Number.isFinite(t[k]) && t[k] > 0)) bad.push(`${k} must be a finite number > 0, got ${t[k]}`);
  };
  positive("timeoutMs");
  positive("intervalMs");
  if (!(Number.isFinite(t.jitterRatio) && t.jitterRatio >= 0 && t.jitterRatio < 1)) bad.push(`jitterRatio must be in [0, 1), got ${t.jitterRatio}`);
  const unhealthyAfter = t.unhealthyAfter ?? DEFAULT_UNHEALTHY_AFTER;
  const healthyAfter = t.healthyAfter ?? DEFAULT_HEALTHY_AFTER;
  if (!(Number.isInteger(unhealthyAfter) && unhealthyAfter >= 1)) bad.push(`unhealthyAfter must be an integer >= 1, got ${unhealthyAfter}`);
  if (!(Number.isInteger(healthyAfter) && healthyAfter >= 1)) bad.push(`healthyAfter must be an integer >= 1, got ${healthyAfter}`);
  if (bad.length > 0) throw new RangeError(`invalid probe target: ${bad.join("; ")}`);
  const resolved: ResolvedProbeTarget = {
    url,
    method,
    ...(mcp === undefined ? {} : { mcp: Object.freeze({ era: mcp.era }) }),
    headers: Object.freeze(headers),
    ...(credential === undefined ? {} : { credential }),
    ...(t.binding === undefined ? {} : { binding: t.binding }),
    timeoutMs: t.timeoutMs,
    intervalMs: t.intervalMs,
    jitterRatio: t.jitterRatio,
    unhealthyAfter,
    healthyAfter,
  };
  return Object.freeze(resolved);
}

/**
 * A stable identity of a target (canonical JSON, keys sorted): equal targets give equal keys, so a
 * caller can tell whether the object already watches exactly this target.
 */
export function probeTargetKey(target: ProbeTarget): string {
  return canonicalJson(target);
}

function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== "object") return JSON.stringify(v) ?? "null";
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  const entries = Object.entries(v as Record<string, unknown>)
    .filter(([, x]) => x !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(",")}}`;
}

/**
 * The credential header for a target, with the secret looked up by name at probe time.
 * `undefined` headers when the named secret is missing (the probe then fails as
 * `credential_missing` without being sent: a backend is never probed with a half-built request).
 */
export function credentialHeaders(
  target: ProbeTarget,
  secret: (name: string) => string | undefined,
): { readonly headers: Record<string, string> } | { readonly missing: string } {
  const c = target.credential;
  if (c === undefined) return { headers: {} };
  const value = secret(c.authorizationSecret);
  if (typeof value !== "string" || value === "") return { missing: c.authorizationSecret };
  return { headers: credentialHeader(c.scheme, value) };
}

// ---------------------------------------------------------------------------------------------
// Probing

/** The fetch a probe uses (the global `fetch` in production, a fake in tests). */
export type ProbeFetch = (input: string, init: RequestInit) => Promise<Response>;

export interface ProbeResult {
  readonly ok: boolean;
  /** HTTP status, when the backend answered. */
  readonly status?: number;
  readonly latencyMs: number;
  /**
   * `ok`, `http_<status>`, `timeout`, `network_error: <message>`, `credential_missing: <name>` or
   * `egress_refused: <code>` (an EgressRefusalCode).
   */
  readonly reason: string;
}

/**
 * The egress guard again, right before a probe is sent: a stored target may predate the guard or
 * the current allowlist (the config and snapshot checks only see new targets). A refused target
 * fails as `egress_refused: <code>` and is never sent; redirects are never followed either
 * ({@link probeOnce}), so a probe cannot be bounced somewhere the guard would refuse.
 */
export function probeEgressRefusal(target: Pick<ProbeTarget, "url">, policy: EgressPolicy): ProbeResult | undefined {
  const verdict = checkEgress(String(target.url), policy);
  return verdict.ok ? undefined : { ok: false, latencyMs: 0, reason: `egress_refused: ${verdict.refusal.code}` };
}

/**
 * Sends one probe and classifies it. A 2xx answer is a success; any other status, a network error
 * or no answer within `timeoutMs` (AbortSignal.timeout) is a failure. The body is never read (it is
 * cancelled, freeing the connection). Never throws or rejects.
 *
 * The timeout is enforced here as well as by the signal, so a fetch that ignores its signal cannot
 * hold a probe past `timeoutMs`.
 */
export async function probeOnce(
  fetchFn: ProbeFetch,
  target: ProbeTarget,
  clock: Clock,
  extraHeaders: Readonly<Record<string, string>> = {},
): Promise<ProbeResult> {
  const started = clock.now();
  const latency = () => Math.max(0, clock.now() - started);
  let signal: AbortSignal | undefined;
  let onAbort: (() => void) | undefined;
  try {
    signal = AbortSignal.timeout(target.timeoutMs);
    const s = signal;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(s.reason);
      s.addEventListener("abort", onAbort, { once: true });
    });
    aborted.catch(() => {});
    const call = (async () => fetchFn(target.url, { method: "GET", headers: { ...target.headers, ...extraHeaders }, signal: s, redirect: "manual" }))();
    call.then((r) => (s.aborted ? cancelBody(r) : undefined)).catch(() => {}); // a late answer's body is released
    const res = await Promise.race([call, aborted]);
    cancelBody(res);
    const ok = res.status >= 200 && res.status < 300;
    return { ok, status: res.status, latencyMs: latency(), reason: ok ? "ok" : `http_${res.status}` };
  } catch (err) {
    if (signal?.aborted) return { ok: false, latencyMs: latency(), reason: "timeout" };
    return { ok: false, latencyMs: latency(), reason: `network_error: ${errorMessage(err)}` };
  } finally {
    if (signal !== undefined && onAbort !== undefined) signal.removeEventListener("abort", onAbort);
  }
}

function cancelBody(res: Response): void {
  try {
    res.body?.cancel().catch(() => {});
  } catch {
    // Already locked or consumed: nothing to release.
  }
}

function errorMessage(err: unknown): string {
  const m = err instanceof Error ? err.message : String(err);
  return m.length > 200 ? `${m.slice(0, 200)}…` : m;
}

// ---------------------------------------------------------------------------------------------
// Scheduling

/**
 * When the probe after one at `now` is due: `now + intervalMs * (1 + jitterRatio * u)` with `u`
 * uniform in [-1, 1), so backends (and restarted objects) that started together drift apart instead
 * of probing in lockstep. Always in `[now + intervalMs * (1 - jitterRatio), now + intervalMs * (1 + jitterRatio))`
 * and never earlier than `now + 1`.
 */
export function nextProbeAt(now: number, target: Pick<ProbeTarget, "intervalMs" | "jitterRatio">, rng: Rng): number {
  const u = 2 * rng.next() - 1;
  return now + Math.max(1, Math.floor(target.intervalMs * (1 + target.jitterRatio * u)));
}

/**
 * When the first probe of a newly watched target is due: within the first `jitterRatio` of an
 * interval (at once when there is no jitter), so a fleet of backends watched at the same moment
 * does not fire its first probes together.
 */
export function firstProbeAt(now: number, target: Pick<ProbeTarget, "intervalMs" | "jitterRatio">, rng: Rng): number {
  return now + Math.floor(target.intervalMs * target.jitterRatio * rng.next());
}

// ---------------------------------------------------------------------------------------------
// State machine

/** One backend's health, as stored and as served by `state()`. */
export interface HealthSnapshot {
  readonly status: HealthStatus;
  /** When the last probe finished (ms); undefined before the first. */
  readonly lastProbeAt: number | undefined;
  readonly lastOk: boolean | undefined;
  readonly consecutiveFailures: number;
  readonly consecutiveSuccesses: number;
  readonly lastReason: string | undefined;
  readonly lastLatencyMs: number | undefined;
  /** When `status` last changed (ms); 0 while it never has. */
  readonly changedAt: number;
}

export function initialHealth(): HealthSnapshot {
  return {
    status: "unknown",
    lastProbeAt: undefined,
    lastOk: undefined,
    consecutiveFailures: 0,
    consecutiveSuccesses: 0,
    lastReason: undefined,
    lastLatencyMs: undefined,
    changedAt: 0,
  };
}

/**
 * Applies one probe result. Transitions:
 * - any status → `unhealthy` after `unhealthyAfter` consecutive failures;
 * - `unhealthy` → `healthy` after `healthyAfter` consecutive successes;
 * - `unknown` → `healthy` on the first success (unknown is already routed to; confirming it costs
 *   nothing, and a new backend is not held back);
 * - otherwise the status stays (fewer failures than the threshold leave `healthy`/`unknown` alone).
 */
export function recordProbe(
  prev: HealthSnapshot,
  result: ProbeResult,
  at: number,
  thresholds: { readonly unhealthyAfter?: number; readonly healthyAfter?: number },
): HealthSnapshot {
  const unhealthyAfter = thresholds.unhealthyAfter ?? DEFAULT_UNHEALTHY_AFTER;
  const healthyAfter = thresholds.healthyAfter ?? DEFAULT_HEALTHY_AFTER;
  const consecutiveSuccesses = result.ok ? prev.consecutiveSuccesses + 1 : 0;
  const consecutiveFailures = result.ok ? 0 : prev.consecutiveFailures + 1;
  let status = prev.status;
  if (!result.ok && consecutiveFailures >= unhealthyAfter) status = "unhealthy";
  else if (result.ok && prev.status === "unknown") status = "healthy";
  else if (result.ok && prev.status === "unhealthy" && consecutiveSuccesses >= healthyAfter) status = "healthy";
  return {
    status,
    lastProbeAt: at,
    lastOk: result.ok,
    consecutiveFailures,
    consecutiveSuccesses,
    lastReason: result.reason,
    lastLatencyMs: result.latencyMs,
    changedAt: status === prev.status ? prev.changedAt : at,
  };
}

/** True unless the status is `unhealthy`: unknown counts as healthy for routing. */
export function isRoutable(status: HealthStatus | undefined): boolean {
  return status !== "unhealthy";
}

/** A stored snapshot, or a fresh `unknown` one when none (or an unreadable one) is stored. */
export function parseHealthSnapshot(json: string | undefined): HealthSnapshot {
  if (json === undefined) return initialHealth();
  try {
    const d = JSON.parse(json) as Record<string, unknown>;
    const num = (v: unknown) => typeof v === "number" && Number.isFinite(v);
    const optNum = (v: unknown) => v === undefined || v === null || num(v);
    const ok =
      (d.status === "unknown" || d.status === "healthy" || d.status === "unhealthy") &&
      optNum(d.lastProbeAt) &&
      (d.lastOk === undefined || d.lastOk === null || typeof d.lastOk === "boolean") &&
      num(d.consecutiveFailures) &&
      num(d.consecutiveSuccesses) &&
      (d.lastReason === undefined || d.lastReason === null || typeof d.lastReason === "string") &&
      optNum(d.lastLatencyMs) &&
      num(d.changedAt);
    if (!ok) return initialHealth();
    return {
      status: d.status as HealthStatus,
      lastProbeAt: (d.lastProbeAt as number | null) ?? undefined,
      lastOk: (d.lastOk as boolean | null) ?? undefined,
      consecutiveFailures: d.consecutiveFailures as number,
      consecutiveSuccesses: d.consecutiveSuccesses as number,
      lastReason: (d.lastReason as string | null) ?? undefined,
      lastLatencyMs: (d.lastLatencyMs as number | null) ?? undefined,
      changedAt: d.changedAt as number,
    };
  } catch {
    return initialHealth();
  }
}

// ---------------------------------------------------------------------------------------------
// Routing guard

/**
 * Health only narrows a pool; it never empties it. Returns the candidates `isHealthy` accepts,
 * unless fewer than `minCount` of them would remain: then the original list is returned unfiltered,
 * because when most of a pool looks down the health signal itself is the likelier fault (a probe
 * path broken, a network partition between the monitor and the backends) and refusing every request
 * would turn a bad signal into a full outage. Real failures are still handled per attempt by the
 * circuit breaker and retries.
 *
 * `minCount` below 1 (or not a number) is treated as 1. An `isHealthy` that throws counts the
 * candidate as healthy. Never throws; returns the input array itself when nothing is filtered out.
 */
export function minimumAvailable<T>(candidates: readonly T[], isHealthy: (candidate: T) => boolean, minCount = 1): readonly T[] {
  const min = Number.isFinite(minCount) ? Math.max(1, Math.ceil(minCount)) : 1;
  const healthy = candidates.filter((c) => {
    try {
      return isHealthy(c);
    } catch {
      return true;
    }
  });
  if (healthy.length === candidates.length) return candidates;
  return healthy.length >= min ? healthy : candidates;
}
