import { everyItem, isRecord } from "../fast-guard.ts";
import { REASONING_EFFORTS } from "../neutral.ts";
import { chatRequestSchema, type ChatRequestBody } from "./request-schema.ts";

/**
 * A hand-written check in front of `chatRequestSchema` for the common request: zod on every
 * request body was part of zod's measured share of the isolate's time (the rule every guard keeps
 * is in fast-guard.ts). It covers a conservative subset only — the keys below with their simple
 * types, and messages of every role with plain string content and no tool calls. Anything else
 * (another key, array content, tools, response_format, metadata, ...) goes to zod, which stays the
 * authority on errors.
 */

const nullish = (v: unknown): v is null | undefined => v === undefined || v === null;

/** `z.number().min(lo).max(hi)`: zod's numbers are finite. */
const inRange = (v: unknown, lo: number, hi: number): boolean => Number.isFinite(v) && (v as number) >= lo && (v as number) <= hi;

/** Each value's check is its schema's, `.nullable().optional()` included where the schema has it. */
const TOP_LEVEL: ReadonlyMap<string, (v: unknown) => boolean> = new Map<string, (v: unknown) => boolean>([
  ["model", (v) => typeof v === "string" && v.length >= 1],
  ["messages", (v) => Array.isArray(v) && v.length >= 1 && everyItem(v, isSimpleMessage)],
  ["stream", (v) => nullish(v) || typeof v === "boolean"],
  ["stream_options", (v) => nullish(v) || isStreamOptions(v)],
  ["max_tokens", (v) => nullish(v) || (Number.isSafeInteger(v) && (v as number) >= 1)],
  ["max_completion_tokens", (v) => nullish(v) || (Number.isSafeInteger(v) && (v as number) >= 1)],
  ["temperature", (v) => nullish(v) || inRange(v, 0, 2)],
  ["top_p", (v) => nullish(v) || inRange(v, 0, 1)],
  ["presence_penalty", (v) => nullish(v) || inRange(v, -2, 2)],
  ["frequency_penalty", (v) => nullish(v) || inRange(v, -2, 2)],
  ["seed", (v) => nullish(v) || Number.isSafeInteger(v)],
  ["stop", (v) => nullish(v) || typeof v === "string" || (Array.isArray(v) && v.length <= 4 && everyItem(v, (s) => typeof s === "string"))],
  ["reasoning_effort", (v) => nullish(v) || (REASONING_EFFORTS as readonly unknown[]).includes(v)],
  // Not nullable in the schema.
  ["user", (v) => v === undefined || typeof v === "string"],
  ["n", (v) => nullish(v) || v === 1],
  ["logprobs", (v) => nullish(v) || v === false],
  ["store", (v) => nullish(v) || v === false],
]);

/**
 * The schema's other keys. zod reads every key of its shape, enumerable or not, so the guard
 * requires these to read as `undefined` (absent) rather than trusting `for...in` alone.
 */
const OTHER_KEYS: readonly string[] = Object.keys(chatRequestSchema.shape).filter((k) => !TOP_LEVEL.has(k));

function isStreamOptions(v: unknown): boolean {
  if (!isRecord(v)) return false;
  for (const k in v) {
    if (k !== "include_usage" && k !== "include_obfuscation") return false;
  }
  const optBoolean = (b: unknown) => b === undefined || typeof b === "boolean";
  return optBoolean(v.include_usage) && optBoolean(v.include_obfuscation);
}

/**
 * A message of any role with string content, as its strict schema accepts it. An assistant
 * message must have string content here (no tool calls, no null content), so zod handles every
 * assistant message the decoder could refuse.
 */
function isSimpleMessage(m: unknown): boolean {
  if (!isRecord(m) || typeof m.content !== "string") return false;
  switch (m.role) {
    case "system":
    case "developer":
    case "user":
      for (const k in m) {
        if (k !== "role" && k !== "content" && k !== "name") return false;
      }
      return m.name === undefined || typeof m.name === "string";
    case "assistant":
      for (const k in m) {
        if (k !== "role" && k !== "content" && k !== "name") return false;
      }
      return (m.name === undefined || typeof m.name === "string") && m.tool_calls === undefined && m.refusal === undefined;
    case "tool":
      for (const k in m) {
        if (k !== "role" && k !== "content" && k !== "tool_call_id") return false;
      }
      return typeof m.tool_call_id === "string" && m.tool_call_id.length >= 1;
    default:
      return false;
  }
}

/**
 * The body, typed, when `chatRequestSchema` accepts it and it is in the subset above; `undefined`
 * otherwise (zod then decides). The schema has no defaults or transforms, so the body itself is
 * what zod would have returned.
 */
export function fastChatRequest(body: unknown): ChatRequestBody | undefined {
  if (!isRecord(body)) return undefined;
  for (const k in body) {
    if (!TOP_LEVEL.has(k)) return undefined;
  }
  for (const [k, check] of TOP_LEVEL) {
    if (!check(body[k])) return undefined;
  }
  for (let i = 0; i < OTHER_KEYS.length; i++) {
    if (body[OTHER_KEYS[i]!] !== undefined) return undefined;
  }
  return body as ChatRequestBody;
}
