/**
 * The format-neutral generation core: what the simulated model says and what it costs.
 *
 * Everything here is a pure function of the request and knobs (ids and `created` aside),
 * so the same conversation yields the same text whichever wire format carried it.
 */

import { randomBytes } from "node:crypto";
import { qualityFor, type Knobs } from "./knobs.ts";
import { buildArguments } from "./tool-arguments.ts";
import type { Completion, GenerationRequest, NeutralMessage, TokenLogprob, ToolCall, ToolSpec } from "./wire-format.ts";

/** Prompt tokens added once per request, like the reply priming of real tokenizers. */
export const PROMPT_BASE_TOKENS = 3;
/** Prompt tokens added per message for role and framing. */
export const PER_MESSAGE_TOKENS = 4;
/** Prompt tokens per non-text part (image, audio, file). */
export const PER_MEDIA_TOKENS = 85;
/** Characters per token, for prompt text, tool declarations and tool-call arguments. */
export const CHARS_PER_TOKEN = 4;

/** The fixed vocabulary output words are drawn from. */
export const VOCABULARY: readonly string[] = [
  "river", "stone", "lantern", "harbor", "meadow", "signal", "copper", "window",
  "garden", "thunder", "paper", "orbit", "candle", "forest", "silver", "bridge",
  "echo", "marble", "valley", "anchor", "feather", "glacier", "compass", "ember",
  "willow", "canyon", "mirror", "velvet", "summit", "ripple", "falcon", "prairie",
  "beacon", "cedar", "quartz", "island", "tundra", "violet", "harvest", "nectar",
  "pebble", "saddle", "timber", "lagoon", "crystal", "meteor", "orchard", "plume",
  "rocket", "spiral", "tandem", "umbra", "vessel", "wander", "zenith", "amber",
  "breeze", "cobalt", "dune", "fjord", "granite", "hollow", "ivory", "jasper",
];

/**
 * Prompt tokens of a request:
 * 3 + Σ per message (4 + ⌈text length / 4⌉ + 85 × media parts)
 *   + Σ per declared tool ⌈length of JSON {name, description, parameters} / 4⌉.
 * Lengths are JavaScript string lengths (UTF-16 code units).
 */
export function countPromptTokens(request: Pick<GenerationRequest, "messages" | "tools">): number {
  let total = PROMPT_BASE_TOKENS;
  for (const message of request.messages) {
    total += PER_MESSAGE_TOKENS + Math.ceil(message.text.length / CHARS_PER_TOKEN) + PER_MEDIA_TOKENS * message.media;
  }
  for (const tool of request.tools) {
    const declared = JSON.stringify({ name: tool.name, description: tool.description, parameters: tool.parameters });
    total += Math.ceil(declared.length / CHARS_PER_TOKEN);
  }
  return total;
}

/** FNV-1a's offset basis: the hash of nothing. */
const FNV_OFFSET = 0x811c9dc5;

/**
 * 32-bit FNV-1a of `text` (UTF-16 code units), continuing from `hash`. `separate` mixes in
 * one more byte after the text, so that in a chain ["ab","c"] and ["a","bc"] differ.
 */
export function fnv1a(text: string, hash = FNV_OFFSET, separate = false): number {
  let h = hash;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  if (separate) h = Math.imul(h ^ 0xff, 0x01000193);
  return h >>> 0;
}

/** FNV-1a over `texts` in order, each followed by a separator: the `times` key of a list of inputs. */
export function hashTexts(texts: readonly string[]): number {
  let hash = FNV_OFFSET;
  for (const text of texts) hash = fnv1a(text, hash, true);
  return hash;
}

/**
 * 32-bit FNV-1a over roles and texts of the conversation: the seed of the output and
 * the default `key` of the `times` knob. Model and knobs are deliberately left out, so a
 * retry or failover to another model sees the same conversation.
 */
export function conversationHash(messages: readonly NeutralMessage[]): number {
  let hash = FNV_OFFSET;
  for (const message of messages) hash = fnv1a(message.text, fnv1a(message.role, hash, true), true);
  return hash;
}

/** Text of the last `user` turn: where `[[sim …]]` directives are read. */
export function lastUserText(messages: readonly NeutralMessage[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    if (message !== undefined && message.role === "user") return message.text;
  }
  return "";
}

/** The simulator's own markers: control, not content, so they never move a vector or an echo. */
const MARKER = /\[\[(?:sim\b|mod:)[^\]]*\]\]/g;

/** Text without `[[sim …]]` directives and `[[mod:…]]` markers. */
export function withoutMarkers(text: string): string {
  return text.includes("[[") ? text.replace(MARKER, " ") : text;
}

/** The text in pieces of `size` characters (UTF-16 units), the last one shorter. */
function echoTokens(text: string, size: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/** mulberry32: small, fast, good enough to pick words. */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The first `count` output tokens for `seed`. Token 0 is a capitalised word, every later
 * token a space plus a word; `final` appends a full stop to the last one, so a natural
 * end differs visibly from a cut. A shorter output is always a prefix of a longer one.
 */
export function textTokens(seed: number, count: number, final: boolean): string[] {
  const next = prng(seed);
  const tokens = new Array<string>(count);
  for (let i = 0; i < count; i++) {
    const word = VOCABULARY[Math.floor(next() * VOCABULARY.length)] ?? "river";
    tokens[i] = i === 0 ? word.charAt(0).toUpperCase() + word.slice(1) : ` ${word}`;
  }
  if (final && count > 0) tokens[count - 1] += ".";
  return tokens;
}

/**
 * Applies stop sequences to text tokens: the text ends just before the earliest match
 * (the sequence itself is not part of the output). `consumed` counts the tokens the model
 * generated up to and including the end of the sequence, which is what the output costs;
 * the token a match starts in is kept up to the match. `undefined` when nothing matches.
 */
export function applyStopSequences(
  tokens: readonly string[],
  stops: readonly string[],
): { tokens: string[]; consumed: number; sequence: string } | undefined {
  const text = tokens.join("");
  let at = -1;
  let sequence = "";
  for (const stop of stops) {
    if (stop === "") continue;
    const i = text.indexOf(stop);
    if (i !== -1 && (at === -1 || i < at)) {
      at = i;
      sequence = stop;
    }
  }
  if (at === -1) return undefined;
  const end = at + sequence.length;
  const kept: string[] = [];
  let consumed = 0;
  let offset = 0;
  for (const token of tokens) {
    if (offset < at) {
      const part = token.slice(0, at - offset);
      if (part !== "") kept.push(part);
    }
    if (offset < end) consumed++;
    offset += token.length;
  }
  return { tokens: kept, consumed, sequence };
}

/** Seed of the reasoning words, derived from the conversation seed so it differs from the text. */
const REASONING_SALT = 0x9e3779b9;

/** Splits tool-call arguments into stream pieces of {@link CHARS_PER_TOKEN} characters. */
export function splitPieces(text: string): string[] {
  const pieces: string[] = [];
  for (let i = 0; i < text.length; i += CHARS_PER_TOKEN) pieces.push(text.slice(i, i + CHARS_PER_TOKEN));
  return pieces;
}

// Unique ids without a syscall per request: random per process, then a counter.
const ID_PREFIX = randomBytes(6).toString("hex");
let idCounter = 0;

/** A process-unique id suffix, e.g. `a1b2c3d4e5f6000000001`. */
export function uniqueId(): string {
  idCounter = (idCounter + 1) % 0x1000000000;
  return ID_PREFIX + idCounter.toString(36).padStart(9, "0");
}

/**
 * Which tool to call, if any: the `tool` knob, else a function named by `tool_choice`,
 * else the first tool when the choice is `required`. Only when tools were declared.
 */
function chooseTool(request: GenerationRequest, knobs: Knobs): { name: string; spec: ToolSpec | undefined } | undefined {
  if (request.tools.length === 0) return undefined;
  const choice = request.toolChoice;
  const name =
    knobs.tool ??
    (choice.type === "function" ? choice.name : choice.type === "required" ? request.tools[0]?.name : undefined);
  if (name === undefined) return undefined;
  return { name, spec: request.tools.find((t) => t.name === name) };
}

/** A probability's natural log, kept finite (a quality of 0 is a very unsure model, not -Infinity). */
const ln = (p: number) => Math.log(Math.max(p, 1e-9));

/**
 * The log-probabilities a model of this quality shows: every emitted token has probability
 * `quality`; the alternatives share the rest, halving (the first has (1 - quality) / 2, the next a
 * quarter, …). So the mean log-probability is ln(quality) and the margin to the best alternative
 * ln(quality) - ln((1 - quality) / 2): a test sets the score it wants with one knob.
 */
export function tokenLogprobs(tokens: readonly string[], quality: number, alternatives: number): TokenLogprob[] {
  return tokens.map((token) => {
    const chosen = { token, logprob: ln(quality) };
    const others = Array.from({ length: alternatives }, (_, k) => ({ token: `${token.trim() || "_"}~${k + 1}`, logprob: ln((1 - quality) / 2 ** (k + 1)) }));
    const top = alternatives === 0 ? [] : [chosen, ...others].sort((a, b) => b.logprob - a.logprob).slice(0, alternatives);
    return { token, logprob: chosen.logprob, top };
  });
}

/**
 * Produces the completion for a validated request.
 *
 * Output cap: `reasoning = min(reasoning-tokens, cap)`, and visible output may use the
 * rest of the cap; hitting it gives finish `length` (for a tool call, truncated arguments).
 * A stop sequence found in the text ends it earlier with finish `stop_sequence`.
 * `completionTokens` = visible tokens emitted + reasoning tokens, as OpenAI counts them.
 * `cachedTokens` = min(cached-tokens, promptTokens).
 */
export function generate(request: GenerationRequest, knobs: Knobs, seed: number, omitUsage: boolean): Completion {
  const cap = request.maxTokens ?? Infinity;
  const reasoningTokens = Math.min(knobs.reasoningTokens, cap);
  const budget = cap - reasoningTokens;

  let tokens: readonly string[] = [];
  let toolCall: ToolCall | undefined;
  let finish: Completion["finish"];
  let emitted: number;
  let stopSequence: string | undefined;

  const tool = chooseTool(request, knobs);
  if (tool !== undefined) {
    const full = splitPieces(buildArguments(tool.spec?.parameters));
    const pieces = full.length > budget ? full.slice(0, budget) : full;
    toolCall = { uid: uniqueId(), name: tool.name, arguments: pieces.join(""), pieces };
    finish = pieces.length < full.length ? "length" : "tool";
    emitted = pieces.length;
  } else {
    // An echo repeats the caller's own words (directives left out), cut where the knob says, so a
    // test can put a chosen text, split at chosen places, into the answer.
    const echo = knobs.echoChars > 0 ? echoTokens(withoutMarkers(lastUserText(request.messages)).trim(), knobs.echoChars) : undefined;
    const wanted = echo?.length ?? knobs.tokens;
    emitted = Math.min(wanted, budget);
    finish = emitted < wanted ? "length" : "stop";
    tokens = echo ? echo.slice(0, emitted) : textTokens(seed, emitted, finish === "stop");
    const stops = request.stopSequences ?? [];
    const hit = stops.length > 0 ? applyStopSequences(tokens, stops) : undefined;
    if (hit !== undefined) {
      tokens = hit.tokens;
      emitted = hit.consumed;
      finish = "stop_sequence";
      stopSequence = hit.sequence;
    }
  }

  let usage: Completion["usage"];
  if (!omitUsage) {
    const promptTokens = countPromptTokens(request);
    usage = {
      promptTokens,
      completionTokens: emitted + reasoningTokens,
      cachedTokens: Math.min(knobs.cachedTokens, promptTokens),
      reasoningTokens,
    };
  }

  return {
    uid: uniqueId(),
    created: Math.floor(Date.now() / 1000),
    model: request.model,
    logprobs: request.logprobs === undefined || toolCall !== undefined ? undefined : tokenLogprobs(tokens, qualityFor(knobs.quality, request.model), request.logprobs),
    tokens,
    toolCall,
    finish,
    stopSequence,
    reasoningTokens,
    reasoning: request.reasoningText === true ? textTokens((seed ^ REASONING_SALT) >>> 0, reasoningTokens, true) : [],
    usage,
  };
}
