import type { AttemptRecord } from "../context/attempt-record.ts";
import type { RequestRecord } from "../context/request-record.ts";
import { clippedContent, type ClippedText } from "../context/clipped-content.ts";

/**
 * One call in the request log (`GET /admin/calls`): every finished request of a tenant, attributed
 * to a task or not, with the figures its access line has. Figures, names and ids only; the prompt
 * and completion only when the entrypoint's content policy sampled the request, exactly as its
 * content line writes them (redacted, cut).
 */
export interface RequestLogRow {
  readonly requestId: string;
  /** When the gateway received the request, and when it ended (epoch ms). */
  readonly at: number;
  readonly endedAt: number;
  readonly tenant: string;
  readonly key?: string | undefined;
  /** The team or `team/project` the caller was charged to. */
  readonly project?: string | undefined;
  readonly entrypoint?: string | undefined;
  /** The wire protocol the client spoke. */
  readonly protocol?: string | undefined;
  readonly stream?: boolean | undefined;
  readonly kind: "model" | "tool" | "mcp" | "agent";
  /** The decision that routed a model call (`default` when none held). */
  readonly decision?: string | undefined;
  /** The logical model of the last attempt sent; an MCP call's `server/tool` (or `server/method`). */
  readonly model?: string | undefined;
  /** The backend (an MCP call's server) of the last attempt sent. */
  readonly backend?: string | undefined;
  /** Attempts sent to a backend. */
  readonly attempts: number;
  readonly outcome: "success" | "error" | "cancelled";
  readonly errorCode?: string | undefined;
  /** Received to ended, as the access line's `durationMs`. */
  readonly latencyMs: number;
  /** Received to the answering attempt's first content (as the TTFT histogram measures it), when it produced any. */
  readonly ttftMs?: number | undefined;
  /** Tokens the provider reported (or the gateway estimated), summed over the attempts sent. */
  readonly tokens: { readonly input: number; readonly output: number };
  /** What the settlements booked (integer micro-units of `currency`); 0 when nothing or an unknown amount was booked. */
  readonly costMicros: number;
  readonly currency?: string | undefined;
  readonly taskId?: string | undefined;
  readonly sessionId?: string | undefined;
  /** The request this one was made inside (a Looper step). */
  readonly parentRequestId?: string | undefined;
  /** Answered from the response cache (no attempt was sent). */
  readonly cache?: "exact" | "semantic" | undefined;
  readonly content?: { readonly prompt: ClippedText; readonly completion: ClippedText } | undefined;
}

/**
 * The request log's row of one finished request; undefined when it has no tenant to be kept under
 * (refused before its key was known) or is an explain (an operator's question, not a call).
 */
export function requestRowOf(r: Readonly<RequestRecord>, attempts: readonly Readonly<AttemptRecord>[]): RequestLogRow | undefined {
  if (r.tenant === undefined || r.explain === true) return undefined;
  const endedAt = r.endedAt ?? r.receivedAt;
  const base = {
    requestId: r.requestId,
    at: r.receivedAt,
    endedAt,
    tenant: r.tenant,
    key: r.key,
    project: r.chargeTo,
    entrypoint: r.entrypoint,
    protocol: r.protocol,
    stream: r.stream,
    outcome: r.outcome ?? "error",
    errorCode: r.errorCode,
    latencyMs: endedAt - r.receivedAt,
    taskId: r.attribution?.taskId,
    sessionId: r.attribution?.sessionId,
    parentRequestId: r.parentRequestId,
  } as const;
  if (r.mcp) {
    const m = r.mcp;
    const isTool = m.method === "tools/call" || m.method === "tasks/result";
    const charged = m.charge?.settlement === "charged" ? m.charge.micros : 0;
    return withoutUndefined<RequestLogRow>({
      ...base,
      kind: isTool ? ("tool" as const) : ("mcp" as const),
      model: isTool ? `${m.server ?? "*"}/${m.target ?? "?"}` : m.server === undefined ? m.method : `${m.server}/${m.method}`,
      backend: m.server,
      attempts: m.toolSent === true ? 1 : 0,
      tokens: { input: 0, output: 0 },
      costMicros: charged,
      currency: m.charge?.currency,
    });
  }
  if (r.a2a) {
    const a = r.a2a;
    return withoutUndefined<RequestLogRow>({
      ...base,
      kind: "agent" as const,
      model: `${a.agent}/${a.skill ?? "*"}`,
      backend: a.agent,
      attempts: a.sent === true ? 1 : 0,
      tokens: { input: 0, output: 0 },
      costMicros: a.charge?.settlement === "charged" ? a.charge.micros : 0,
      currency: a.charge?.currency,
    });
  }
  const sent = attempts.filter((a) => a.outcome !== "not_sent");
  const last = sent.at(-1);
  const hit = r.plugins.find((p) => p.action === "cache_hit");
  const content = r.content ? clippedContent(r.content) : undefined;
  return withoutUndefined<RequestLogRow>({
    ...base,
    kind: "model",
    decision: r.decision?.name ?? r.route,
    model: last?.logicalModel,
    backend: last?.backendName,
    attempts: sent.length,
    ttftMs: last?.firstContentAt === undefined ? undefined : last.firstContentAt - r.receivedAt,
    tokens: { input: sum(sent.map((a) => a.usage?.inputTokens ?? 0)), output: sum(sent.map((a) => a.usage?.outputTokens ?? 0)) },
    costMicros: sum(sent.map((a) => a.charge?.costMicros ?? 0)),
    currency: sent.find((a) => a.charge?.currency !== undefined)?.charge?.currency,
    cache: hit ? (hit.detail === "semantic" ? "semantic" : "exact") : undefined,
    content,
  });
}

/** Filters of the request log; every one optional, combined with AND. */
export interface RequestQuery {
  readonly key?: string | undefined;
  readonly project?: string | undefined;
  readonly entrypoint?: string | undefined;
  readonly model?: string | undefined;
  readonly decision?: string | undefined;
  readonly outcome?: RequestLogRow["outcome"] | undefined;
  readonly errorCode?: string | undefined;
  readonly taskId?: string | undefined;
  /** Calls received at or after `since`, at or before `until` (epoch ms). */
  readonly since?: number | undefined;
  readonly until?: number | undefined;
  /** Where the previous page ended ({@link RequestPage.next}). */
  readonly cursor?: RequestCursor | undefined;
  readonly limit: number;
}

/**
 * A page's end: the last row's time and arrival number. Pages are newest first by both, so a call
 * stored after the first page was read lands before the cursor (or, a long request's, after it)
 * and never moves a row from one page to another: no row is listed twice or skipped.
 */
export interface RequestCursor {
  readonly at: number;
  readonly seq: number;
}

/** One page of the request log, newest first; `next` when more may follow. */
export interface RequestPage {
  readonly calls: RequestLogRow[];
  readonly next?: RequestCursor | undefined;
}

/** A cursor as the admin API hands it out: opaque text, safe in a URL. */
export function encodeCursor(c: RequestCursor): string {
  return btoa(`${c.at}.${c.seq}`).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** A cursor {@link encodeCursor} made, or undefined when the text is not one. */
export function decodeCursor(text: string): RequestCursor | undefined {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(text)) return undefined;
  let plain: string;
  try {
    plain = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  } catch {
    return undefined;
  }
  const m = /^(\d{1,16})\.(\d{1,16})$/.exec(plain);
  if (!m) return undefined;
  const at = Number(m[1]);
  const seq = Number(m[2]);
  return Number.isSafeInteger(at) && Number.isSafeInteger(seq) ? { at, seq } : undefined;
}

function sum(xs: readonly number[]): number {
  return xs.reduce((n, x) => n + x, 0);
}

/** The row without its absent fields, so stored JSON holds only what was known. */
function withoutUndefined<T extends object>(row: T): T {
  return Object.fromEntries(Object.entries(row).filter(([, v]) => v !== undefined)) as T;
}
