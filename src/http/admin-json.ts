import { parseDocument } from "yaml";
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
  return parseAdminJson(text, schema);
}

/** A small optional JSON body (a rollback's, a revocation's): `empty` when there is none, else as {@link readAdminJson}. */
export async function readOptionalAdminJson<T>(request: Request, schema: z.ZodType<T>, empty: T, maxBodyBytes = 4096): Promise<T> {
  const text = await readBodyText(request, { maxBodyBytes, maxHeaderBytes: 0, maxHeaderCount: 0, maxJsonDepth: 0 });
  return text.trim() === "" ? empty : parseAdminJson(text, schema);
}

function parseAdminJson<T>(text: string, schema: z.ZodType<T>): T {
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

/** A candidate document (a snapshot, a publication) as JSON, or as YAML (the shape of its config file). */
export async function readAdminDocument(request: Request, maxBodyBytes: number): Promise<unknown> {
  const text = await readBodyText(request, { maxBodyBytes, maxHeaderBytes: 0, maxHeaderCount: 0, maxJsonDepth: 0 });
  const type = request.headers.get("content-type") ?? "";
  if (/^application\/json\s*(;|$)/i.test(type)) {
    try {
      return JSON.parse(text);
    } catch {
      throw new GatewayError("invalid_json", "The candidate is not valid JSON.");
    }
  }
  if (/^(application|text)\/(x-)?yaml\s*(;|$)/i.test(type)) {
    const doc = parseDocument(text, { uniqueKeys: true });
    if (doc.errors.length > 0) {
      throw new GatewayError("invalid_request", `The candidate is not valid YAML: ${echo(doc.errors[0]?.message.split("\n")[0] ?? "", 200)}`);
    }
    return doc.toJS();
  }
  throw new GatewayError("unsupported_media_type", "Send the candidate as application/json or application/yaml.");
}
