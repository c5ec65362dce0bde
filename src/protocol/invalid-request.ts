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
