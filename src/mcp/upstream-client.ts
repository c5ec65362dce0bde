import { createParser } from "eventsource-parser";
import { GatewayError } from "../errors/gateway-error.ts";
import { STATELESS_VERSION } from "./stateless-request.ts";
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

/** What a caller of {@link McpUpstream.request} may pass. */
export interface UpstreamRequestOptions {
  readonly signal?: AbortSignal;
  readonly onNotification?: (n: UpstreamNotification) => void;
  /** Keeps alive the cancellation notice sent when `signal` aborts a stateful-era request. */
  readonly keepAlive?: (p: Promise<unknown>) => void;
  /** Called, synchronously, each time the request itself is handed to `fetch` (after which it may run). */
  readonly onSent?: () => void;
  /** Called once, when the request ends (answered or failed), with what its last try proves. */
  readonly onEvidence?: (e: UpstreamEvidence) => void;
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


/**
 * One upstream server. Requests are independent; a stateful server's session is opened on the
 * first request and re-opened once when the server no longer knows it (404, or 400 from servers
 * that answer an unknown session so): the request was refused before it ran, so sending it again
 * cannot run it twice.
 */
export class McpUpstream {
  readonly #o: UpstreamOptions;
  #session: Promise<string | undefined> | undefined;
  #nextId = 1;

  constructor(o: UpstreamOptions) {
    this.#o = o;
  }

  /**
   * Sends one request; `onNotification` receives what the server streams before its answer. A
   * request that fails with known-zero evidence may be sent once more (see upstream-evidence.ts:
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
    if (this.#o.era === "stateless") return await this.#send(method, this.#statelessParams(params), this.#statelessHeaders(method, params), opts, t);
    for (let attempt = 0; ; attempt++) {
      const session = await this.#openSession(opts.signal);
      try {
        return await this.#send(method, params, { "mcp-protocol-version": STATEFUL_VERSION, ...(session ? { "mcp-session-id": session } : {}) }, opts, t);
      } catch (err) {
        if (attempt === 0 && err instanceof SessionGone) {
          this.#session = undefined;
          // Refused before it ran: the next send starts from nothing proven.
          t.sent = false;
          t.status = undefined;
          continue;
        }
        throw err;
      }
    }
  }

  #statelessParams(params: Readonly<Record<string, unknown>>): Record<string, unknown> {
    const meta = isRecord(params._meta) ? params._meta : {};
    return { ...params, _meta: { ...meta, "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION, "io.modelcontextprotocol/clientCapabilities": {} } };
  }

  #statelessHeaders(method: string, params: Readonly<Record<string, unknown>>): Record<string, string> {
    const h: Record<string, string> = { "mcp-protocol-version": STATELESS_VERSION, "mcp-method": method };
    const name = method === "resources/read" ? params.uri : method === "tools/call" || method === "prompts/get" ? params.name : undefined;
    if (typeof name === "string") h["mcp-name"] = /^[\x20-\x7e]*$/.test(name) ? name : `=?base64?${btoa(String.fromCharCode(...new TextEncoder().encode(name)))}?=`;
    return h;
  }

  #openSession(signal: AbortSignal | undefined): Promise<string | undefined> {
    this.#session ??= (async () => {
      const res = await this.#post(
        { jsonrpc: "2.0", id: this.#nextId++, method: "initialize", params: { protocolVersion: STATEFUL_VERSION, capabilities: {}, clientInfo: this.#o.clientInfo ?? { name: "sluice", version: "0" } } },
        {},
        signal,
      );
      const session = res.headers.get("mcp-session-id") ?? undefined;
      const answer = await this.#answerOf(res, undefined);
      if (!answer.ok) throw new GatewayError("upstream_error", "The MCP server refused the gateway's initialize.", { cause: answer.error.message });
      const initialized = await this.#post({ jsonrpc: "2.0", method: "notifications/initialized" }, session ? { "mcp-session-id": session, "mcp-protocol-version": STATEFUL_VERSION } : { "mcp-protocol-version": STATEFUL_VERSION }, signal);
      await initialized.body?.cancel();
      return session;
    })();
    // A failed opening is not kept: the next request tries again.
    this.#session.catch(() => {
      this.#session = undefined;
    });
    return this.#session;
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
      return await this.#answerOf(res, opts.onNotification);
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

  /** The JSON-RPC answer of a response: a JSON body, or the matching message of an SSE stream. */
  async #answerOf(res: Response, onNotification: ((n: UpstreamNotification) => void) | undefined): Promise<UpstreamAnswer> {
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel();
      throw new GatewayError("upstream_error", "The MCP server answered with a redirect, which the gateway does not follow.");
    }
    const type = res.headers.get("content-type") ?? "";
    const messages: unknown[] = [];
    if (/^text\/event-stream/i.test(type)) {
      // The SSE framing is eventsource-parser's, as for provider streams; only the data is ours.
      let bad = false;
      const parser = createParser({
        onEvent: (ev) => {
          if (ev.data === "") return;
          try {
            messages.push(JSON.parse(ev.data));
          } catch {
            bad = true;
          }
        },
      });
      parser.feed(await res.text());
      if (bad) throw new GatewayError("upstream_protocol_error", "The MCP server sent an event that is not JSON.");
    } else {
      const text = await res.text();
      if (text.trim() === "") throw new GatewayError(res.ok ? "upstream_protocol_error" : "upstream_error", `The MCP server answered ${res.status} without a JSON-RPC message.`);
      try {
        messages.push(JSON.parse(text));
      } catch {
        throw new GatewayError("upstream_protocol_error", `The MCP server answered ${res.status} with a body that is not JSON.`);
      }
    }
    for (const m of messages) {
      if (!isRecord(m)) continue;
      if ("result" in m) return { ok: true, result: m.result };
      if (isRecord(m.error) && typeof m.error.code === "number") return { ok: false, error: { code: m.error.code, message: String(m.error.message ?? ""), ...(m.error.data !== undefined ? { data: m.error.data } : {}) } };
      if (typeof m.method === "string" && !("id" in m)) onNotification?.({ method: m.method, params: m.params });
    }
    throw new GatewayError("upstream_protocol_error", `The MCP server's answer (${res.status}) carried no JSON-RPC result or error.`);
  }
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
