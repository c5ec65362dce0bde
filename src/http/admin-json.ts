import type { z } from "zod";
import { echo } from "../errors/echo.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import { jsonDepth, readBodyText } from "./limits.ts";

/**
 * An admin API request's JSON body, bounded and parsed by `schema`: invalid JSON is
 * `invalid_json`, a body the schema refuses is `invalid_request` naming the first field at fault.
 */
export async function readAdminJson<T>(request: Request, schema: z.ZodType<T>, maxBodyBytes = 16 * 1024, maxJsonDepth?: number): Promise<T> {
  const text = await readBodyText(request, { maxBodyBytes, maxHeaderBytes: 0, maxHeaderCount: 0, maxJsonDepth: 0 });
  // A body that carries a client's request is bounded as the generation endpoints bound theirs.
  if (maxJsonDepth !== undefined && jsonDepth(text) > maxJsonDepth) throw new GatewayError("json_too_deep", `The request nests deeper than ${maxJsonDepth - 1} levels.`);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new GatewayError("invalid_json", "The body is not valid JSON.");
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const path = echo(issue.path.join("."));
    throw new GatewayError("invalid_request", `${path === "" ? "body" : `'${path}'`}: ${issue.message}`, { param: path === "" ? undefined : path });
  }
  return parsed.data;
}
