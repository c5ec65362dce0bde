import { noteProposedToolCall } from "../context/attempt-record.ts";
import type { AttemptOutcome, AttemptRecord, Evidence } from "../context/attempt-record.ts";
import { abortError, type AttemptScope, type RequestContext } from "../context/request-context.ts";
import { formatTraceparent } from "../context/trace-context.ts";
import type { Clock } from "../deps/clock.ts";
import type { DispatchPlan } from "../decide/dispatch-plan.ts";
import { checkEgress, type EgressPolicy, type EgressVerdict } from "../egress/egress-guard.ts";
import { passedResponseHeaders } from "../egress/response-headers.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { BackendCodec, BackendProtocolId, CodecRegistry, StreamDecoder } from "../protocol/codec.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import { withoutFeatures } from "../protocol/features.ts";
import type { InputOperation } from "../protocol/input-operation.ts";
import type { InputRequest, InputResponse } from "../protocol/input-wire.ts";
import type { NeutralRequest, NeutralResponse } from "../protocol/neutral.ts";
import type { BackendProtocol } from "../config/backends-schema.ts";
import type { LoadTracker } from "../traffic/load-tracker.ts";
import type { Choice } from "./candidates.ts";
import { azureOpenAiUrl } from "./azure-openai.ts";
import type { TokenCache } from "./auth/token-cache.ts";
import { backendAuthorization } from "./backend-authorization.ts";
import type { CredentialSource } from "./credentials.ts";
import { evidenceFromStatus } from "./evidence.ts";
import { readUpstreamErrorDetail, readUpstreamJson } from "./upstream-body.ts";
import { errorFromUpstreamStatus, retryAfterFromHeaders } from "./upstream-error.ts";
import { runThroughBinding, workersAiStatusFailure, type ModelBindings, type StatusFailure } from "./workers-ai-binding.ts";
import { bedrockErrorType, bedrockStatusFailure } from "./bedrock-errors.ts";
import { geminiStatusFailure, geminiUrl } from "./gemini.ts";
import { readGoogleError } from "../protocol/gemini/endpoint.ts";

/** The Worker's fetcher bindings by name (`env.NAME.fetch`); undefined when none is bound by that name. */
export type TlsFetchers = (name: string) => typeof fetch | undefined;

/** What one attempt needs from its surroundings. */
export interface AttemptDeps {
  readonly codecs: CodecRegistry;
  readonly credentials: CredentialSource;
  readonly load: LoadTracker;
  readonly clock: Clock;
  readonly fetch: typeof fetch;
  /** Per attempt: longest wait for the provider's response headers (connection set-up included). */
  readonly firstByteTimeoutMs?: number | undefined;
  /**
   * Opens (and closes) a TCP connection to host:port; resolves false when it cannot be opened.
   * Used for backends with `connectCheck` (the composition root supplies the sockets API).
   */
  readonly preconnect?: ((hostname: string, port: number, signal: AbortSignal) => Promise<boolean>) | undefined;
  /**
   * The egress guard's policy (gateway.yaml `security.egress`). When set, each attempt's address
   * passes the guard before anything is reserved or sent: a snapshot stored before the guard, or
   * before the allowlist changed, never reached the checks at config load and snapshot push.
   */
  readonly egress?: EgressPolicy | undefined;
  /**
   * The Worker's bindings that backends of a binding protocol (Workers AI) are reached through,
   * by name (the composition root supplies its own). Without them such a backend is unreachable.
   */
  readonly bindings?: ModelBindings | undefined;
  /**
   * The Worker's fetcher bindings that backends with `tls` are reached through, by name: each
   * carries the backend's CA, server name and client certificate (a workerd external service, a
   * Cloudflare mTLS certificate binding). Without them such a backend is unreachable.
   */
  readonly tlsFetchers?: TlsFetchers | undefined;
  /**
   * Access tokens minted for backends whose credential is an application (Entra ID), one cache
   * per isolate (the composition root's). Absent: a cache of this module's, per isolate too.
   */
  readonly tokens?: TokenCache | undefined;
  /**
   * The values of every secret the gateway holds (egress/held-secrets.ts): a `responseHeaders`
   * value containing one is not passed to the client. Absent: none are known.
   */
  readonly heldSecrets?: (() => readonly string[]) | undefined;
}

/** A successful chat attempt: the provider answered 2xx with a readable body or a stream. */
export type AttemptSuccess = (
  | { readonly kind: "buffered"; readonly response: NeutralResponse }
  | { readonly kind: "stream"; readonly body: ReadableStream<Uint8Array>; readonly decoder: StreamDecoder; readonly protocol: BackendProtocolId }
) & {
  /** The provider response headers the backend lists in `responseHeaders`, for the client. */
  readonly headers: Readonly<Record<string, string>>;
};

/** A successful attempt of an input-only operation: its answer, and the provider headers passed on. */
export interface InputSuccess<Res extends InputResponse> {
  readonly response: Res;
  readonly headers: Readonly<Record<string, string>>;
}

/** A successful token-count attempt: the provider's count, and the provider headers passed on. */
export interface CountSuccess {
  readonly inputTokens: number;
  readonly headers: Readonly<Record<string, string>>;
}

/** A failed attempt: the error the client would see and the evidence the retry policy reads. */
export interface AttemptFailure {
  readonly ok: false;
  readonly error: GatewayError;
  readonly evidence: Evidence;
}

export type AttemptResult<S = AttemptSuccess> = { readonly ok: true; readonly success: S } | AttemptFailure;

/**
 * Reads a 2xx provider answer into an operation's result, ending the attempt (a stream's attempt
 * stays open: the respond phase ends it with the stream). `aborted` classifies a read that failed
 * because the request or the attempt's own limit stopped it.
 */
export type AnswerReader<S> = (
  res: Response,
  attempt: AttemptScope,
  aborted: (err: unknown) => AttemptFailure | undefined,
  /** The provider's headers the client is given (the backend's `responseHeaders`, none holding a secret of the gateway's). */
  passedHeaders: () => Readonly<Record<string, string>>,
) => Promise<AttemptResult<S>>;

/**
 * The request as this backend will receive it, built before anything is reserved for it, and the
 * transport that carries it: fetch to the backend's URL, or a call on a Worker binding.
 */
export interface PreparedAttempt {
  readonly codec: BackendCodec;
  /** Sends the request: resolves with the provider's answer; rejects when none came (the signal fired, the connection or binding failed). */
  send(signal: AbortSignal): Promise<Response>;
  /** What a non-2xx answer of this backend means (its headers may name the error: Bedrock's `x-amzn-errortype`). */
  failure(status: number, retryAfter: number | undefined, detail: string, headers: Headers): StatusFailure;
  /**
   * Obtains what the request is authorized with before it is sent (an access token minted or
   * taken from the cache). Its failure is known-zero: nothing reached the provider.
   */
  authorize?(signal: AbortSignal): Promise<void>;
  /**
   * Backends with `tls` and `connectCheck`: completes a TLS handshake through the backend's binding
   * before the request is sent; resolves false when it failed (a TCP check cannot prove it).
   */
  handshake?(signal: AbortSignal): Promise<boolean>;
}

/**
 * A TLS handshake through a backend's binding: a bodiless `HEAD` of the request's URL, whose any
 * answer (a 404 or 405 included) proves the connection, trust and client certificate held; the
 * request then follows on the same pooled connection. A fetch that rejects reached no handler: a
 * handshake the server refused, or a connection it never opened.
 */
async function tlsHandshake(send: typeof fetch, url: string, signal: AbortSignal): Promise<boolean> {
  try {
    const res = await send(url, { method: "HEAD", signal, redirect: "manual" });
    await res.body?.cancel();
    return true;
  } catch {
    return false;
  }
}

/** A non-2xx answer as HTTP and the backend's protocol define it. */
function statusFailure(codec: BackendCodec, status: number, retryAfter: number | undefined, detail: string): StatusFailure {
  return { error: errorFromUpstreamStatus(status, retryAfter, detail), evidence: evidenceFromStatus(status, codec.rejectedBeforeProcessing, retryAfter), outcome: "upstream_status" };
}

/**
 * The latency an attempt reports to the load tracker (it steers p2c): time to response headers,
 * so long streams do not look slow; none for attempts that failed.
 */
export function headerLatency(a: Readonly<AttemptRecord>): number | undefined {
  return (a.outcome === "success" || a.outcome === "client_cancelled") && a.headersAt !== undefined ? a.headersAt - a.startedAt : undefined;
}

/** Ends the attempt with a failure and returns what the retry policy reads. */
function failed(attempt: AttemptScope, error: GatewayError, evidence: Evidence, outcome: AttemptOutcome): AttemptFailure {
  // An attempt the request's terminal already ended keeps the record it was settled with.
  if (!attempt.ended) attempt.record.evidence = evidence;
  attempt.finish(outcome, error.code);
  return { ok: false, error, evidence };
}

/**
 * The guard's verdict on a base URL, remembered per policy: a backend's address and the policy
 * are both fixed, and parsing and classifying the URL on every attempt was a visible part of an
 * attempt's cost. Bounded: past `MAX_VERDICTS` addresses (snapshots come and go) it starts over.
 */
const verdicts = new WeakMap<EgressPolicy, Map<string, EgressVerdict>>();
const MAX_VERDICTS = 1024;
function egressVerdict(baseUrl: string, policy: EgressPolicy): EgressVerdict {
  let known = verdicts.get(policy);
  if (known === undefined) verdicts.set(policy, (known = new Map()));
  let v = known.get(baseUrl);
  if (v === undefined) {
    if (known.size >= MAX_VERDICTS) known.clear();
    v = checkEgress(baseUrl, policy);
    known.set(baseUrl, v);
  }
  return v;
}

/**
 * Builds the provider request: its own headers (never a caller header, never a caller
 * credential), the credential read now by secret name, and the body in the backend's protocol —
 * or, for a backend reached through a binding, the binding looked up now by name and the inputs.
 * Nothing is sent, so a refusal here is known-zero; the attempt is ended and listed (it names a
 * configuration problem an operator must see).
 */
export function prepareAttempt(
  deps: AttemptDeps,
  plan: DispatchPlan,
  choice: Choice,
  attempt: AttemptScope,
  /** The operation's path and body in the backend's protocol; throws the encoder's refusal. */
  encode: (codec: BackendCodec, choice: Choice) => EncodedAttempt,
): PreparedAttempt | AttemptFailure {
  const { member } = choice;
  const backend = member.backend;
  const codec = deps.codecs.backend(backend.protocol)!;
  if (backend.binding !== undefined) {
    const binding = deps.bindings?.(backend.binding);
    if (binding === undefined) {
      const error = new GatewayError("internal_error", "The gateway is missing a model binding.", { cause: `binding ${backend.binding} is not bound to the Worker` });
      // Nothing was sent: another backend may serve the request.
      return failed(attempt, error, { class: "known_zero", reason: "not_attempted" }, "connect_failed");
    }
    return encoded(attempt, () => {
      const inputs = encode(codec, choice).body;
      // A binding protocol's codec encodes run()'s inputs object; anything else is the gateway's bug.
      if (!isRecord(inputs)) throw new GatewayError("internal_error", "The gateway failed to encode the request for the model provider.", { cause: "the inputs are not an object" });
      return {
        codec,
        send: (signal) => runThroughBinding(binding, member.model, inputs, signal),
        failure: (status, retryAfter, detail) => workersAiStatusFailure(status, detail) ?? statusFailure(codec, status, retryAfter, detail),
      };
    });
  }
  if (deps.egress) {
    const verdict = egressVerdict(backend.baseUrl, deps.egress);
    if (!verdict.ok) {
      const error = new GatewayError("internal_error", "The gateway refused to call a provider address its configuration names.", { cause: `egress refused (${verdict.refusal.code}): ${verdict.refusal.message}` });
      // Nothing was sent: another backend may serve the request.
      return failed(attempt, error, { class: "known_zero", reason: "not_attempted" }, "connect_failed");
    }
  }
  const headers = new Headers(codec.upstreamHeaders);
  for (const [k, v] of Object.entries(backend.headers)) headers.set(k, v);
  headers.set("content-type", "application/json");
  headers.set("accept", plan.stream ? (codec.streamAccept ?? "text/event-stream") : "application/json");
  headers.set("accept-encoding", "identity");
  headers.set("user-agent", "sluice");
  if (backend.propagateTraceContext) {
    // The attempt's own span is the provider's parent; the trace is the request's.
    const trace = attempt.request.record.trace;
    headers.set("traceparent", formatTraceparent(trace.traceId, attempt.record.spanId ?? trace.spanId, trace.sampled));
    if (trace.state !== undefined) headers.set("tracestate", trace.state);
  }
  let send: typeof fetch = deps.fetch;
  if (backend.tls !== undefined) {
    const fetcher = deps.tlsFetchers?.(backend.tls.binding);
    if (fetcher === undefined) {
      const error = new GatewayError("internal_error", "The gateway is missing a provider's TLS binding.", { cause: `TLS binding ${backend.tls.binding} is not bound to the Worker` });
      // Nothing was sent: another backend may serve the request.
      return failed(attempt, error, { class: "known_zero", reason: "not_attempted" }, "connect_failed");
    }
    send = fetcher;
  }
  const auth = backendAuthorization(deps, backend, codec);
  if (!auth.ok) {
    const error = new GatewayError("internal_error", "The gateway is missing a provider credential.", { cause: `secret ${auth.missing} is not set` });
    // Nothing was sent: another backend may serve the request.
    return failed(attempt, error, { class: "known_zero", reason: "not_attempted" }, "connect_failed");
  }
  for (const [k, v] of Object.entries(auth.headers)) headers.set(k, v);
  const { authorizer } = auth;
  return encoded(attempt, () => {
    const { path, body: json, headers: own } = encode(codec, choice);
    // A `headers` plugin's (allowlisted names only: egress/upstream-headers.ts); the decision's word wins over the backend's static headers.
    if (own) for (const [k, v] of Object.entries(own)) headers.set(k, v);
    const url =
      backend.protocol === "azure-openai" ? azureOpenAiUrl(backend, member.model, path) : backend.protocol === "gemini" ? geminiUrl(backend, member.model, plan.stream) : `${backend.baseUrl}${path}`;
    // Serialised once: a signature covers exactly this text (sent as UTF-8), and a retry sends it again.
    const body = JSON.stringify(json);
    return {
      codec,
      authorize: authorizer && ((signal) => authorizer.authorize({ url, headers, body }, signal)),
      // Redirects are never followed: a 3xx is the provider's answer (an upstream error), so no
      // provider can bounce a request, its credential included, to an address the guard refuses.
      send: (signal) => send(url, { method: "POST", headers, body, signal, redirect: "manual" }),
      handshake: backend.tls !== undefined && backend.connectCheck ? (signal) => tlsHandshake(send, url, signal) : undefined,
      failure: (status, retryAfter, detail, resHeaders) => {
        if (status === 401) authorizer?.refused?.();
        return providerStatusFailure(backend.protocol, status, detail, resHeaders) ?? statusFailure(codec, status, retryAfter ?? providerRetryAfter(backend.protocol, detail), detail);
      },
    };
  });
}

/** What a protocol's own error names say a non-2xx answer means, where they say more than its status. */
function providerStatusFailure(protocol: BackendProtocol, status: number, detail: string, headers: Headers): StatusFailure | undefined {
  switch (protocol) {
    case "bedrock-converse":
      return bedrockStatusFailure(status, bedrockErrorType(headers.get("x-amzn-errortype")), detail);
    case "gemini":
      return geminiStatusFailure(status, readGoogleError(detail), detail);
    default:
      return undefined;
  }
}

/** The wait a protocol's error body asks for, when its headers named none (Google's `RetryInfo`). */
function providerRetryAfter(protocol: BackendProtocol, detail: string): number | undefined {
  return protocol === "gemini" ? readGoogleError(detail).retryDelaySeconds : undefined;
}

/** The prepared attempt, or the encoder's refusal as the attempt's failure. */
function encoded(attempt: AttemptScope, prepare: () => PreparedAttempt): PreparedAttempt | AttemptFailure {
  try {
    return prepare();
  } catch (err) {
    // The backend's protocol cannot express this request (an encoder refusal). `connect_failed`:
    // it never reached the backend, so its breaker hears nothing against it.
    const error = err instanceof GatewayError ? err : new GatewayError("internal_error", "The gateway failed to encode the request for the model provider.", { cause: err });
    return failed(attempt, error, { class: "client_error", reason: "not_attempted" }, "connect_failed");
  }
}

/**
 * Sends one prepared attempt. Never throws for an upstream failure: it returns the error the
 * client would see together with the evidence the retry policy reads, and the attempt is ended
 * (a stream's attempt stays open: the respond phase ends it with the stream).
 */
export async function sendAttempt<S>(deps: AttemptDeps, request: RequestContext, choice: Choice, attempt: AttemptScope, prepared: PreparedAttempt, read: AnswerReader<S>): Promise<AttemptResult<S>> {
  const { clock } = deps;
  const { member } = choice;
  const backend = member.backend;
  const a = attempt.record;
  attempt.start();
  const releaseLoad = deps.load.begin(member.key);
  attempt.own("load_lease", (r) => releaseLoad(headerLatency(r)));

  if (request.deadlineAt - clock.now() <= 0) {
    // Nothing was sent: known-zero for the books; the retry policy stops at the deadline anyway.
    return failed(attempt, new GatewayError("deadline_exceeded", "The request deadline passed."), { class: "known_zero", reason: "not_attempted" }, "timeout");
  }
  // The wait for headers has its own limit, on the request's one timer (an alarm); once they
  // arrive it is cleared, so a long healthy stream is never cut by it. The request's own signal
  // carries its deadline, a client disconnect and a drain, and is all the fetch needs when the
  // deadline comes before the limit.
  const firstByte = new AbortController();
  const firstByteMs = deps.firstByteTimeoutMs;
  const clearFirstByte = firstByteMs !== undefined && firstByteMs < request.deadlineAt - clock.now() ? request.alarm(clock.now() + firstByteMs, () => firstByte.abort()) : undefined;
  const signal = clearFirstByte === undefined ? request.signal : AbortSignal.any([request.signal, firstByte.signal]);
  /** Which signal fired decides the class; error text is never read. */
  const aborted = (err: unknown): AttemptFailure => {
    const reason = request.abortReason;
    if (reason !== undefined) {
      // The request was aborted (its terminal already ended this attempt): say why.
      const deadline = reason === "deadline";
      return failed(attempt, abortError(reason, err), { class: "unknown", reason: deadline ? "timeout" : "client_cancelled" }, deadline ? "timeout" : "client_cancelled");
    }
    if (firstByte.signal.aborted) {
      // The request was sent: the provider may be working on it. Unknown, so never retried.
      return failed(attempt, new GatewayError("upstream_timeout", "The model provider did not start answering in time.", { cause: err }), { class: "unknown", reason: "timeout" }, "timeout");
    }
    // A refused connection and a reset after the body was written look the same here: unknown.
    return failed(attempt, new GatewayError("upstream_unreachable", "The model provider could not be reached.", { cause: err }), { class: "unknown", reason: "network_error" }, "network_error");
  };

  if (prepared.authorize) {
    try {
      await prepared.authorize(signal);
    } catch (err) {
      if (request.abortReason !== undefined) {
        clearFirstByte?.();
        return aborted(err);
      }
      clearFirstByte?.();
      // No token, so nothing was sent: the next candidate or tier may serve the request.
      const error = err instanceof GatewayError ? err : new GatewayError("upstream_unreachable", "The model provider's token service could not be reached.", { cause: err });
      return failed(attempt, error, { class: "known_zero", reason: "credential_unavailable" }, "connect_failed");
    }
  }
  const preconnect = deps.preconnect;
  const check =
    prepared.handshake ??
    (backend.connectCheck && preconnect && backend.baseUrl !== undefined
      ? (signal: AbortSignal) => {
          const url = new URL(backend.baseUrl!);
          return preconnect(url.hostname, url.port !== "" ? Number(url.port) : url.protocol === "https:" ? 443 : 80, signal);
        }
      : undefined);
  if (check) {
    let opened: boolean;
    try {
      opened = await check(signal);
    } catch {
      opened = false;
    }
    if (signal.aborted) {
      clearFirstByte?.();
      return aborted(signal.reason);
    }
    if (!opened) {
      clearFirstByte?.();
      // The request was never sent: the connection did not open. Safe to try elsewhere.
      return failed(attempt, new GatewayError("upstream_unreachable", "The model provider could not be reached."), { class: "known_zero", reason: "connect_failed" }, "connect_failed");
    }
  }

  let res: Response;
  try {
    res = await prepared.send(signal);
  } catch (err) {
    return aborted(err);
  } finally {
    clearFirstByte?.();
  }
  a.headersAt = clock.now();
  a.status = res.status;

  if (!res.ok) {
    const detail = await readUpstreamErrorDetail(res);
    const after = retryAfterFromHeaders(res.headers, clock.now());
    const f = prepared.failure(res.status, after, detail, res.headers);
    return failed(attempt, f.error, f.evidence, f.outcome);
  }
  return await read(res, attempt, (err) => (signal.aborted ? aborted(err) : undefined), () => passedResponseHeaders(res.headers, backend.responseHeaders, deps.heldSecrets));
}

/** The request as a chat backend receives it: the features it cannot carry dropped (allowed by the revision's downgrades). */
/** What an operation sends to one backend: the path after its base URL, the body, and headers of the request's own. */
export interface EncodedAttempt {
  readonly path: string;
  readonly body: unknown;
  /** Set by the request's `headers` plugins; never a credential or the gateway's own. */
  readonly headers?: Readonly<Record<string, string>> | undefined;
}

export function encodeChat(request: NeutralRequest, headers?: Readonly<Record<string, string>>): (codec: BackendCodec, choice: Choice) => EncodedAttempt {
  return (codec, choice) => ({
    path: codec.upstreamPathFor?.(choice.member.model, request.stream) ?? codec.upstreamPath,
    body: codec.encodeRequest(withoutFeatures(request, new Set(choice.drop)), choice.member.model, { streamUsage: choice.member.backend.capabilities.includes("stream-usage") }),
    headers,
  });
}

/** The request of an input-only operation as its backend receives it (its protocol's wire for the operation). */
export function encodeInput<Req extends InputRequest, Res extends InputResponse>(op: InputOperation<Req, Res>, request: Req): (codec: BackendCodec, choice: Choice) => EncodedAttempt {
  return (codec, choice) => {
    const wire = op.backendWire(codec);
    if (wire === undefined) throw new GatewayError("internal_error", `The backend's protocol has no ${op.id} wire.`);
    return { path: wire.upstreamPath, body: wire.encodeRequest(request, choice.member.model) };
  };
}

/** The request as a token-count backend receives it (its protocol's count wire). */
export function encodeCount(request: NeutralRequest): (codec: BackendCodec, choice: Choice) => EncodedAttempt {
  return (codec, choice) => {
    const wire = codec.countTokens;
    if (wire === undefined) throw new GatewayError("internal_error", "The backend's protocol has no token-count wire.");
    return { path: wire.upstreamPath, body: wire.encodeRequest(request, choice.member.model) };
  };
}

/** A token count: the provider's figure (the attempt has no usage: counting is not billed). */
export function readCount(codec: BackendCodec): AnswerReader<CountSuccess> {
  return async (res, attempt, aborted, passedHeaders) => {
    const json = await readJson(res, attempt, aborted);
    if ("ok" in json) return json;
    let inputTokens: number;
    try {
      inputTokens = codec.countTokens!.decodeResponse(json.value);
    } catch (err) {
      return unreadable(attempt, err);
    }
    attempt.record.evidence = { class: "success", reason: "ok", status: res.status };
    attempt.finish("success");
    return { ok: true, success: { inputTokens, headers: passedHeaders() } };
  };
}

/** A chat answer: a stream handed on open, or a buffered body decoded once into a neutral response. */
export function readChat(stream: boolean, codec: BackendCodec): AnswerReader<AttemptSuccess> {
  return async (res, attempt, aborted, passedHeaders) => {
    const a = attempt.record;
    const contentType = res.headers.get("content-type") ?? "";
    if (stream) {
      if (!contentType.includes(codec.streamAccept ?? "text/event-stream") || !res.body) {
        res.body?.cancel().catch(() => {});
        return failed(attempt, new GatewayError("upstream_protocol_error", "The model provider did not answer with a stream."), { class: "unknown", reason: "protocol_error" }, "protocol_error");
      }
      a.evidence = { class: "success", reason: "ok", status: res.status };
      return { ok: true, success: { kind: "stream", body: res.body, decoder: codec.createStreamDecoder(), protocol: codec.id, headers: passedHeaders() } };
    }
    const json = await readJson(res, attempt, aborted);
    if ("ok" in json) return json;
    let response: NeutralResponse;
    try {
      response = codec.decodeResponse(json.value);
    } catch (err) {
      return unreadable(attempt, err);
    }
    a.stopReason = response.stopReason;
    for (const call of response.toolCalls) noteProposedToolCall(a, call.name);
    if (response.usage) a.usage = response.usage;
    a.outputChars = response.text.length + (response.reasoning ?? []).reduce((n, r) => n + r.text.length, 0) + response.toolCalls.reduce((n, c) => n + c.arguments.length, 0);
    a.evidence = { class: "success", reason: "ok", status: res.status };
    attempt.finish("success");
    return { ok: true, success: { kind: "buffered", response, headers: passedHeaders() } };
  };
}

/**
 * An input-only operation's answer: one result per input, decoded once by the operation's wire;
 * its input tokens, when the provider reported them, are the attempt's usage (none: unknown).
 */
export function readInput<Req extends InputRequest, Res extends InputResponse>(op: InputOperation<Req, Res>, codec: BackendCodec, inputs: number): AnswerReader<InputSuccess<Res>> {
  return async (res, attempt, aborted, passedHeaders) => {
    const json = await readJson(res, attempt, aborted);
    if ("ok" in json) return json;
    let response: Res;
    try {
      // The wire exists: the attempt's request was encoded with it.
      response = op.backendWire(codec)!.decodeResponse(json.value, inputs);
    } catch (err) {
      return unreadable(attempt, err);
    }
    const a = attempt.record;
    if (response.inputTokens !== undefined) a.usage = { inputTokens: response.inputTokens, outputTokens: 0, source: "provider" };
    a.evidence = { class: "success", reason: "ok", status: res.status };
    attempt.finish("success");
    return { ok: true, success: { response, headers: passedHeaders() } };
  };
}

/** The answer's JSON body, or the attempt's failure (an aborted read says why). */
async function readJson(res: Response, attempt: AttemptScope, aborted: (err: unknown) => AttemptFailure | undefined): Promise<{ readonly value: unknown } | AttemptFailure> {
  try {
    return { value: await readUpstreamJson(res) };
  } catch (err) {
    const stopped = aborted(err);
    if (stopped) return stopped;
    return failed(
      attempt,
      err instanceof GatewayError ? err : new GatewayError("upstream_protocol_error", "The model provider returned an unreadable response.", { cause: err }),
      { class: "unknown", reason: "protocol_error" },
      "protocol_error",
    );
  }
}

/** A body the provider's protocol cannot read: it may have done the work, so unknown. */
function unreadable(attempt: AttemptScope, err: unknown): AttemptFailure {
  const error = err instanceof GatewayError ? err : new GatewayError("upstream_protocol_error", "The model provider returned an unreadable response.", { cause: err });
  return failed(attempt, error, { class: "unknown", reason: "protocol_error" }, "protocol_error");
}
