import { createParser } from "eventsource-parser";
import { GatewayError } from "../errors/gateway-error.ts";
import { STATELESS_VERSION } from "../protocol/mcp/stateless-request.ts";
import type { SubscriptionFilter } from "./subscriptions.ts";
import { answerEvidence, mayRetry, statusEvidence, type UpstreamEvidence } from "./upstream-evidence.ts";
import { isRecord } from "../protocol/fast-guard.ts";

/**
 * The gateway's own MCP client towards one upstream server, in the server's era. The gateway
 * opens (and re-opens) upstream sessions itself: a client's session with the gateway never maps
 * onto an upstream's, and an expired upstream session is re-initialized, not relayed as an error.
 * Outbound requests are built here from scratch — no caller header, cookie, token or session id
 * ever reaches a server — with redirects never followed.
 */

/** The protocol version the gateway asks stateful-era servers for. */
export const STATEFUL_VERSION = "2025-11-25";

/** How to reach one upstream MCP server. */
export interface UpstreamOptions {
  readonly url: string;
  readonly era: "stateful" | "stateless";
  /** Headers the server's configuration names (its credential), nothing from the caller. */
  readonly headers?: Readonly<Record<string, string>> | undefined;
  readonly fetch: typeof fetch;
  /** `clientInfo` the gateway presents. */
  readonly clientInfo?: { readonly name: string; readonly version: string } | undefined;
  /**
   * Opens (and closes) a TCP connection to the server before each request is sent: when that
   * fails, nothing was sent (known zero). Without it a failed connection is `unknown`, because
   * `fetch` reports a refused connection and a reset after the body was written alike.
   */
  readonly preconnect?: ((hostname: string, port: number, signal: AbortSignal) => Promise<boolean>) | undefined;
  /** How long a read waits before its one retry after a 429, ms. */
  readonly rateLimitPauseMs?: number | undefined;
}

/** What one try of a request did: the fields are filled in as it goes. */
interface Try {
  sent: boolean;
  status: number | undefined;
}

/** A JSON-RPC result, or the server's JSON-RPC error, as the server sent it. */
export type UpstreamAnswer = { readonly ok: true; readonly result: unknown } | { readonly ok: false; readonly error: { readonly code: number; readonly message: string; readonly data?: unknown } };

/** A message a server sent before its answer (progress, logging), passed on by the caller. */
export type UpstreamNotification = { readonly method: string; readonly params?: unknown };

/** A request a server sent inside its answer's stream (elicitation, sampling, roots): the stateful era's server-to-client traffic. */
export type UpstreamServerRequest = { readonly method: string; readonly params?: unknown };

/** What answers a server's request: its result, or a JSON-RPC error sent back to the server. */
export type ServerRequestAnswer = { readonly result: unknown } | { readonly error: { readonly code: number; readonly message: string } };

/**
 * Whose upstream session a request runs in, and what that session declares. Each downstream
 * client gets its own upstream session (never one shared by every caller): a server's
 * per-session state (log level, subscriptions, what it may ask the client) belongs to one
 * client, and the capabilities the gateway declares upstream are exactly those it can carry to
 * that client.
 */
export interface UpstreamSessionKey {
  readonly key: string;
  /** The client capabilities declared upstream: in `initialize` (stateful) or each request's `_meta` (stateless). */
  readonly capabilities: Readonly<Record<string, unknown>>;
}

/** Per-request options of {@link McpUpstream.request}. */
export interface UpstreamRequestOptions {
  readonly signal?: AbortSignal | undefined;
  readonly onNotification?: ((n: UpstreamNotification) => void) | undefined;
  /** Answers a server's in-stream request; without it the server is told the client cannot (-32601). */
  readonly onRequest?: ((r: UpstreamServerRequest) => Promise<ServerRequestAnswer>) | undefined;
  /** Keeps alive what the gateway sends after the answer (a cancellation notice, a session's end). */
  readonly keepAlive?: ((p: Promise<unknown>) => void) | undefined;
  /** The downstream client's session; absent: the gateway's own (health probes, tests). */
  readonly session?: UpstreamSessionKey | undefined;
  /** Called, synchronously, each time the request itself is handed to `fetch` (after which it may run). */
  readonly onSent?: (() => void) | undefined;
  /** Called once, when the request ends (answered or failed), with what its last try proves. */
  readonly onEvidence?: ((e: UpstreamEvidence) => void) | undefined;
}

/** How many client sessions one upstream keeps open per isolate; the least recently used is ended first. */
const MAX_SESSIONS = 256;
const OWN_SESSION: UpstreamSessionKey = { key: "", capabilities: {} };
/** How often one answer's stream is resumed, and the longest `retry` the gateway waits before it does. */
const MAX_RESUMES = 3;
const MAX_RESUME_WAIT_MS = 5_000;

/** A GET stream that opened (its body), or the status of the answer that was not one. */
type OpenedStream = { readonly body: ReadableStream<Uint8Array> } | { readonly status: number };


/**
 * One upstream server. Requests are independent; a stateful server's session is opened on the
 * first request and re-opened once when the server no longer knows it (404, or 400 from servers
 * that answer an unknown session so): the request was refused before it ran, so sending it again
 * cannot run it twice.
 */
export class McpUpstream {
  readonly #o: UpstreamOptions;
  /** Open stateful sessions by client key, least recently used first. */
  readonly #sessions = new Map<string, Promise<string | undefined>>();
  /** Upstream sessions whose GET stream a request listens on now. */
  readonly #listening = new Set<string>();
  #nextId = 1;

  constructor(o: UpstreamOptions) {
    this.#o = o;
  }

  /**
   * Sends one request in the client's session; `onNotification` receives what the server streams
   * before its answer and `onRequest` answers what it asks meanwhile. A request that fails with
   * known-zero evidence may be sent once more (see upstream-evidence.ts:
   * a `tools/call` only when it never left the gateway); `onEvidence` hears what the last try proves.
   */
  async request(method: string, params: Readonly<Record<string, unknown>> = {}, opts: UpstreamRequestOptions = {}): Promise<UpstreamAnswer> {
    for (let tries = 1; ; tries++) {
      const t: Try = { sent: false, status: undefined };
      let outcome: { readonly ok: true; readonly answer: UpstreamAnswer } | { readonly ok: false; readonly error: unknown };
      try {
        outcome = { ok: true, answer: await this.#try(method, params, opts, t) };
      } catch (err) {
        outcome = { ok: false, error: err instanceof SessionGone ? new GatewayError("upstream_error", "The MCP server refused the gateway's session twice.") : err };
      }
      const evidence: UpstreamEvidence = outcome.ok
        ? answerEvidence(t.status ?? 200, outcome.answer.ok ? undefined : outcome.answer.error.code)
        : !t.sent
          ? "not_sent"
          : t.status === undefined
            ? "unknown"
            : statusEvidence(t.status);
      if (!opts.signal?.aborted && mayRetry(method, evidence, tries)) {
        if (evidence === "rate_limited") await pause(this.#o.rateLimitPauseMs ?? 200, opts.signal);
        if (!opts.signal?.aborted) continue;
      }
      opts.onEvidence?.(evidence);
      if (outcome.ok) return outcome.answer;
      throw outcome.error;
    }
  }

  async #try(method: string, params: Readonly<Record<string, unknown>>, opts: UpstreamRequestOptions, t: Try): Promise<UpstreamAnswer> {
    const client = opts.session ?? OWN_SESSION;
    if (this.#o.era === "stateless") return await this.#send(method, this.#statelessParams(params, client.capabilities), this.#statelessHeaders(method, params), opts, t);
    for (let attempt = 0; ; attempt++) {
      const session = await this.#openSession(client, opts);
      const headers = { "mcp-protocol-version": STATEFUL_VERSION, ...(session ? { "mcp-session-id": session } : {}) };
      // A server may ask its client outside the request's own stream (on the session's GET
      // stream): while a request that can answer runs, the gateway listens there too.
      const release = opts.onRequest && session ? await this.#listen(session, headers, opts.onRequest, opts.keepAlive) : undefined;
      try {
        return await this.#send(method, params, headers, opts, t);
      } catch (err) {
        if (attempt === 0 && err instanceof SessionGone) {
          this.#sessions.delete(client.key);
          // Refused before it ran: the next send starts from nothing proven.
          t.sent = false;
          t.status = undefined;
          continue;
        }
        throw err;
      } finally {
        release?.();
      }
    }
  }

  /**
   * Listens on a stateful session's GET stream while a request that can answer the server's
   * requests runs in it, and hands what the server asks there to that request: a session belongs
   * to one client, so whatever it asks is that client's. One request of a session listens at a
   * time — a server keeps one GET stream per session — and it owns the stream: the runtime lets
   * only the request that opened a connection touch it. Resolves once the stream is open (or
   * refused: a server without one asks only inside its answers); the returned function ends it.
   */
  async #listen(session: string, headers: Record<string, string>, onRequest: NonNullable<UpstreamRequestOptions["onRequest"]>, keepAlive: UpstreamRequestOptions["keepAlive"]): Promise<(() => void) | undefined> {
    if (this.#listening.has(session)) return undefined;
    this.#listening.add(session);
    const stop = new AbortController();
    const opened = await this.#openGet(headers, stop.signal).catch(() => undefined);
    const release = () => {
      this.#listening.delete(session);
      stop.abort();
    };
    if (!opened || !("body" in opened)) return release;
    const reading = this.#readEvents(opened.body, headers, { onRequest });
    keepAlive?.(reading);
    return release;
  }

  /**
   * Opens a stateful session's GET stream (resuming after `lastEventId` when given): its body, or
   * the status of an answer that is not an event stream (a server without one). A fetch that fails
   * throws, for the caller to judge.
   */
  async #openGet(headers: Record<string, string>, signal: AbortSignal | undefined, lastEventId?: string): Promise<OpenedStream> {
    const res = await this.#o.fetch(this.#o.url, {
      method: "GET",
      headers: { ...this.#o.headers, ...headers, accept: "text/event-stream", ...(lastEventId !== undefined ? { "last-event-id": lastEventId } : {}) },
      redirect: "manual",
      ...(signal ? { signal } : {}),
    });
    if (res.ok && res.body && /^text\/event-stream/i.test(res.headers.get("content-type") ?? "")) return { body: res.body };
    await res.body?.cancel().catch(() => undefined);
    return { status: res.status };
  }

  /**
   * Reads a stream of server messages that answers no request of the gateway's (a GET stream, a
   * subscription): notifications go to `onNotification`, the server's requests are answered
   * through `onRequest`, and a result (a subscription's graceful end) ends the reading.
   */
  async #readEvents(body: ReadableStream<Uint8Array>, headers: Record<string, string>, opts: Pick<UpstreamRequestOptions, "onNotification" | "onRequest">): Promise<void> {
    const replies: Promise<unknown>[] = [];
    let ended = false;
    const parser = createParser({
      onEvent: (ev) => {
        let m: unknown;
        try {
          m = JSON.parse(ev.data);
        } catch {
          return;
        }
        if (!isRecord(m) || typeof m.jsonrpc !== "string") return;
        if (typeof m.method === "string" && (typeof m.id === "string" || typeof m.id === "number")) replies.push(this.#reply(m.id, { method: m.method, params: m.params }, headers, opts));
        else if (typeof m.method === "string") opts.onNotification?.({ method: m.method, params: m.params });
        else if ("result" in m || "error" in m) ended = true;
      },
    });
    const reader = body.getReader();
    const decoder = new TextDecoder();
    try {
      while (!ended) {
        const { done, value } = await reader.read();
        if (done) break;
        parser.feed(decoder.decode(value, { stream: true }));
      }
    } catch {
      // Stopped by its request, or the server closed it.
    } finally {
      void reader.cancel().catch(() => undefined);
    }
    await Promise.allSettled(replies);
  }

  /**
   * Holds a client's subscription to this server until `opts.signal` ends it or the server does:
   * a 2026-07-28 server's own `subscriptions/listen` with the same filter; for a stateful server,
   * `resources/subscribe` for each resource in the client's upstream session, then that session's
   * GET stream (which this request owns meanwhile). What arrives goes to `onNotification` and
   * `onRequest`, unfiltered: the caller decides what the client asked for.
   */
  async listen(filter: SubscriptionFilter, opts: UpstreamRequestOptions & { readonly signal: AbortSignal }): Promise<void> {
    const client = opts.session ?? OWN_SESSION;
    if (this.#o.era === "stateless") {
      const res = await this.#post({ jsonrpc: "2.0", id: this.#nextId++, method: "subscriptions/listen", params: this.#statelessParams({ notifications: filter }, client.capabilities) }, this.#statelessHeaders("subscriptions/listen", {}), opts.signal);
      if (!res.ok || !res.body || !/^text\/event-stream/i.test(res.headers.get("content-type") ?? "")) {
        const answer = await this.#answerOf(res, -1, {}, {});
        throw new GatewayError("upstream_error", `The MCP server refused subscriptions/listen${answer.ok ? "" : ` (${answer.error.code})`}.`);
      }
      await this.#readEvents(res.body, {}, opts);
      return;
    }
    const session = await this.#openSession(client, opts);
    const headers = { "mcp-protocol-version": STATEFUL_VERSION, ...(session ? { "mcp-session-id": session } : {}) };
    const uris = filter.resourceSubscriptions ?? [];
    for (const uri of uris) {
      const answer = await this.#send("resources/subscribe", { uri }, headers, opts, { sent: false, status: undefined });
      if (!answer.ok) throw new GatewayError("upstream_error", `The MCP server refused resources/subscribe (${answer.error.code}).`, { cause: answer.error.message });
    }
    if (session === undefined || this.#listening.has(session)) {
      // No stream to read (no session), or another request of the client reads it now.
      await new Promise<void>((resolve) => (opts.signal.aborted ? resolve() : opts.signal.addEventListener("abort", () => resolve(), { once: true })));
      return;
    }
    this.#listening.add(session);
    try {
      const opened = await this.#openGet(headers, opts.signal);
      if (!("body" in opened)) throw new GatewayError("upstream_error", `The MCP server offers no stream for its notifications (${opened.status}).`);
      await this.#readEvents(opened.body, headers, opts);
    } finally {
      this.#listening.delete(session);
    }
  }

  #statelessParams(params: Readonly<Record<string, unknown>>, capabilities: Readonly<Record<string, unknown>>): Record<string, unknown> {
    const meta = isRecord(params._meta) ? params._meta : {};
    return { ...params, _meta: { ...meta, "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION, "io.modelcontextprotocol/clientCapabilities": capabilities } };
  }

  #statelessHeaders(method: string, params: Readonly<Record<string, unknown>>): Record<string, string> {
    const h: Record<string, string> = { "mcp-protocol-version": STATELESS_VERSION, "mcp-method": method };
    const name = method === "resources/read" ? params.uri : method === "tools/call" || method === "prompts/get" ? params.name : undefined;
    if (typeof name === "string") h["mcp-name"] = /^[\x20-\x7e]*$/.test(name) ? name : `=?base64?${btoa(String.fromCharCode(...new TextEncoder().encode(name)))}?=`;
    return h;
  }

  #openSession(client: UpstreamSessionKey, opts: UpstreamRequestOptions): Promise<string | undefined> {
    const open = this.#sessions.get(client.key);
    if (open) {
      // Most recently used last: the map's order is the eviction order.
      this.#sessions.delete(client.key);
      this.#sessions.set(client.key, open);
      return open;
    }
    const opening = (async () => {
      const res = await this.#post(
        { jsonrpc: "2.0", id: this.#nextId++, method: "initialize", params: { protocolVersion: STATEFUL_VERSION, capabilities: client.capabilities, clientInfo: this.#o.clientInfo ?? { name: "sluice", version: "0" } } },
        {},
        opts.signal,
      );
      const session = res.headers.get("mcp-session-id") ?? undefined;
      const answer = await this.#answerOf(res, -1, {}, {});
      if (!answer.ok) throw new GatewayError("upstream_error", "The MCP server refused the gateway's initialize.", { cause: answer.error.message });
      const initialized = await this.#post({ jsonrpc: "2.0", method: "notifications/initialized" }, session ? { "mcp-session-id": session, "mcp-protocol-version": STATEFUL_VERSION } : { "mcp-protocol-version": STATEFUL_VERSION }, opts.signal);
      await initialized.body?.cancel();
      return session;
    })();
    this.#sessions.set(client.key, opening);
    // A failed opening is not kept: the next request tries again.
    opening.catch(() => {
      if (this.#sessions.get(client.key) === opening) this.#sessions.delete(client.key);
    });
    while (this.#sessions.size > MAX_SESSIONS) {
      const [oldest, ended] = this.#sessions.entries().next().value as [string, Promise<string | undefined>];
      this.#sessions.delete(oldest);
      opts.keepAlive?.(ended.then((id) => (id === undefined ? undefined : this.#end(id)), () => undefined));
    }
    return opening;
  }

  /** Ends a session the gateway no longer keeps (DELETE, as the stateful era's transport defines). */
  async #end(session: string): Promise<void> {
    try {
      const res = await this.#o.fetch(this.#o.url, { method: "DELETE", headers: { ...this.#o.headers, "mcp-session-id": session, "mcp-protocol-version": STATEFUL_VERSION }, redirect: "manual" });
      await res.body?.cancel();
    } catch {
      // Best effort: the server expires it otherwise.
    }
  }

  async #send(
    method: string,
    params: Readonly<Record<string, unknown>>,
    headers: Record<string, string>,
    opts: UpstreamRequestOptions,
    t: Try,
  ): Promise<UpstreamAnswer> {
    await this.#connectCheck(opts.signal);
    const requestId = this.#nextId++;
    // In the stateful era a closed connection is not a cancellation: the server is told, in the
    // same session, so that it stops the work (2026-07-28 servers take the closed stream as one).
    const session = headers["mcp-session-id"];
    const onAbort =
      session === undefined
        ? undefined
        : () => {
            const notice = this.#post({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId, reason: "The client cancelled the request." } }, headers, undefined).then(
              (r) => r.body?.cancel(),
              () => undefined,
            );
            opts.keepAlive?.(notice);
          };
    if (onAbort) opts.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      t.sent = true;
      opts.onSent?.();
      const res = await this.#post({ jsonrpc: "2.0", id: requestId, method, params }, headers, opts.signal);
      t.status = res.status;
      // 404 is the specification's answer to an unknown session; some servers answer 400 instead.
      // Either way the request was refused before it ran, so sending it again on a new session is
      // safe (a genuine 400 comes back the same and is returned then).
      if (headers["mcp-session-id"] !== undefined && (res.status === 404 || res.status === 400)) {
        await res.body?.cancel();
        throw new SessionGone();
      }
      return await this.#answerOf(res, requestId, headers, opts);
    } finally {
      // Until the answer is read: an SSE answer may stream for a while after its headers.
      if (onAbort) opts.signal?.removeEventListener("abort", onAbort);
    }
  }

  /** With a connect check: throws (before anything is sent) when no connection opens. */
  async #connectCheck(signal: AbortSignal | undefined): Promise<void> {
    const check = this.#o.preconnect;
    if (!check) return;
    const url = new URL(this.#o.url);
    const port = url.port !== "" ? Number(url.port) : url.protocol === "https:" ? 443 : 80;
    let opened: boolean;
    try {
      opened = await check(url.hostname, port, signal ?? new AbortController().signal);
    } catch {
      opened = false;
    }
    signal?.throwIfAborted();
    if (!opened) throw new GatewayError("upstream_unreachable", "The MCP server could not be reached.");
  }

  async #post(message: unknown, headers: Record<string, string>, signal: AbortSignal | undefined): Promise<Response> {
    try {
      return await this.#o.fetch(this.#o.url, {
        method: "POST",
        headers: { ...this.#o.headers, ...headers, "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify(message),
        redirect: "manual",
        ...(signal ? { signal } : {}),
      });
    } catch (err) {
      if (signal?.aborted) throw err;
      throw new GatewayError("upstream_unreachable", "The MCP server could not be reached.", { cause: err });
    }
  }

  /**
   * The JSON-RPC answer of a response: a JSON body, or the answering message of an SSE stream,
   * read as it arrives so that what the server sends first (progress, logging, its own requests)
   * is handled while the request runs rather than after it ended.
   */
  async #answerOf(res: Response, requestId: number, headers: Record<string, string>, opts: UpstreamRequestOptions): Promise<UpstreamAnswer> {
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel();
      throw new GatewayError("upstream_error", "The MCP server answered with a redirect, which the gateway does not follow.");
    }
    if (res.status === 401 || res.status === 403) {
      // MCP authorization is HTTP's: the server refused the credential the gateway sends it, not the caller's.
      await res.body?.cancel();
      throw new GatewayError("upstream_auth_failed", `The MCP server refused the gateway's credential (${res.status}).`);
    }
    const type = res.headers.get("content-type") ?? "";
    if (!/^text\/event-stream/i.test(type) || !res.body) {
      const text = await res.text();
      if (text.trim() === "") throw new GatewayError(res.ok ? "upstream_protocol_error" : "upstream_error", `The MCP server answered ${res.status} without a JSON-RPC message.`);
      let message: unknown;
      try {
        message = JSON.parse(text);
      } catch {
        throw new GatewayError("upstream_protocol_error", `The MCP server answered ${res.status} with a body that is not JSON.`);
      }
      // A JSON body answers the POST that it answers, whatever id the server wrote in it.
      const answer = answerIn(message, -1);
      if (answer) return answer;
      throw new GatewayError("upstream_protocol_error", `The MCP server's answer (${res.status}) carried no JSON-RPC result or error.`);
    }
    // The SSE framing is eventsource-parser's, as for provider streams; only the data is ours.
    let answer: UpstreamAnswer | undefined;
    let bad = false;
    const replies: Promise<unknown>[] = [];
    const parser = createParser({
      onRetry: (ms) => {
        retryMs = ms;
      },
      onEvent: (ev) => {
        if (ev.id !== undefined) lastEventId = ev.id;
        if (answer !== undefined || ev.data === "") return;
        let m: unknown;
        try {
          m = JSON.parse(ev.data);
        } catch {
          bad = true;
          return;
        }
        if (!isRecord(m) || typeof m.jsonrpc !== "string") return;
        if (typeof m.method === "string" && "id" in m && (typeof m.id === "string" || typeof m.id === "number")) {
          replies.push(this.#reply(m.id, { method: m.method, params: m.params }, headers, opts));
          return;
        }
        if (typeof m.method === "string") {
          opts.onNotification?.({ method: m.method, params: m.params });
          return;
        }
        answer = answerIn(m, requestId);
      },
    });
    // A server may end the stream before its answer and expect the client to come back for the
    // rest (SEP-1699 polling): the gateway resumes with `Last-Event-ID` in the same session,
    // after the `retry` the server asked for, a bounded number of times.
    let lastEventId: string | undefined;
    let retryMs = 0;
    let body: ReadableStream<Uint8Array> = res.body;
    for (let resumed = 0; ; resumed++) {
      const reader = body.getReader();
      const decoder = new TextDecoder();
      try {
        while (answer === undefined && !bad) {
          const { done, value } = await reader.read();
          if (done) break;
          parser.feed(decoder.decode(value, { stream: true }));
        }
      } finally {
        if (answer !== undefined || bad) void reader.cancel().catch(() => undefined);
        else reader.releaseLock();
      }
      if (answer !== undefined || bad || lastEventId === undefined || headers["mcp-session-id"] === undefined || resumed >= MAX_RESUMES || opts.signal?.aborted) break;
      await pause(Math.min(retryMs, MAX_RESUME_WAIT_MS), opts.signal);
      let again: OpenedStream;
      try {
        again = await this.#openGet(headers, opts.signal, lastEventId);
      } catch (err) {
        if (opts.signal?.aborted) throw err;
        break;
      }
      if (!("body" in again)) break;
      body = again.body;
    }
    // A reply still being sent is the server's business now; keep it alive past the answer.
    if (replies.length > 0) opts.keepAlive?.(Promise.allSettled(replies));
    if (bad) throw new GatewayError("upstream_protocol_error", "The MCP server sent an event that is not JSON.");
    if (answer === undefined) throw new GatewayError("upstream_protocol_error", `The MCP server's stream (${res.status}) ended without a JSON-RPC result or error.`);
    return answer;
  }

  /** Answers a server's in-stream request through `onRequest`, or says the client cannot. */
  async #reply(id: string | number, request: UpstreamServerRequest, headers: Record<string, string>, opts: UpstreamRequestOptions): Promise<void> {
    let answer: ServerRequestAnswer;
    try {
      answer = opts.onRequest ? await opts.onRequest(request) : { error: { code: -32601, message: `The client behind this gateway does not take ${request.method} requests.` } };
    } catch (err) {
      answer = { error: { code: -32603, message: err instanceof GatewayError ? err.message : "The gateway could not relay the request to its client." } };
    }
    try {
      const res = await this.#post({ jsonrpc: "2.0", id, ...answer }, headers, undefined);
      await res.body?.cancel();
    } catch {
      // The request it answers has failed too; its own error reports that.
    }
  }
}

/** The answer to `requestId` in one JSON-RPC message, if it is that. */
function answerIn(m: unknown, requestId: number): UpstreamAnswer | undefined {
  if (!isRecord(m)) return undefined;
  // -1: any id (a JSON body answering its own POST, or the session's initialize).
  if (requestId !== -1 && m.id !== requestId && m.id !== null) return undefined;
  if ("result" in m) return { ok: true, result: m.result };
  if (isRecord(m.error) && typeof m.error.code === "number") return { ok: false, error: { code: m.error.code, message: String(m.error.message ?? ""), ...(m.error.data !== undefined ? { data: m.error.data } : {}) } };
  return undefined;
}

/** Waits `ms`, or less when `signal` aborts first. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** The server no longer knows the session: re-initialize and send again. */
class SessionGone extends Error {}
