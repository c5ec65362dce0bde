import { readFileSync } from "node:fs";
import { GatewayError } from "../src/errors/gateway-error.ts";
import type { ExplainAnswer } from "../src/kinds/model/explain-answer.ts";
import { PROTOCOL_IDS, type ProtocolId } from "../src/protocol/codec.ts";
import { adminError, adminRequest, adminTarget } from "./admin-client.ts";
import { failure, usageError } from "./cli-error.ts";
import { readConfigDir } from "./config-dir.ts";

/** One request to explain: its body as a client would send it, in its protocol, with the trusted headers it would carry. */
export interface ExplainCase {
  readonly request: unknown;
  readonly protocol: ProtocolId;
  readonly headers: Readonly<Record<string, string>>;
}

/** An explain's answer, or the error the request would get before it is decided (a bad body, an unknown model, a key without the grant). */
export type ExplainResult = { readonly ok: true; readonly answer: ExplainAnswer } | { readonly ok: false; readonly code: string; readonly status: number; readonly message: string };

/** Explains requests offline (in this process) or through a running gateway's admin API. */
export interface Explainer {
  /** `offline (config DIR)` or `gateway URL`, for the report. */
  readonly where: string;
  readonly offline: boolean;
  explain(c: ExplainCase): Promise<ExplainResult>;
}

/** Whom to explain for: `--key KEYID`, `--tenant T`, or both. */
export interface ExplainAs {
  readonly key?: string | undefined;
  readonly tenant?: string | undefined;
}

/** `--protocol`'s value, checked. */
export function protocolOf(value: string | undefined): ProtocolId {
  if (value === undefined) return "openai-chat";
  if (!(PROTOCOL_IDS as readonly string[]).includes(value)) throw usageError(`--protocol must be one of ${PROTOCOL_IDS.join(", ")}, got '${value}'`);
  return value as ProtocolId;
}

/** `--header name=value` flags as a record. */
export function headersOf(values: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const h of values) {
    const eq = h.indexOf("=");
    if (eq <= 0) throw usageError(`--header must be name=value, got '${h}'`);
    out[h.slice(0, eq).trim().toLowerCase()] = h.slice(eq + 1);
  }
  return out;
}

/** A JSON file's value, or a failure naming the file. */
export function readJsonFile(path: string, what: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw failure(`cannot read ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw failure(`${what} ${path} is not JSON: ${(err as Error).message}`);
  }
}

/**
 * The explainer the flags ask for: `--gateway URL` posts each request to that gateway's
 * `/admin/explain` (model-backed signals are computed there, by the gateway's own models);
 * otherwise the config directory is loaded and compiled here, and each request runs on the same
 * runner in explain mode, offline: model-backed signals are unknown (`offline`).
 */
export async function explainerOf(flags: { readonly gateway?: string | undefined; readonly config?: string | undefined }, as: ExplainAs): Promise<Explainer> {
  if (as.key === undefined && as.tenant === undefined) throw usageError("name the caller: --key KEYID (an API key id of publication.yaml) or --tenant TENANT");
  if (flags.gateway !== undefined) {
    const target = await adminTarget({ admin: flags.gateway });
    return {
      where: `gateway ${target.baseUrl}`,
      offline: false,
      async explain(c) {
        const body = { request: c.request, protocol: c.protocol, key: as.key, tenant: as.tenant, headers: Object.keys(c.headers).length > 0 ? c.headers : undefined };
        const { status, json, text } = await adminRequest(target, "POST", "/explain", body, 60_000);
        if (status >= 200 && status <= 299) return { ok: true, answer: json as ExplainAnswer };
        const e = adminError(json);
        if (status === 404 && e?.code === "not_found") throw failure(`the gateway at ${target.baseUrl} has no /admin/explain (an older version?)`);
        return { ok: false, code: e?.code ?? "unknown", status, message: e?.message ?? text.slice(0, 200) };
      },
    };
  }
  const valid = await readConfigDir(flags.config ?? "config");
  // Only an offline run needs the engine in this process.
  const engine = await (await import("./offline-engine.ts")).offlineEngine(valid);
  const trusted = new Set(valid.config.gateway.security.trustedHeaders.map((h) => h.toLowerCase()));
  return {
    where: `offline (config ${valid.dir})`,
    offline: true,
    async explain(c) {
      const headers = new Map<string, string>();
      for (const [name, value] of Object.entries(c.headers)) {
        if (!trusted.has(name)) return { ok: false, code: "invalid_request", status: 400, message: `'headers.${name}' is not a trusted header (gateway.yaml security.trustedHeaders).` };
        headers.set(name, value);
      }
      try {
        const answer = await engine.explain(
          {
            requestId: `req_${crypto.randomUUID().replaceAll("-", "")}`,
            receivedAt: Date.now(),
            protocol: c.protocol,
            apiKey: undefined,
            readBody: async () => c.request,
            trustedHeaders: headers,
            waitUntil: (p) => void p.catch(() => {}),
          },
          { as, offline: true },
        );
        return { ok: true, answer };
      } catch (err) {
        if (err instanceof GatewayError) return { ok: false, code: err.code, status: err.status, message: err.message };
        throw err;
      }
    },
  };
}
