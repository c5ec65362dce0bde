import { z } from "zod";
import { GatewayError } from "../errors/gateway-error.ts";

/**
 * Tools defined in configuration from an HTTP API (a "REST tool"): the caller sees an MCP tool
 * with an input schema; a call becomes one HTTP request built from a template. The host is fixed by
 * the definition, arguments only ever fill path segments, query values and the JSON body, and the
 * credential comes from a secret by name. Kong's MCP tooling once let a path parameter walk out of
 * its route (`../`): here a path argument is one encoded segment and never a dot segment, and the
 * built URL is checked to stay under the definition's base.
 */

const placeholder = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** One REST tool as configuration declares it. */
export const restToolSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "letters, digits, '_' and '-', at most 64"),
  description: z.string().max(2000).optional(),
  /** JSON Schema of the arguments, shown to clients as the tool's `inputSchema`. */
  inputSchema: z.record(z.string(), z.unknown()).default({ type: "object" }),
  request: z.strictObject({
    method: z.enum(["GET", "POST", "PUT", "PATCH", "DELETE"]),
    /** Scheme, host and base path: never from arguments. Checked by the egress guard at load. */
    baseUrl: z.url({ protocol: /^https?$/ }).transform((u) => u.replace(/\/+$/, "")),
    /** Appended to `baseUrl`; `{arg}` placeholders fill whole path segments. */
    path: z.string().regex(/^(?:\/(?:\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z0-9._~!$&'()*+,;=:@-]+))*\/?$/, "a path of segments; {arg} placeholders fill whole segments").default(""),
    /** Query parameters; a value is a literal or exactly one `{arg}` placeholder (omitted when the argument is). */
    query: z.record(z.string().regex(/^[A-Za-z0-9_.-]+$/), z.string()).default({}),
    /** `arguments`: the arguments not used in the path or query, as the JSON body. */
    body: z.enum(["none", "arguments"]).default("none"),
    credential: z.strictObject({ secret: z.string().regex(/^[A-Z_][A-Z0-9_]*$/), scheme: z.enum(["bearer", "x-api-key"]) }).optional(),
    /** Static headers (never secrets: use `credential`). */
    headers: z.record(z.string().regex(/^[a-z0-9-]+$/), z.string()).default({}),
  }),
  response: z
    .strictObject({
      /** Fields kept from a JSON answer (`a.b` reaches into objects); all when empty. */
      fields: z.array(z.string().regex(/^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*$/)).default([]),
      maxBytes: z.number().int().min(1024).max(4 * 1024 * 1024).default(256 * 1024),
    })
    .prefault({}),
});

export type RestToolConfig = z.infer<typeof restToolSchema>;

/** The HTTP request a call becomes. */
export interface RestRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string | undefined;
}

const scalar = (v: unknown): v is string | number | boolean => typeof v === "string" || (typeof v === "number" && Number.isFinite(v)) || typeof v === "boolean";

/**
 * Builds the request for a call. Refused (as the caller's `invalid_request`): arguments that are
 * not an object, a path argument missing, not a scalar, empty, `.` or `..`; a query argument that
 * is not a scalar. A credential whose secret is unset is the gateway's `internal_error`.
 */
export function buildRestRequest(tool: RestToolConfig, args: unknown, secret: (name: string) => string | undefined): RestRequest {
  if (args !== undefined && (args === null || typeof args !== "object" || Array.isArray(args))) throw new GatewayError("invalid_request", "The tool's arguments must be an object.", { param: "params.arguments" });
  const a = (args ?? {}) as Record<string, unknown>;
  const used = new Set<string>();
  const path = tool.request.path.replace(placeholder, (_m, name: string) => {
    const v = a[name];
    if (!scalar(v)) throw new GatewayError("invalid_request", `Argument '${name}' is required and must be a string, number or boolean.`, { param: `params.arguments.${name}` });
    const text = String(v);
    // One whole segment, never a dot segment (URL parsing would resolve it and leave the route),
    // and no slash or backslash even encoded: a provider that decodes %2F before routing would
    // see a traversal the gateway never built.
    if (text === "" || text === "." || text === ".." || /[/\\]/.test(text)) throw new GatewayError("invalid_request", `Argument '${name}' is not a valid path segment.`, { param: `params.arguments.${name}` });
    used.add(name);
    return encodeURIComponent(text);
  });
  const url = new URL(`${tool.request.baseUrl}${path}`);
  for (const [key, template] of Object.entries(tool.request.query)) {
    const m = /^\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(template);
    if (!m) {
      url.searchParams.append(key, template);
      continue;
    }
    const v = a[m[1]!];
    used.add(m[1]!);
    if (v === undefined || v === null) continue;
    if (!scalar(v)) throw new GatewayError("invalid_request", `Argument '${m[1]}' must be a string, number or boolean.`, { param: `params.arguments.${m[1]}` });
    url.searchParams.append(key, String(v));
  }
  const base = new URL(tool.request.baseUrl);
  const basePath = base.pathname.replace(/\/+$/, "");
  if (url.origin !== base.origin || !(url.pathname === basePath || url.pathname.startsWith(`${basePath}/`) || basePath === "")) {
    throw new GatewayError("invalid_request", "The tool's arguments would leave its base URL.", { param: "params.arguments" });
  }
  const headers: Record<string, string> = { ...tool.request.headers, accept: "application/json", "user-agent": "sluice" };
  if (tool.request.credential) {
    const value = secret(tool.request.credential.secret);
    if (!value) throw new GatewayError("internal_error", "The gateway is missing a tool credential.", { cause: `secret ${tool.request.credential.secret} is not set` });
    if (tool.request.credential.scheme === "bearer") headers.authorization = `Bearer ${value}`;
    else headers["x-api-key"] = value;
  }
  let body: string | undefined;
  if (tool.request.body === "arguments") {
    body = JSON.stringify(Object.fromEntries(Object.entries(a).filter(([k]) => !used.has(k))));
    headers["content-type"] = "application/json";
  }
  return { method: tool.request.method, url: url.toString(), headers, body };
}

/** A JSON answer cut to the configured fields (dotted paths); the whole answer when none are listed. */
export function trimResponse(value: unknown, fields: readonly string[]): unknown {
  if (fields.length === 0) return value;
  const out: Record<string, unknown> = {};
  for (const field of fields) {
    const path = field.split(".");
    let v: unknown = value;
    for (const p of path) v = v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>)[p] : undefined;
    if (v === undefined) continue;
    let target = out;
    for (const p of path.slice(0, -1)) target = (target[p] ??= {}) as Record<string, unknown>;
    target[path.at(-1)!] = v;
  }
  return out;
}
