import { z } from "zod";
import { GatewayError } from "../errors/gateway-error.ts";
import { inputSchemaSchema } from "./input-schema.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import { credentialHeader } from "../egress/credential-header.ts";

/**
 * Tools defined in configuration from an HTTP API (a "REST tool"): the caller sees an MCP tool
 * with an input schema; a call becomes one HTTP request built from a template. The host is fixed by
 * the definition, arguments only ever fill path segments, query values and the JSON body, and the
 * credential comes from a secret by name. Kong's MCP tooling once let a path parameter walk out of
 * its route (`../`): here a path argument is one encoded segment and never a dot segment, and the
 * built URL is checked to stay under the definition's base.
 */

const placeholder = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g;
const wholePlaceholder = /^\{([A-Za-z_][A-Za-z0-9_]*)\}$/;

/** One REST tool as configuration declares it (its server's `rest.tools[]`). */
export const restToolSchema = z
  .strictObject({
    /** The tool's name on its server (`<server>.<name>` on the virtual server). */
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "letters, digits, '_' and '-', at most 64"),
    description: z.string().max(2000).optional(),
    /** JSON Schema of the arguments (the subset in input-schema.ts), shown to clients and checked on every call. */
    inputSchema: inputSchemaSchema,
    method: z.enum(["GET", "POST", "PUT", "PATCH", "DELETE"]),
    /** Appended to the server's base URL; `{arg}` placeholders fill whole path segments. */
    path: z.string().regex(/^(?:\/(?:\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z0-9._~!$&'()*+,;=:@-]+))*\/?$/, "a path of segments; {arg} placeholders fill whole segments").default(""),
    /** Query parameters; a value is a literal or exactly one `{arg}` placeholder (omitted when the argument is). */
    query: z.record(z.string().regex(/^[A-Za-z0-9_.-]+$/), z.string()).default({}),
    /** `arguments`: the arguments not used in the path or query, as the JSON body. */
    body: z.enum(["none", "arguments"]).default("none"),
    response: z
      .strictObject({
        /** Fields kept from a JSON answer (`a.b` reaches into objects); all when empty. */
        fields: z.array(z.string().regex(/^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*$/)).default([]),
        maxBytes: z.number().int().min(1024).max(4 * 1024 * 1024).default(256 * 1024),
      })
      .prefault({}),
  })
  .superRefine((tool, ctx) => {
    // Every placeholder names a declared argument, and a path's are required: the schema check
    // then guarantees the URL can be built, and clients see every argument the request uses.
    // fetch refuses a GET with a body: refused here, not on the first call.
    if (tool.method === "GET" && tool.body === "arguments") ctx.addIssue({ code: "custom", path: ["body"], message: "a GET request has no body" });
    const properties = tool.inputSchema.properties ?? {};
    const required = new Set(tool.inputSchema.required ?? []);
    for (const m of tool.path.matchAll(placeholder)) {
      if (!Object.hasOwn(properties, m[1]!)) ctx.addIssue({ code: "custom", path: ["path"], message: `{${m[1]}} is not a property of the inputSchema` });
      else if (!required.has(m[1]!)) ctx.addIssue({ code: "custom", path: ["path"], message: `{${m[1]}} fills a path segment: list it in the inputSchema's required` });
    }
    for (const [key, value] of Object.entries(tool.query)) {
      const m = wholePlaceholder.exec(value);
      if (m ? !Object.hasOwn(properties, m[1]!) : /[{}]/.test(value)) ctx.addIssue({ code: "custom", path: ["query", key], message: m ? `{${m[1]}} is not a property of the inputSchema` : "a literal, or exactly one {arg} placeholder" });
    }
  });

export type RestToolConfig = z.infer<typeof restToolSchema>;

/** Where a REST server's requests go, and the credential they carry (the server entry's `url` and `credential`). */
export interface RestTarget {
  /** Scheme, host and base path: never from arguments. Checked by the egress guard at load. */
  readonly baseUrl: string;
  readonly credential?: { readonly secret: string; readonly scheme: "bearer" | "x-api-key" } | undefined;
}

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
export function buildRestRequest(target: RestTarget, tool: RestToolConfig, args: unknown, secret: (name: string) => string | undefined): RestRequest {
  if (args !== undefined && (args === null || typeof args !== "object" || Array.isArray(args))) throw new GatewayError("invalid_request", "The tool's arguments must be an object.", { param: "params.arguments" });
  const a = (args ?? {}) as Record<string, unknown>;
  const used = new Set<string>();
  const baseUrl = target.baseUrl.replace(/\/+$/, "");
  const path = tool.path.replace(placeholder, (_m, name: string) => {
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
  const url = new URL(`${baseUrl}${path}`);
  for (const [key, template] of Object.entries(tool.query)) {
    const m = wholePlaceholder.exec(template);
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
  const base = new URL(baseUrl);
  const basePath = base.pathname.replace(/\/+$/, "");
  if (url.origin !== base.origin || !(url.pathname === basePath || url.pathname.startsWith(`${basePath}/`) || basePath === "")) {
    throw new GatewayError("invalid_request", "The tool's arguments would leave its base URL.", { param: "params.arguments" });
  }
  let headers: Record<string, string> = { accept: "application/json", "user-agent": "sluice" };
  if (target.credential) {
    const value = secret(target.credential.secret);
    if (!value) throw new GatewayError("internal_error", "The gateway is missing a tool credential.", { cause: `secret ${target.credential.secret} is not set` });
    headers = { ...headers, ...credentialHeader(target.credential.scheme, value) };
  }
  let body: string | undefined;
  if (tool.body === "arguments") {
    body = JSON.stringify(Object.fromEntries(Object.entries(a).filter(([k]) => !used.has(k))));
    headers["content-type"] = "application/json";
  }
  return { method: tool.method, url: url.toString(), headers, body };
}

/**
 * A JSON answer cut to the configured fields (dotted paths); an array's elements each cut so; the
 * whole answer when no fields are listed. Only own properties are read and written, so a field
 * named `__proto__` or `constructor` reaches nothing but the answer's own data.
 */
export function trimResponse(value: unknown, fields: readonly string[]): unknown {
  if (fields.length === 0) return value;
  if (Array.isArray(value)) return value.map((v) => trimResponse(v, fields));
  const out: Record<string, unknown> = {};
  for (const field of fields) {
    const path = field.split(".");
    let v: unknown = value;
    for (const p of path) v = isRecord(v) && Object.hasOwn(v, p) ? v[p] : undefined;
    if (v === undefined) continue;
    let target = out;
    for (const p of path.slice(0, -1)) {
      if (!Object.hasOwn(target, p) || !isRecord(target[p])) define(target, p, {});
      target = target[p] as Record<string, unknown>;
    }
    define(target, path.at(-1)!, v);
  }
  return out;
}

const define = (o: Record<string, unknown>, key: string, value: unknown) => Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });

/** A server entry's `rest`: the tools it serves from its HTTP API. */
export const restServerSchema = z.strictObject({
  tools: z
    .array(restToolSchema)
    .min(1)
    .superRefine((tools, ctx) => {
      const seen = new Set<string>();
      tools.forEach((t, i) => {
        if (seen.has(t.name)) ctx.addIssue({ code: "custom", path: [i, "name"], message: `duplicate tool "${t.name}"` });
        seen.add(t.name);
      });
    }),
});

export type RestServerConfig = z.infer<typeof restServerSchema>;
