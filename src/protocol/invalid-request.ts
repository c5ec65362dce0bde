import type { z } from "zod";
import { formatPath } from "../errors/issue-path.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import { echo } from "../errors/echo.ts";

/**
 * Backstop for issue messages: the schemas quote client values through `echo`, and this bounds
 * anything that still carries one (a message is a sentence, never kilobytes).
 */
const ISSUE_MESSAGE_CHARS = 400;

/**
 * Turns the first zod issue of a request body into a client error that names the parameter, the
 * way the providers' own APIs do. Shared by every codec's request decoder, which must parse with
 * `{ reportInput: true }` so a missing parameter can be told from a present one of the wrong type.
 */
export function invalidRequestFromZod(error: z.ZodError): GatewayError {
  const issue = error.issues[0];
  if (!issue) return new GatewayError("invalid_request", "The request body is invalid.");
  if (issue.code === "unrecognized_keys") {
    const key = issue.keys[0] ?? "";
    // Keys are the client's text: a megabyte key must not make a megabyte error.
    const param = echo(formatPath([...issue.path, key]));
    return new GatewayError("invalid_request", `Unrecognized request argument supplied: ${param}`, { param });
  }
  const param = echo(formatPath(issue.path));
  // A union of shapes (a string or a list, say) reports a missing value as matching none of them.
  if ((issue.code === "invalid_type" || issue.code === "invalid_union") && issue.input === undefined) {
    return new GatewayError("invalid_request", `Missing required parameter: '${param}'.`, { param });
  }
  return new GatewayError("invalid_request", `Invalid value for '${param || "body"}': ${echo(issue.message, ISSUE_MESSAGE_CHARS)}`, {
    param: param || undefined,
  });
}

/** A client error naming the message at `index`: how an encoder refuses what the backend cannot carry. */
export function invalidMessage(index: number, why: string): GatewayError {
  return new GatewayError("invalid_request", `Invalid value for 'messages[${index}]': ${why}`, { param: `messages[${index}]` });
}

/**
 * A tool call's arguments as the JSON object Anthropic, Converse and Gemini require (`{}` when
 * empty). Anything else is refused naming the message and the call; `requiredBy` says who needs
 * the object ("Anthropic", "this model's backend").
 */
export function toolArgumentsObject(call: { readonly id: string; readonly arguments: string }, index: number, requiredBy: string): Record<string, unknown> {
  if (call.arguments.trim() === "") return {};
  let value: unknown;
  try {
    value = JSON.parse(call.arguments);
  } catch {
    value = undefined;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw invalidMessage(index, `the arguments of tool call '${echo(call.id)}' are not a JSON object, which ${requiredBy} requires.`);
  }
  return value as Record<string, unknown>;
}
