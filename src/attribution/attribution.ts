import { GatewayError } from "../errors/gateway-error.ts";
import { isRecord } from "../protocol/fast-guard.ts";

/**
 * Who a call is on behalf of, beyond the principal that pays for it: the caller's correlation of
 * its calls into turns, sessions and tasks (and a task's parent), and the workload behind it.
 * These come from the caller and are recorded as sent — never invented when absent (a call
 * without them is unattributed) and never trusted as identity: a task id is only a name, bound to
 * the tenant and project that first used it.
 */
export interface Attribution {
  readonly taskId?: string | undefined;
  readonly sessionId?: string | undefined;
  readonly turnId?: string | undefined;
  readonly parentTaskId?: string | undefined;
}

/** The HTTP headers a caller correlates its calls with (model and MCP endpoints alike). */
export const ATTRIBUTION_HEADERS = {
  taskId: "x-sluice-task-id",
  sessionId: "x-sluice-session-id",
  turnId: "x-sluice-turn-id",
  parentTaskId: "x-sluice-parent-task-id",
} as const satisfies Record<keyof Attribution, string>;

/** The same on an MCP request, in `params._meta` (where a client library lets an agent put them per call). */
export const ATTRIBUTION_META_KEYS = {
  taskId: "sluice.dev/taskId",
  sessionId: "sluice.dev/sessionId",
  turnId: "sluice.dev/turnId",
  parentTaskId: "sluice.dev/parentTaskId",
} as const satisfies Record<keyof Attribution, string>;

/** What an id may be: short, printable, no separators that could be mistaken for structure. */
const ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/**
 * The attribution a request carries: each id from its header or, on MCP, its `_meta` key (the two
 * must agree when both are sent). A malformed id is refused rather than dropped, so that a caller
 * that meant to attribute a call is told it did not.
 */
export function readAttribution(headers: { get(name: string): string | null }, meta?: unknown): Attribution {
  const out: Record<string, string> = {};
  for (const field of Object.keys(ATTRIBUTION_HEADERS) as (keyof Attribution)[]) {
    const fromHeader = headers.get(ATTRIBUTION_HEADERS[field]) ?? undefined;
    const raw = isRecord(meta) ? meta[ATTRIBUTION_META_KEYS[field]] : undefined;
    if (raw !== undefined && typeof raw !== "string") throw new GatewayError("invalid_request", `_meta["${ATTRIBUTION_META_KEYS[field]}"] must be a string.`, { param: `params._meta.${ATTRIBUTION_META_KEYS[field]}` });
    const fromMeta = raw as string | undefined;
    if (fromHeader !== undefined && fromMeta !== undefined && fromHeader !== fromMeta) {
      throw new GatewayError("invalid_request", `${ATTRIBUTION_HEADERS[field]} and _meta["${ATTRIBUTION_META_KEYS[field]}"] name different ids.`, { param: ATTRIBUTION_HEADERS[field] });
    }
    const value = fromHeader ?? fromMeta;
    if (value === undefined) continue;
    if (!ID.test(value)) throw new GatewayError("invalid_request", `${ATTRIBUTION_HEADERS[field]} must be 1–128 characters of letters, digits and . _ : - (starting with a letter or digit).`, { param: ATTRIBUTION_HEADERS[field] });
    out[field] = value;
  }
  return out;
}

/** Whether a request carries no attribution at all (recorded as unattributed). */
export function isUnattributed(a: Attribution): boolean {
  return a.taskId === undefined && a.sessionId === undefined && a.turnId === undefined && a.parentTaskId === undefined;
}

/** {@link readAttribution} for an adapter: the attribution, or the refusal the engine raises in its decode phase. */
export function attributionOf(headers: { get(name: string): string | null }): Attribution | { readonly error: GatewayError } {
  try {
    return readAttribution(headers);
  } catch (err) {
    if (err instanceof GatewayError) return { error: err };
    throw err;
  }
}
