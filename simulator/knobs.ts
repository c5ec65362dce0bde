/**
 * Knobs: the per-request and instance-wide controls of timing, size and faults.
 *
 * Three layers, later wins: instance defaults (CLI flags, `startSimulator({ knobs })`,
 * `PUT /__sim/config`), then `[[sim key=value]]` directives in the last user message,
 * then `x-sim-<knob>` headers. Directives exist because a gateway that translates
 * protocols or strips unknown headers still forwards message text.
 */

import type { IncomingHttpHeaders } from "node:http";
import type { SimError } from "./wire-format.ts";

/** Faults the simulator can inject. */
export const FAULTS = ["reset-before-headers", "cut-mid-stream", "error-mid-stream", "omit-usage", "heartbeat-only"] as const;

/** A fault name. */
export type Fault = (typeof FAULTS)[number];

/** Every knob name, as written in headers (`x-sim-<name>`), directives, flags and config. */
export const KNOB_NAMES = [
  "latency-ms",
  "ttft-ms",
  "token-interval-ms",
  "tokens",
  "status",
  "retry-after",
  "retry-after-ms",
  "token-expires-in",
  "fault",
  "cut-after",
  "cut-bytes",
  "heartbeat-ms",
  "duration-ms",
  "cached-tokens",
  "reasoning-tokens",
  "tool",
  "times",
  "key",
  "only-model",
  "only-path",
  "echo-chars",
  "quality",
] as const;

/** A knob name. */
export type KnobName = (typeof KNOB_NAMES)[number];

/** Knob values as a caller writes them (config JSON, `startSimulator` options). */
export type KnobSettings = { readonly [K in KnobName]?: string | number };

/** Resolved knobs for one request. */
export interface Knobs {
  readonly latencyMs: number;
  readonly ttftMs: number;
  readonly tokenIntervalMs: number;
  readonly tokens: number;
  /** HTTP status of a simulated error, or `undefined` for none. */
  readonly status: number | undefined;
  /** `retry-after` seconds; `undefined` means 1 on 429/503 and no header otherwise. */
  readonly retryAfter: number | undefined;
  /**
   * `retry-after-ms` milliseconds sent with a simulated error (as Azure OpenAI and OpenAI do), and
   * `retry-after` rounded up from it unless that knob is set; `undefined` sends no such header.
   */
  readonly retryAfterMs: number | undefined;
  /** `expires_in` seconds of the access tokens the fake Entra token endpoint issues. */
  readonly tokenExpiresIn: number;
  readonly fault: Fault | undefined;
  readonly cutAfter: number;
  /** `cut-mid-stream`: bytes of the next frame sent before the cut (never all of it); 0 cuts between frames. */
  readonly cutBytes: number;
  readonly heartbeatMs: number;
  readonly durationMs: number;
  readonly cachedTokens: number;
  readonly reasoningTokens: number;
  readonly tool: string | undefined;
  /** Status/fault only for the first N requests sharing `key`; `undefined` means always. */
  readonly times: number | undefined;
  readonly key: string | undefined;
  /** Status/fault only when the request names this model. */
  readonly onlyModel: string | undefined;
  /** Timing, status and fault only for requests on this path (e.g. `/v1/embeddings`). */
  readonly onlyPath: string | undefined;
  /** Above 0: the answer repeats the last user message, in pieces of this many characters (one token each). */
  readonly echoChars: number;
  /**
   * How sure the model is of its answer, 0–1: the probability of each token it emits, shown as
   * log-probabilities when the request asks for them. `default` for every model, `byModel` per model.
   */
  readonly quality: Quality;
}

/** The `quality` knob: one probability for every model, and overrides per model (by the name requested). */
export interface Quality {
  readonly default: number;
  readonly byModel: Readonly<Record<string, number>>;
}

/** Each emitted token's probability for a request naming `model`. */
export function qualityFor(quality: Quality, model: string): number {
  return quality.byModel[model] ?? quality.default;
}

/** Each token's probability when the `quality` knob is not set: a fairly sure model. */
const BASE_KNOBS_QUALITY = 0.9;

/** Knob values with nothing overridden. */
export const BASE_KNOBS: Knobs = {
  latencyMs: 0,
  ttftMs: 0,
  tokenIntervalMs: 0,
  tokens: 12,
  status: undefined,
  retryAfter: undefined,
  retryAfterMs: undefined,
  tokenExpiresIn: 3599,
  fault: undefined,
  cutAfter: 3,
  cutBytes: 0,
  heartbeatMs: 1000,
  durationMs: 30_000,
  cachedTokens: 0,
  reasoningTokens: 0,
  tool: undefined,
  times: undefined,
  key: undefined,
  onlyModel: undefined,
  onlyPath: undefined,
  echoChars: 0,
  quality: { default: BASE_KNOBS_QUALITY, byModel: {} },
};

/** A knob name or value that cannot be used; reported as a 400. */
export class KnobError extends Error {
  override name = "KnobError";
}

/** The 400 a {@link KnobError} is answered with, in whichever envelope the endpoint uses. */
export function knobRejection(error: KnobError): SimError {
  return { status: 400, kind: "invalid_request", message: error.message, param: null, code: "invalid_sim_knob" };
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** Upper bound keeps a typo from scheduling a timer for weeks or generating gigabytes. */
const MAX_INT = 10_000_000;

function int(name: string, raw: string, min: number): number {
  if (!/^\d{1,8}$/.test(raw)) throw new KnobError(`knob '${name}' must be a non-negative integer, got '${raw}'`);
  const value = Number(raw);
  if (value < min || value > MAX_INT) throw new KnobError(`knob '${name}' must be between ${min} and ${MAX_INT}, got ${raw}`);
  return value;
}

function probability(name: string, raw: string): number {
  if (!/^(0(\.\d{1,6})?|1(\.0{1,6})?)$/.test(raw)) throw new KnobError(`knob '${name}' must be a probability between 0 and 1, got '${raw}'`);
  return Number(raw);
}

/** `0.4` (every model) or `model-a:0.2,model-b:0.95` (per model; a bare number among them sets the rest). */
function quality(name: string, raw: string): Quality {
  let fallback = BASE_KNOBS_QUALITY;
  const byModel: Record<string, number> = {};
  for (const part of raw.split(",")) {
    const at = part.lastIndexOf(":");
    if (at < 0) fallback = probability(name, part);
    else {
      const model = part.slice(0, at);
      if (model === "" || /\s/.test(model)) throw new KnobError(`knob '${name}' names no model in '${part}'`);
      byModel[model] = probability(name, part.slice(at + 1));
    }
  }
  return { default: fallback, byModel };
}


function word(name: string, raw: string): string {
  if (raw === "" || /\s/.test(raw)) throw new KnobError(`knob '${name}' must be a non-empty word, got '${raw}'`);
  return raw;
}

/** Sets one knob from its textual value; `none` clears `status` and `fault`. */
function applyKnob(target: Mutable<Partial<Knobs>>, name: string, raw: string): void {
  switch (name) {
    case "latency-ms":
      target.latencyMs = int(name, raw, 0);
      return;
    case "ttft-ms":
      target.ttftMs = int(name, raw, 0);
      return;
    case "token-interval-ms":
      target.tokenIntervalMs = int(name, raw, 0);
      return;
    case "tokens":
      target.tokens = int(name, raw, 0);
      return;
    case "status":
      if (raw === "none") target.status = undefined;
      else {
        const status = int(name, raw, 0);
        if (status < 400 || status > 599) throw new KnobError(`knob 'status' must be a 4xx or 5xx code, got ${raw}`);
        target.status = status;
      }
      return;
    case "retry-after":
      target.retryAfter = int(name, raw, 0);
      return;
    case "retry-after-ms":
      target.retryAfterMs = int(name, raw, 0);
      return;
    case "token-expires-in":
      target.tokenExpiresIn = int(name, raw, 1);
      return;
    case "fault":
      if (raw === "none") target.fault = undefined;
      else if ((FAULTS as readonly string[]).includes(raw)) target.fault = raw as Fault;
      else throw new KnobError(`knob 'fault' must be one of ${FAULTS.join(", ")} or none, got '${raw}'`);
      return;
    case "cut-after":
      target.cutAfter = int(name, raw, 0);
      return;
    case "cut-bytes":
      target.cutBytes = int(name, raw, 0);
      return;
    case "heartbeat-ms":
      target.heartbeatMs = int(name, raw, 1);
      return;
    case "duration-ms":
      target.durationMs = int(name, raw, 0);
      return;
    case "cached-tokens":
      target.cachedTokens = int(name, raw, 0);
      return;
    case "reasoning-tokens":
      target.reasoningTokens = int(name, raw, 0);
      return;
    case "tool":
      target.tool = word(name, raw);
      return;
    case "times":
      target.times = int(name, raw, 0);
      return;
    case "echo-chars":
      target.echoChars = int(name, raw, 0);
      return;
    case "quality":
      target.quality = quality(name, raw);
      return;
    case "key":
      target.key = word(name, raw);
      return;
    case "only-model":
      target.onlyModel = word(name, raw);
      return;
    case "only-path":
      if (!raw.startsWith("/")) throw new KnobError(`knob 'only-path' must be a path starting with '/', got '${raw}'`);
      target.onlyPath = word(name, raw);
      return;
    default:
      throw new KnobError(`unknown simulator knob '${name}'; known: ${KNOB_NAMES.join(", ")}`);
  }
}

/** `latencyMs` → `latency-ms`, so config JSON may use either spelling. */
function kebab(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/**
 * Resolves knob settings (config JSON or options) over a base; throws {@link KnobError}.
 * Accepts kebab-case and camelCase names.
 */
export function resolveSettings(base: Knobs, settings: Readonly<Record<string, unknown>>): Knobs {
  const out: Mutable<Partial<Knobs>> = {};
  for (const [name, value] of Object.entries(settings)) {
    if (typeof value !== "string" && typeof value !== "number") {
      throw new KnobError(`knob '${name}' must be a string or a number`);
    }
    applyKnob(out, kebab(name), String(value));
  }
  return { ...base, ...out };
}

const DIRECTIVE = /\[\[sim\b([^\]]*)\]\]/g;

/**
 * Knob overrides from `[[sim k=v k=v]]` directives in `text` (all of them, in order)
 * and `x-sim-*` headers, applied over `base`. Returns `base` itself when there are none,
 * which keeps the common path allocation-free.
 */
export function resolveRequestKnobs(base: Knobs, text: string, headers: IncomingHttpHeaders): Knobs {
  let out: Mutable<Partial<Knobs>> | undefined;
  if (text.includes("[[sim")) {
    out = {};
    for (const match of text.matchAll(DIRECTIVE)) {
      for (const pair of (match[1] ?? "").trim().split(/\s+/)) {
        if (pair === "") continue;
        const eq = pair.indexOf("=");
        if (eq <= 0) throw new KnobError(`directive item '${pair}' is not key=value`);
        applyKnob(out, pair.slice(0, eq), pair.slice(eq + 1));
      }
    }
  }
  for (const name in headers) {
    if (!name.startsWith("x-sim-")) continue;
    const value = headers[name];
    out ??= {};
    applyKnob(out, name.slice(6), (Array.isArray(value) ? value.join(",") : (value ?? "")).trim());
  }
  return out === undefined ? base : { ...base, ...out };
}

/** Resolved knobs as config JSON (kebab-case names, unset values left out). */
export function knobsToSettings(knobs: Knobs): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (const [field, value] of Object.entries(knobs)) {
    if (value !== undefined) out[kebab(field)] = value as string | number;
  }
  return out;
}

/**
 * The knobs as they apply on `path`: under `only-path` naming another path, the timing and
 * fault knobs are off, so one endpoint can be made slow or down while the others answer.
 */
export function knobsForPath(knobs: Knobs, path: string): Knobs {
  if (knobs.onlyPath === undefined || knobs.onlyPath === path) return knobs;
  return { ...knobs, latencyMs: 0, ttftMs: 0, tokenIntervalMs: 0, status: undefined, fault: undefined };
}
