/**
 * One request/response exchange: outcome bookkeeping, disconnect-aware waiting, and the
 * format-neutral delivery of a generation with its timing and faults.
 */

import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { generate, uniqueId } from "./generate.ts";
import type { Knobs } from "./knobs.ts";
import type { Outcome, Recorder } from "./stats.ts";
import type { Frame, GenerationRequest, SimError, WireFormat } from "./wire-format.ts";
import { errorKindForStatus } from "./wire-format.ts";

/**
 * Tracks one exchange. The outcome is recorded exactly once: by whichever of the server
 * (completed, faulted, cut, …) or the client (closing early → aborted) gets there first.
 */
export class Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** Sent in the request-id header and, for formats that carry it, in error bodies. */
  readonly requestId = `req_${uniqueId()}`;
  /** Name of that header; a format may use its own (Anthropic: `request-id`). */
  idHeader = "x-request-id";
  readonly #recorder: Recorder;
  #settled = false;
  #closed = false;
  #timer: NodeJS.Timeout | undefined;
  #wake: ((open: boolean) => void) | undefined;

  constructor(req: IncomingMessage, res: ServerResponse, recorder: Recorder) {
    this.req = req;
    this.res = res;
    this.#recorder = recorder;
    recorder.inFlight(1);
    res.once("close", () => {
      this.#closed = true;
      recorder.inFlight(-1);
      this.settle("aborted");
      if (this.#timer !== undefined) clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#wake?.(false);
      this.#wake = undefined;
    });
  }

  /** Whether the connection is gone (client disconnect, fault or normal end). */
  get closed(): boolean {
    return this.#closed;
  }

  /** Records the outcome unless one was already recorded. */
  settle(outcome: Outcome): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#recorder.outcome(outcome);
  }

  /** Waits `ms`; resolves `false` (early, timer cleared) if the connection closes meanwhile. */
  sleep(ms: number): Promise<boolean> {
    if (this.#closed) return Promise.resolve(false);
    return new Promise((resolve) => {
      this.#wake = resolve;
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.#wake = undefined;
        resolve(true);
      }, ms);
    });
  }

  /** Sends a complete JSON response and records `outcome`. */
  json(status: number, body: string, outcome: Outcome, extraHeaders?: Record<string, string>): void {
    this.settle(outcome);
    this.res.writeHead(status, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
      [this.idHeader]: this.requestId,
      ...extraHeaders,
    });
    this.res.end(body);
  }

  /** Sends `error` in `format`'s envelope. */
  error(format: Pick<WireFormat, "renderError" | "errorHeaders">, error: SimError, outcome: Outcome, extraHeaders?: Record<string, string>): void {
    this.json(error.status, format.renderError(error, this.requestId), outcome, { ...format.errorHeaders?.(error), ...extraHeaders });
  }

  /**
   * Writes `data`, then closes the connection mid-body. Chunked writes sit in a corked
   * socket until the next tick, so an immediate destroy would drop them; ending the socket
   * flushes everything already written, then sends FIN.
   */
  cut(data: Frame, outcome: Outcome): void {
    this.settle(outcome);
    const socket = this.req.socket;
    if (data.length > 0) this.res.write(data);
    socket.end(() => socket.destroy());
  }

  /** Resets the TCP connection (RST) without sending anything. */
  reset(outcome: Outcome): void {
    this.settle(outcome);
    const socket: Socket = this.req.socket;
    if (typeof socket.resetAndDestroy === "function") socket.resetAndDestroy();
    else socket.destroy();
  }
}

const SSE_HEADERS = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" } as const;

/** Frames joined into one write: text stays text, any binary frame makes it bytes. */
function joinFrames(frames: readonly Frame[]): Frame {
  if (frames.every((f) => typeof f === "string")) return frames.join("");
  return Buffer.concat(frames.map((f) => (typeof f === "string" ? Buffer.from(f) : f)));
}

/** The first `n` bytes of a frame, never all of it: a cut inside the frame, whatever its framing. */
function framePrefix(frame: Frame, n: number): Uint8Array {
  const bytes = typeof frame === "string" ? Buffer.from(frame) : frame;
  return bytes.subarray(0, Math.min(n, bytes.length - 1));
}

function simulatedError(status: number): SimError {
  const kind = errorKindForStatus(status);
  const message =
    kind === "rate_limit"
      ? "Rate limit reached for requests (simulated). Please try again later."
      : kind === "overloaded"
        ? "The server is overloaded (simulated). Please try again later."
        : `Simulated error with status ${status}.`;
  const code = kind === "rate_limit" ? "rate_limit_exceeded" : kind === "overloaded" ? "overloaded" : null;
  return { status, kind, message, param: null, code };
}

/**
 * What every endpoint's delivery starts with: `latency-ms`, then the faults that replace the
 * response before any of its body (a `status` error, a reset, a heartbeat). Resolves `true` when
 * the exchange was answered (or the client left). In a stream, `error-mid-stream` is left to the
 * stream; a buffered answer has no "mid-stream", so it gets the error as its HTTP status.
 */
async function answeredBeforeBody(
  ex: Exchange,
  envelope: Pick<WireFormat, "renderError" | "errorHeaders" | "heartbeat" | "streamContentType">,
  knobs: Knobs,
  faulty: boolean,
  stream: boolean,
): Promise<boolean> {
  if (knobs.latencyMs > 0 && !(await ex.sleep(knobs.latencyMs))) return true;
  const fault = faulty ? knobs.fault : undefined;
  const midStreamError = fault === "error-mid-stream" && stream;
  if (faulty && !midStreamError && (knobs.status !== undefined || fault === "error-mid-stream")) {
    const status = knobs.status ?? 500;
    const ms = knobs.retryAfterMs;
    const retryAfter = knobs.retryAfter ?? (ms !== undefined ? Math.ceil(ms / 1000) : status === 429 || status === 503 ? 1 : undefined);
    const headers = retryAfter === undefined ? undefined : { "retry-after": String(retryAfter), ...(ms !== undefined ? { "retry-after-ms": String(ms) } : {}) };
    ex.error(envelope, { ...simulatedError(status), retryAfterSeconds: retryAfter }, "faulted", headers);
    return true;
  }
  if (fault === "reset-before-headers") {
    ex.reset("faulted");
    return true;
  }
  if (fault === "heartbeat-only") {
    await heartbeat(ex, envelope, stream, knobs);
    return true;
  }
  return false;
}

/** A complete JSON body; under `cut-mid-stream`, its headers (full `content-length`) and half of it, then a close. */
function sendJsonBody(ex: Exchange, body: string, cut: boolean): void {
  if (!cut) return ex.json(200, body, "completed");
  const bytes = Buffer.from(body);
  ex.res.writeHead(200, { "content-type": "application/json", "content-length": bytes.length, [ex.idHeader]: ex.requestId });
  ex.cut(bytes.subarray(0, bytes.length >> 1), "cut");
}

/**
 * Delivers the one JSON body of an endpoint that generates no text (embeddings, moderations)
 * with the same latency and faults as a buffered generation. `render` runs only when the body
 * is really sent; its argument is whether `omit-usage` asks for usage to be left out.
 */
export async function serveJson(
  ex: Exchange,
  envelope: Pick<WireFormat, "renderError" | "errorHeaders" | "heartbeat" | "streamContentType">,
  knobs: Knobs,
  faulty: boolean,
  render: (omitUsage: boolean) => string,
): Promise<void> {
  if (await answeredBeforeBody(ex, envelope, knobs, faulty, false)) return;
  const fault = faulty ? knobs.fault : undefined;
  sendJsonBody(ex, render(fault === "omit-usage"), fault === "cut-mid-stream");
}

/**
 * Delivers a generation for a validated request with the given knobs. `faulty` says
 * whether this request's `status`/`fault` knobs apply (see the `times`/`only-model` knobs).
 */
export async function serveGeneration(
  ex: Exchange,
  format: WireFormat,
  request: GenerationRequest,
  knobs: Knobs,
  seed: number,
  faulty: boolean,
): Promise<void> {
  if (await answeredBeforeBody(ex, format, knobs, faulty, request.stream)) return;

  const fault = faulty ? knobs.fault : undefined;
  const midStreamError = fault === "error-mid-stream" && request.stream;
  const completion = generate(request, knobs, seed, fault === "omit-usage");
  const cut = fault === "cut-mid-stream";

  if (!request.stream) return sendJsonBody(ex, format.renderBuffered(completion, request), cut);

  const script = format.renderStream(completion, request);
  const { head, pieces, tail } = script;
  const stopAt = cut || midStreamError ? Math.min(knobs.cutAfter, pieces.length) : -1;
  /** What replaces the rest of the stream at `stopAt`: a cut, or the in-stream error and a clean end. */
  const stop = (sent: Frame): void => {
    if (cut) return ex.cut(knobs.cutBytes > 0 ? joinFrames([sent, framePrefix(pieces[stopAt] ?? tail, knobs.cutBytes)]) : sent, "cut");
    ex.settle("faulted");
    ex.res.end(joinFrames([sent, script.error(simulatedError(knobs.status ?? 500), stopAt)]));
  };
  const headers = format.streamContentType === undefined ? SSE_HEADERS : { "content-type": format.streamContentType };
  ex.res.writeHead(200, { ...headers, [ex.idHeader]: ex.requestId });

  if (knobs.ttftMs === 0 && knobs.tokenIntervalMs === 0) {
    // Unpaced: one write, which is what keeps benchmarks cheap.
    if (stopAt >= 0) return stop(joinFrames([head, ...pieces.slice(0, stopAt)]));
    ex.settle("completed");
    ex.res.end(joinFrames([head, ...pieces, tail]));
    return;
  }

  ex.res.write(head);
  for (let i = 0; i < pieces.length; i++) {
    if (i === stopAt) return stop("");
    const wait = i === 0 ? knobs.ttftMs : knobs.tokenIntervalMs;
    if (wait > 0 && !(await ex.sleep(wait))) return;
    if (ex.closed) return;
    ex.res.write(pieces[i] ?? "");
  }
  if (stopAt === pieces.length) return stop("");
  ex.settle("completed");
  ex.res.end(tail);
}

/**
 * `heartbeat-only`: headers, then nothing but the format's keep-alive frame (an SSE
 * comment, Anthropic's `ping` event) every `heartbeat-ms` (silence for a buffered request)
 * until the client leaves or `duration-ms` passes; then the connection is dropped without
 * a terminating frame.
 */
async function heartbeat(ex: Exchange, format: Pick<WireFormat, "heartbeat" | "streamContentType">, stream: boolean, knobs: Knobs): Promise<void> {
  ex.settle("faulted");
  const streamHeaders = format.streamContentType === undefined ? SSE_HEADERS : { "content-type": format.streamContentType };
  ex.res.writeHead(200, { ...(stream ? streamHeaders : { "content-type": "application/json" }), [ex.idHeader]: ex.requestId });
  ex.res.flushHeaders();
  const end = Date.now() + knobs.durationMs;
  let next = Date.now() + knobs.heartbeatMs;
  for (;;) {
    const wait = (stream ? Math.min(next, end) : end) - Date.now();
    if (wait > 0 && !(await ex.sleep(wait))) return;
    // A frame due before the end is sent even when a late timer (a loaded machine) woke us past the end.
    if (stream && next <= end && Date.now() >= next) {
      ex.res.write(format.heartbeat);
      next += knobs.heartbeatMs;
    }
    if (Date.now() >= end) break;
  }
  ex.cut("", "faulted");
}
