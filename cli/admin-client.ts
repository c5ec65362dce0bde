import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { failure, usageError } from "./cli-error.ts";
import { localUrl } from "./address.ts";

/** The file the admin listener is read from when no URL is given (CONFIG_FILES.gateway, without loading the config code). */
const GATEWAY_FILE = "gateway.yaml";

/** The environment variable the admin commands read the bearer token from. */
export const ADMIN_TOKEN_ENV = "SLUICE_ADMIN_TOKEN";

/** How the admin commands reach the admin API. */
export interface AdminTarget {
  readonly baseUrl: string;
  readonly token: string;
}

/**
 * `--admin URL`, else `$SLUICE_ADMIN_URL`, else listeners.admin of gateway.yaml in `--config DIR`
 * (default `./config`). The token comes only from the environment, never from a flag: a flag
 * would put it in the shell history and the process list. The config's schema code is loaded only
 * when the file must be read: it is most of an admin command's start-up otherwise.
 */
export async function adminTarget(flags: { admin?: string | undefined; config?: string | undefined }, env: NodeJS.ProcessEnv = process.env): Promise<AdminTarget> {
  const token = env[ADMIN_TOKEN_ENV];
  if (!token) throw usageError(`set ${ADMIN_TOKEN_ENV} to the admin bearer token`);
  let base = flags.admin ?? env.SLUICE_ADMIN_URL;
  if (base === undefined) {
    const file = join(resolve(flags.config ?? "config"), GATEWAY_FILE);
    if (!existsSync(file)) throw usageError(`no admin URL: pass --admin URL, set SLUICE_ADMIN_URL, or --config DIR with a ${GATEWAY_FILE}`);
    const [{ gatewayConfigSchema }, { CONFIG_FILES, ConfigValidationError, formatIssues, parseConfigText }] = await Promise.all([
      import("../src/config/gateway-schema.ts"),
      import("../src/config/parse-file.ts"),
    ]);
    try {
      base = localUrl(parseConfigText(CONFIG_FILES.gateway, readFileSync(file, "utf8"), gatewayConfigSchema).listeners.admin);
    } catch (err) {
      if (err instanceof ConfigValidationError) throw failure(formatIssues(err.issues));
      throw err;
    }
  }
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    throw usageError(`--admin must be a URL such as http://127.0.0.1:8788, got '${base}'`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw usageError(`--admin must be an http(s) URL, got '${base}'`);
  return { baseUrl: url.origin + url.pathname.replace(/\/+$/, "").replace(/\/admin$/, ""), token };
}

/**
 * One admin API call; the JSON answer, or a failure that says what went wrong: unreachable,
 * refused token, or the API's own error (its code and message).
 */
/** An admin API answer: its status and JSON body, whatever the status. */
export interface AdminAnswer {
  readonly status: number;
  readonly json: unknown;
  /** The body as text (for a message when the JSON has none). */
  readonly text: string;
}

/** The admin API's error envelope, when the body has one. */
export function adminError(json: unknown): { readonly code?: string; readonly message?: string } | undefined {
  return (json as { error?: { code?: string; message?: string } }).error;
}

/**
 * One admin API request, answered with its status and JSON body; a 401 fails here (a refused token
 * is never an answer a command can use).
 * @throws CliError when the API is unreachable, its body is not JSON, or it refused the token.
 */
export async function adminRequest(target: AdminTarget, method: "GET" | "POST" | "PUT", path: string, body?: unknown, timeoutMs = 30_000): Promise<AdminAnswer> {
  const url = `${target.baseUrl}/admin${path}`;
  let res: Response;
  try {
    res = await fetch(url, {
      method,
      headers: { authorization: `Bearer ${target.token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw failure(`cannot reach the admin API: ${method} ${url}: ${cause?.code ?? cause?.message ?? (err as Error).message}`);
  }
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw failure(`${method} ${url} answered ${res.status} with a body that is not JSON (is this the gateway's admin listener?)`);
  }
  if (res.status === 401) {
    const e = adminError(json);
    throw failure(`the admin API refused the token in ${ADMIN_TOKEN_ENV}: ${method} ${url}: 401 ${e?.code ?? ""}: ${e?.message ?? ""}`.trim());
  }
  return { status: res.status, json, text };
}

/** An admin API call whose answer must be a success. @throws CliError for any other answer. */
export async function adminCall<T>(target: AdminTarget, method: "GET" | "POST", path: string, body?: unknown, timeoutMs = 30_000): Promise<T> {
  const { status, json, text } = await adminRequest(target, method, path, body, timeoutMs);
  if (status < 200 || status > 299) {
    const e = adminError(json);
    throw failure(`${method} ${target.baseUrl}/admin${path} failed: ${status} ${e?.code ?? ""}: ${e?.message ?? text.slice(0, 200)}`);
  }
  return json as T;
}
