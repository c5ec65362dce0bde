import type { PassThroughScanner, ResponseStamp, SseEvent, StreamErrorEvent, StreamFacts } from "../codec.ts";
import type { NeutralRequest } from "../neutral.ts";
import { finishFromStop, stopFromFinish, usageFromWire, usageToWire } from "./response.ts";
import { readChatChunk } from "./stream-chunk.ts";
import { createChatStreamEncoder } from "./stream.ts";

const UNREADABLE: StreamErrorEvent = { type: "error", code: "upstream_protocol_error", message: "The provider sent an unreadable stream event." };
const PROVIDER_ERROR: StreamErrorEvent = { type: "error", code: "upstream_error", message: "The provider reported an error mid-stream." };
const CUT: StreamErrorEvent = { type: "error", code: "upstream_stream_cut", message: "The provider's stream ended before it was complete." };

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** The decoded length of the literal {@link closeOf} last read. */
let literalChars = 0;

/**
 * The index of the closing quote of the JSON string literal whose opening quote is at `open`, or
 * -1 when it is not a well-formed literal; its decoded length (UTF-16 units, as `String.length`
 * counts) is left in `literalChars`. Counting, not decoding: no string is built for a delta.
 */
function closeOf(s: string, open: number): number {
  let n = 0;
  let i = open + 1;
  for (;;) {
    const c = s.charCodeAt(i);
    if (Number.isNaN(c) || c < 0x20) return -1;
    if (c === QUOTE) {
      literalChars = n;
      return i;
    }
    if (c === BACKSLASH) {
      const e = s.charCodeAt(i + 1);
      if (e === 0x75 /* u */) {
        if (!/^[0-9a-fA-F]{4}$/.test(s.slice(i + 2, i + 6))) return -1;
        i += 6;
      } else if (e === QUOTE || e === BACKSLASH || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) i += 2;
      else return -1;
    } else i++;
    n++;
  }
}

/**
 * A plain delta's shape, learnt from one the scanner parsed: the provider's event around its one
 * string (`inPrefix` ends with the string's opening quote, `inSuffix` starts with its closing
 * one), and the client's event around it (the gateway's stamp in place). An event with exactly
 * this prefix and suffix and a well-formed string between them is the same JSON with another
 * string, so it passes the decoder's checks without being parsed.
 */
interface Template {
  readonly inPrefix: string;
  readonly inSuffix: string;
  readonly outPrefix: string;
  readonly outSuffix: string;
}

/** Where `key`'s string value opens in `s`, when `key` occurs exactly once and its value is that string literal; else -1. */
function openOf(s: string, key: string, value: string): number {
  const at = s.indexOf(key);
  if (at < 0 || s.indexOf(key, at + key.length) >= 0) return -1;
  const open = at + key.length;
  if (s.charCodeAt(open) !== QUOTE) return -1;
  const close = closeOf(s, open);
  if (close < 0 || JSON.parse(s.slice(open, close + 1)) !== value) return -1;
  return open;
}

function templateOf(data: string, out: string, key: string, value: string): Template | undefined {
  const inOpen = openOf(data, key, value);
  const outOpen = inOpen < 0 ? -1 : openOf(out, key, value);
  if (outOpen < 0) return undefined;
  const inClose = closeOf(data, inOpen);
  const outClose = closeOf(out, outOpen);
  return { inPrefix: data.slice(0, inOpen + 1), inSuffix: data.slice(inClose), outPrefix: out.slice(0, outOpen + 1), outSuffix: out.slice(outClose) };
}

/**
 * The Chat Completions pass-through (provider and client both speak Chat Completions). A plain
 * delta — one content or reasoning string, the bulk of a stream — is neither parsed nor
 * re-encoded once one like it has been: it matches the shape learnt from that one around its
 * string (see {@link Template}), its string is measured in place (TTFT, the idle limit, the output
 * size) and put into the client's event as the provider wrote it. Any other event — the first,
 * a finish, usage, tool calls, an error, an unknown shape — is parsed and checked exactly as the
 * full path's decoder does, its facts read, and re-serialised with the gateway's stamp (and the
 * finish reason in the client's terms). Usage reaches the client only when it asked
 * (`stream_options.include_usage`; the gateway always asks the provider), as the gateway read it.
 * `[DONE]` is written by the stream's end, only after a clean stop, as on the full path.
 */
export function createChatPassThrough(stamp: ResponseStamp, request: NeutralRequest): PassThroughScanner {
  const includeUsage = request.streamUsage === true;
  const id = `chatcmpl-${stamp.id}`;
  // Writes the stop chunk the full path adds when the provider ended without a finish reason.
  const encoder = createChatStreamEncoder(stamp, request);
  let content: Template | undefined;
  let reasoning: Template | undefined;
  let stopped = false;
  let done = false;
  let failed = false;

  /** A plain delta of a learnt shape: its client text (its facts noted), or undefined. */
  function fast(data: string, t: Template | undefined, facts: StreamFacts): string | undefined {
    if (t === undefined || !data.startsWith(t.inPrefix) || !data.endsWith(t.inSuffix)) return undefined;
    const close = data.length - t.inSuffix.length;
    if (close < t.inPrefix.length || closeOf(data, t.inPrefix.length - 1) !== close) return undefined;
    if (literalChars > 0) facts.content(literalChars);
    return `data: ${t.outPrefix}${data.slice(t.inPrefix.length, close)}${t.outSuffix}\n\n`;
  }

  /** Any other event: parsed and checked as the full path's decoder does. */
  function parsed(data: string, facts: StreamFacts): string | StreamErrorEvent {
    let json: unknown;
    try {
      json = JSON.parse(data);
    } catch {
      failed = true;
      return UNREADABLE;
    }
    const chunk = readChatChunk(json);
    if (chunk === undefined) {
      failed = true;
      return UNREADABLE;
    }
    if (chunk.error) {
      failed = true;
      return PROVIDER_ERROR;
    }
    const obj = json as Record<string, unknown>;
    const choice = chunk.choices?.[0];
    const delta = choice?.delta;
    if (delta) {
      if (delta.reasoning_content) facts.content(delta.reasoning_content.length);
      if (delta.content) facts.content(delta.content.length);
      for (const tc of delta.tool_calls ?? []) {
        if (tc.id && tc.function?.name) {
          facts.content(0);
          facts.toolCall(tc.function.name);
        }
        if (tc.function?.arguments) facts.content(tc.function.arguments.length);
      }
    }
    if (choice?.finish_reason) {
      stopped = true;
      const reason = stopFromFinish(choice.finish_reason);
      facts.stop(reason);
      // The finish reason in the client's terms, as the full path writes it.
      (choice as { finish_reason: string }).finish_reason = finishFromStop(reason);
    }
    if (chunk.usage) {
      const usage = usageFromWire(chunk.usage);
      facts.usage(usage);
      if (!includeUsage) {
        // The usage-only chunk was the gateway's asking, not the client's: dropped.
        if ((chunk.choices?.length ?? 0) === 0) return "";
        delete obj.usage;
      } else obj.usage = usageToWire(usage); // the gateway's reading of it, as a buffered answer gives it
    } else if (!includeUsage && obj.usage === null) delete obj.usage;
    const out = JSON.stringify({ ...obj, id, created: stamp.created, model: stamp.model });
    // A plain delta (one string, nothing else to read) teaches the shape of those that follow.
    if (delta && chunk.choices?.length === 1 && !choice?.finish_reason && !chunk.usage && !delta.tool_calls?.length) {
      if (delta.content && !delta.reasoning_content) content = templateOf(data, out, '"content":', delta.content) ?? content;
      else if (delta.reasoning_content && !delta.content) reasoning = templateOf(data, out, '"reasoning_content":', delta.reasoning_content) ?? reasoning;
    }
    return `data: ${out}\n\n`;
  }

  return {
    scan(sse: SseEvent, facts: StreamFacts): string | StreamErrorEvent {
      if (done || failed) return "";
      const data = sse.data;
      if (data === "[DONE]") {
        done = true;
        // A provider that ends properly but never said why still delivered a complete answer.
        if (stopped) return "";
        stopped = true;
        facts.stop("other");
        return encoder.encode({ type: "stop", reason: "other" });
      }
      return fast(data, content, facts) ?? fast(data, reasoning, facts) ?? parsed(data, facts);
    },
    finish(): StreamErrorEvent | undefined {
      if (done || failed) return undefined;
      failed = true;
      return CUT;
    },
    end(): string {
      return stopped && done ? "data: [DONE]\n\n" : "";
    },
  };
}
