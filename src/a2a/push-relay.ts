import { deriveSecretKey, MIN_SECRET_LENGTH } from "../digest/derived-key.ts";
import { openToken, sealToken } from "../digest/sealed-json.ts";
import type { EgressPolicy } from "../egress/egress-guard.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import type { A2aGeneration } from "../protocol/a2a/agent-card.ts";
import { gatewayAgentUrl } from "./card-rewrite.ts";
import { checkPushUrl, ownsPushConfig, pushUrlError, type PushAuthentication, type PushCaller, type PushRelayRecord } from "./push-url.ts";

/**
 * The push-notification relay, kept without state. A caller's push config (its webhook URL, token
 * and authentication) is never given to the agent: the agent is given the gateway's relay address
 * `<gateway>/a2a/<agent>/push/<sealed>`, where `<sealed>` is the caller's config and who the
 * caller is ({@link PushRelayRecord}), sealed with AES-256-GCM under a key derived (HKDF) from
 * gateway.yaml `a2a.stateSecret`, and a fresh gateway token in place of the caller's. The agent
 * can neither read the caller's URL out of the address nor forge one; the relay opens the address,
 * checks the token, and sends the notification on to the caller's webhook.
 *
 * The agent stores the relay address as the config's URL, so its answers about configs (get, list)
 * are mapped back here to the caller's view, and a config sealed for another caller is not shown.
 */

/** The header A2A agents send a config's token in (both generations' SDKs), read case-insensitively. */
export const NOTIFICATION_TOKEN_HEADER = "x-a2a-notification-token";

/** The path segment under `/a2a/<agent>` the relay answers on. */
export const RELAY_SEGMENT = "push";

/** The version of the sealed form, authenticated with it. */
const VERSION = "p1";

/** The longest sealed address read at all: a maximal URL, token and credentials with room to spare. */
const MAX_SEALED_CHARS = 16 * 1024;

/** Longest token or credential a caller may register (they travel inside the relay address). */
const MAX_SECRET_CHARS = 1024;


/** Why a presented relay address was refused (all answer "not found"). */
export type RelayFailure = "malformed" | "tampered";

/** Seals and opens relay records under one secret. */
export class PushRelaySealer {
  readonly #key: CryptoKey;

  private constructor(key: CryptoKey) {
    this.#key = key;
  }

  /**
   * Derives the AES key from `a2a.stateSecret` by HKDF-SHA-256 with its own info, so the relay's
   * key and the id binding's never coincide although one secret is configured.
   */
  static async fromSecret(secret: string): Promise<PushRelaySealer> {
    if (secret.length < MIN_SECRET_LENGTH) throw new RangeError(`the A2A state secret must be at least ${MIN_SECRET_LENGTH} characters`);
    return new PushRelaySealer(await deriveSecretKey(secret, "sluice a2a", "push-relay v1", { name: "AES-GCM", length: 256 }, ["encrypt", "decrypt"]));
  }

  async seal(record: PushRelayRecord): Promise<string> {
    return await sealToken(this.#key, VERSION, record);
  }

  async open(sealed: string): Promise<{ readonly ok: true; readonly record: PushRelayRecord } | { readonly ok: false; readonly why: RelayFailure }> {
    const opened = await openToken<PushRelayRecord>(this.#key, VERSION, sealed, MAX_SEALED_CHARS);
    if (!opened.ok) return opened;
    return { ok: true, record: opened.value };
  }
}

/** The relay address of a sealed record for `agent`, on the gateway's origin. */
export function relayUrl(origin: string, agent: string, sealed: string): string {
  return `${gatewayAgentUrl(origin, agent)}/${RELAY_SEGMENT}/${sealed}`;
}

/** The sealed part of a relay address for `agent` on `origin`; undefined: not such an address. */
export function sealedOfRelayUrl(url: string, origin: string, agent: string): string | undefined {
  const prefix = `${gatewayAgentUrl(origin, agent)}/${RELAY_SEGMENT}/`;
  if (!url.startsWith(prefix)) return undefined;
  const rest = url.slice(prefix.length);
  return rest === "" || rest.includes("/") ? undefined : rest;
}

/** What the relay deps the A2A kind needs: the sealer, and the rules a webhook URL is held to. */
export interface PushRelayDeps {
  readonly sealer: PushRelaySealer;
  readonly egress: EgressPolicy;
  /** gateway.yaml `a2a.push.allowOrigins`: the operator's exact webhook origins. */
  readonly allowOrigins: readonly string[];
}

type Json = Readonly<Record<string, unknown>>;

/** A push config's own fields, whatever generation wrote them. */
export interface PushConfigFields {
  readonly url: string;
  readonly token: string | undefined;
  readonly authentication: PushAuthentication | undefined;
  readonly configId: string | undefined;
}

/**
 * Where a request of `method` carries a push config, as a path of keys into its params (empty: the
 * params are the config), and where that config's own fields sit; undefined: the method carries none.
 */
function configPath(method: string): readonly string[] | undefined {
  switch (method) {
    case "SendMessage":
    case "SendStreamingMessage":
      return ["configuration", "taskPushNotificationConfig"];
    case "message/send":
    case "message/stream":
      return ["configuration", "pushNotificationConfig"];
    case "CreateTaskPushNotificationConfig":
      return [];
    case "tasks/pushNotificationConfig/set":
      return ["pushNotificationConfig"];
    default:
      return undefined;
  }
}

/** The push config a request carries (undefined: none), as the request wrote it. */
export function pushConfigOfRequest(method: string, params: Json): Json | undefined {
  const path = configPath(method);
  if (path === undefined) return undefined;
  let at: unknown = params;
  for (const k of path) at = isRecord(at) ? at[k] : undefined;
  return isRecord(at) ? at : undefined;
}

function withConfig(params: Json, path: readonly string[], config: Json): Json {
  if (path.length === 0) return config;
  const [head, ...rest] = path;
  const inner = params[head!];
  return { ...params, [head!]: withConfig(isRecord(inner) ? inner : {}, rest, config) };
}

/** Visible ASCII and spaces: what an HTTP header value the webhook is sent may hold. */
const HEADER_SAFE = /^[\x20-\x7e]*$/;

const optionalString = (c: Json, key: string, param: string, header = false): string | undefined => {
  const v = c[key];
  if (v === undefined || v === null || v === "") return undefined;
  if (typeof v !== "string" || v.length > MAX_SECRET_CHARS) throw new GatewayError("invalid_request", `${param}.${key} must be a string of at most ${MAX_SECRET_CHARS} characters.`, { param: `${param}.${key}` });
  // It is sent to the webhook in a header: a line break or control character would not be one header.
  if (header && !HEADER_SAFE.test(v)) throw new GatewayError("invalid_request", `${param}.${key} must be printable ASCII: it is sent to the webhook in a header.`, { param: `${param}.${key}` });
  return v;
};

/** A config's fields in `generation`; a config the gateway could not deliver as asked is refused. */
export function readPushConfig(generation: A2aGeneration, c: Json, param: string): PushConfigFields {
  if (typeof c.url !== "string" || c.url === "") throw new GatewayError("invalid_request", `${param}.url must be the webhook's URL.`, { param: `${param}.url` });
  const token = optionalString(c, "token", param, true);
  const configId = optionalString(c, "id", param);
  let authentication: PushAuthentication | undefined;
  const a = c.authentication;
  if (a !== undefined && a !== null) {
    if (!isRecord(a)) throw new GatewayError("invalid_request", `${param}.authentication must be an object.`, { param: `${param}.authentication` });
    const credentials = optionalString(a, "credentials", `${param}.authentication`, true);
    let scheme: unknown;
    if (generation === "1.0") scheme = a.scheme;
    else {
      const schemes = a.schemes ?? [];
      // The gateway calls the webhook itself, with one scheme: choosing among several would be choosing for the caller.
      if (!Array.isArray(schemes) || schemes.length > 1) throw new GatewayError("invalid_request", `${param}.authentication.schemes must name at most one scheme: the gateway calls the webhook with one.`, { param: `${param}.authentication.schemes` });
      scheme = schemes[0];
    }
    if (scheme !== undefined && scheme !== "") {
      if (typeof scheme !== "string" || !/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/.test(scheme)) throw new GatewayError("invalid_request", `${param}.authentication names no valid HTTP authentication scheme.`, { param: `${param}.authentication` });
      authentication = { scheme, credentials };
    } else if (credentials !== undefined) throw new GatewayError("invalid_request", `${param}.authentication has credentials but no scheme.`, { param: `${param}.authentication` });
  }
  return { url: c.url, token, authentication, configId };
}

/**
 * Checks the push config a caller's request carries (if any) before anything is reserved or sent:
 * its URL against the egress guard and the operator's list, its token and authentication for
 * shape. Refused: `invalid_request` naming the webhook's origin.
 */
export function checkRequestPushConfig(deps: PushRelayDeps | undefined, method: string, generation: A2aGeneration, params: Json): void {
  const config = pushConfigOfRequest(method, params);
  if (config === undefined) return;
  if (deps === undefined) throw new GatewayError("agent_operation_unsupported", "Push notifications are not relayed by this gateway (gateway.yaml a2a.push is not configured): poll the task, or stream it.");
  const param = configParam(method);
  const fields = readPushConfig(generation, config, param);
  const verdict = checkPushUrl(fields.url, deps.egress, deps.allowOrigins);
  if (!verdict.ok) throw pushUrlError(verdict.refusal, `${param}.url`);
}

function configParam(method: string): string {
  const path = configPath(method) ?? [];
  return ["params", ...path].join(".");
}

/** Who registers, for whom, on which origin: what a relayed config is sealed with. */
export interface RelayRegistration {
  readonly caller: PushCaller;
  readonly agent: string;
  /** The caller's generation (notifications are delivered in it). */
  readonly callerGeneration: A2aGeneration;
  /** The generation the request is sent to the agent in (the config's shape there). */
  readonly agentGeneration: A2aGeneration;
  /** The gateway's origin the request came in on: the relay address is on it. */
  readonly origin: string;
  readonly now: number;
}

/**
 * The request's params with its push config (if any) replaced by the relay's: the caller's URL,
 * token and authentication sealed into the relay address, the agent given that address and a
 * fresh gateway token. The URL is checked again here (the request was checked at decode), so
 * nothing unchecked is ever sealed.
 */
export async function relayRequestParams(deps: PushRelayDeps, method: string, params: Json, reg: RelayRegistration): Promise<Json> {
  const path = configPath(method);
  const config = pushConfigOfRequest(method, params);
  if (path === undefined || config === undefined) return params;
  const param = configParam(method);
  const fields = readPushConfig(reg.agentGeneration, config, param);
  const verdict = checkPushUrl(fields.url, deps.egress, deps.allowOrigins);
  if (!verdict.ok) throw pushUrlError(verdict.refusal, `${param}.url`);
  const gatewayToken = randomToken();
  const record: PushRelayRecord = {
    tenant: reg.caller.tenant,
    key: reg.caller.key,
    agent: reg.agent,
    generation: reg.callerGeneration,
    url: verdict.url.href,
    token: fields.token,
    authentication: fields.authentication,
    configId: fields.configId,
    gatewayToken,
    issuedAt: reg.now,
  };
  const sealed = await deps.sealer.seal(record);
  const relayed: Record<string, unknown> = { ...config, url: relayUrl(reg.origin, reg.agent, sealed), token: gatewayToken };
  delete relayed.authentication;
  return withConfig(params, path, relayed);
}

function randomToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  let s = "";
  for (const b of bytes) s += b.toString(16).padStart(2, "0");
  return s;
}

/** A config as the caller registered it, in `generation`, over the agent's stored one. */
function callerView(generation: A2aGeneration, stored: Json, record: PushRelayRecord): Json {
  const out: Record<string, unknown> = { ...stored, url: record.url };
  delete out.token;
  delete out.authentication;
  if (record.token !== undefined) out.token = record.token;
  if (record.authentication !== undefined) {
    const { scheme, credentials } = record.authentication;
    out.authentication = generation === "1.0" ? { scheme, credentials: credentials ?? "" } : { schemes: [scheme], ...(credentials === undefined ? {} : { credentials }) };
  }
  return out;
}

/** Who is reading the agent's configs, and how the task ids they name are shown to it. */
export interface ConfigReader {
  readonly caller: PushCaller;
  readonly agent: string;
  readonly origin: string;
  /** The agent's generation: the shape of the answer being mapped. */
  readonly generation: A2aGeneration;
}

/** The caller's view of one stored config, or undefined when it is not the caller's (not sealed by the gateway for it). */
async function mapStored(deps: PushRelayDeps, reader: ConfigReader, stored: Json): Promise<Json | undefined> {
  const url = typeof stored.url === "string" ? stored.url : "";
  const sealed = sealedOfRelayUrl(url, reader.origin, reader.agent);
  if (sealed === undefined) return undefined;
  const opened = await deps.sealer.open(sealed);
  if (!opened.ok || opened.record.agent !== reader.agent || !ownsPushConfig(opened.record, reader.caller)) return undefined;
  return callerView(reader.generation, stored, opened.record);
}

/**
 * An agent's answer to a push-config method (in the agent's generation) as the caller may see it:
 * every config the relay sealed for this caller shown with the caller's URL, token and
 * authentication; any other config (another caller's, or one not registered through the gateway)
 * left out of a list, and a get or create of one answered as not found. Answers of other methods,
 * and errors, are returned unchanged.
 */
export async function mapConfigAnswer(deps: PushRelayDeps, reader: ConfigReader, method: string, answer: Json): Promise<Json> {
  const result = answer.result;
  if (result === undefined || result === null) return answer;
  const notFound = () => new GatewayError("not_found", "No such push notification config for this task and caller.", { param: "params" });
  switch (method) {
    case "CreateTaskPushNotificationConfig":
    case "GetTaskPushNotificationConfig": {
      if (!isRecord(result)) return answer;
      const view = await mapStored(deps, reader, result);
      if (view === undefined) throw notFound();
      return { ...answer, result: view };
    }
    case "ListTaskPushNotificationConfigs": {
      if (!isRecord(result) || !Array.isArray(result.configs)) return answer;
      const views = await Promise.all(result.configs.map((c) => (isRecord(c) ? mapStored(deps, reader, c) : undefined)));
      return { ...answer, result: { ...result, configs: views.filter((v) => v !== undefined) } };
    }
    case "tasks/pushNotificationConfig/set":
    case "tasks/pushNotificationConfig/get": {
      if (!isRecord(result) || !isRecord(result.pushNotificationConfig)) return answer;
      const view = await mapStored(deps, reader, result.pushNotificationConfig);
      if (view === undefined) throw notFound();
      return { ...answer, result: { ...result, pushNotificationConfig: view } };
    }
    case "tasks/pushNotificationConfig/list": {
      if (!Array.isArray(result)) return answer;
      const views = await Promise.all(
        result.map(async (c) => {
          if (!isRecord(c) || !isRecord(c.pushNotificationConfig)) return undefined;
          const view = await mapStored(deps, reader, c.pushNotificationConfig);
          return view === undefined ? undefined : { ...c, pushNotificationConfig: view };
        }),
      );
      return { ...answer, result: views.filter((v) => v !== undefined) };
    }
    default:
      return answer;
  }
}

/** Whether a method (of either generation) is one of the push-config methods whose answers {@link mapConfigAnswer} maps. */
export function isPushConfigMethod(method: string): boolean {
  return method.includes("PushNotificationConfig") || method.startsWith("tasks/pushNotificationConfig/");
}
