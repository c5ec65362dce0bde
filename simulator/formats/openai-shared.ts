/**
 * What OpenAI's two generation APIs (Chat Completions and Responses) share: the error
 * envelope and its types, the malformed-JSON and API-key messages, and the validation
 * helpers that phrase errors the way OpenAI does.
 */

import type { ErrorKind, ParseResult, Rejected, SimError } from "../wire-format.ts";

export type Json = Readonly<Record<string, unknown>>;

/** OpenAI has no overloaded type; its 503s say `server_error`. */
const ERROR_TYPES: Record<ErrorKind, string> = {
  invalid_request: "invalid_request_error",
  authentication: "invalid_request_error",
  billing: "invalid_request_error",
  permission: "permission_error",
  not_found: "invalid_request_error",
  too_large: "invalid_request_error",
  rate_limit: "rate_limit_error",
  server: "server_error",
  timeout: "server_error",
  overloaded: "server_error",
};

/** The `type` OpenAI puts in an error of this kind. */
export function openaiErrorType(kind: ErrorKind): string {
  return ERROR_TYPES[kind];
}

export function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

export function invalid(message: string, param: string | null, code: string | null): Rejected {
  return { ok: false, error: { status: 400, kind: "invalid_request", message, param, code } };
}

/** What OpenAI answers when `model` is missing or empty, on Chat and the endpoints beside it. */
export function modelRequired(): Rejected {
  return invalid("you must provide a model parameter", null, null);
}

export function missing(param: string): Rejected {
  return invalid(`Missing required parameter: '${param}'.`, param, "missing_required_parameter");
}

export function wrongType(param: string, expected: string, value: unknown): Rejected {
  return invalid(`Invalid type for '${param}': expected ${expected}, but got ${typeName(value)} instead.`, param, "invalid_type");
}

/** `Invalid value: 'x'. Supported values are: 'a', 'b', and 'c'.` */
export function invalidValue(param: string, value: unknown, supported: readonly string[]): Rejected {
  const quoted = supported.map((v) => `'${v}'`);
  const list = quoted.length > 1 ? `${quoted.slice(0, -1).join(", ")}, and ${quoted.at(-1) ?? ""}` : (quoted[0] ?? "");
  return invalid(`Invalid value: '${String(value)}'. Supported values are: ${list}.`, param, "invalid_value");
}

/** An integer parameter with a lower bound, or absent/null. */
export function parseInteger(body: Json, param: string, min: number): number | undefined | Rejected {
  const value = body[param];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value)) return wrongType(param, "an integer", value);
  if (value < min) {
    return invalid(
      `Invalid '${param}': integer below minimum value. Expected a value >= ${min}, but got ${value} instead.`,
      param,
      "integer_below_min_value",
    );
  }
  return value;
}

/** Distinguishes a parse failure from a parsed value in the helpers' `T | ParseResult` returns. */
export function isResult<T>(value: T | ParseResult): value is ParseResult {
  return isObject(value) && typeof (value as { ok?: unknown }).ok === "boolean";
}

export function renderError(error: SimError): string {
  return JSON.stringify({
    error: { message: error.message, type: ERROR_TYPES[error.kind], param: error.param, code: error.code },
  });
}

export function malformedJson(): SimError {
  return {
    status: 400,
    kind: "invalid_request",
    message:
      "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. " +
      "The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)",
    param: null,
    code: null,
  };
}

export function authError(given: string | undefined): SimError {
  const message =
    given === undefined
      ? "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
      : `Incorrect API key provided: ${given.length > 8 ? `${given.slice(0, 3)}***${given.slice(-4)}` : "***"}.`;
  return { status: 401, kind: "authentication", message, param: null, code: given === undefined ? null : "invalid_api_key" };
}

/** Text and media count of a content parts array; `undefined` when a part is not an object. */
export function flattenParts(parts: readonly unknown[]): { text: string; media: number } | undefined {
  let text = "";
  let media = 0;
  for (const part of parts) {
    if (!isObject(part)) return undefined;
    if (typeof part["text"] === "string") text += part["text"];
    else if (typeof part["refusal"] === "string") text += part["refusal"];
    else media++;
  }
  return { text, media };
}
