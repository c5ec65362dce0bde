import { checkEgress, type EgressPolicy, type EgressRefusalCode } from "../egress/egress-guard.ts";
import { GatewayError } from "../errors/gateway-error.ts";

/**
 * A2A push notifications: a caller registers a webhook URL that the agent (through the gateway)
 * later calls with task updates. The URL is the caller's text aimed at the gateway's network, so
 * it is held to more than the egress guard's rules for configured targets: it must be https to a
 * public address or a public-looking name, whatever `security.egress.allow` lists — the
 * allowlist is the operator's statement about the operator's own targets (a loopback simulator,
 * a sidecar), never a licence for a caller to reach them. Metadata services, loopback, private,
 * link-local, shared and unique-local addresses, in every spelling the guard knows, and names
 * such as `localhost` or `*.internal` are refused.
 *
 * The operator may state otherwise for exact origins (gateway.yaml `a2a.push.allowOrigins`, an
 * internal webhook receiver): those may be http and private, never a metadata service.
 *
 * The guard sees the URL, not DNS: a public name that resolves to a private address is stopped
 * by workerd's network allow list at delivery (docs/security.md), and delivery checks the stored
 * URL again, so a policy that tightened since registration applies.
 */

/** Longest webhook URL accepted: enough for any real endpoint with a token in its query. */
export const MAX_PUSH_URL_LENGTH = 2048;

/** Why a webhook URL was refused. */
export type PushUrlRefusalCode = EgressRefusalCode | "too_long" | "fragment";

/** A refusal with a message for the caller (it names the origin, never a path, query or token). */
export interface PushUrlRefusal {
  readonly code: PushUrlRefusalCode;
  readonly message: string;
}

export type PushUrlVerdict = { readonly ok: true; readonly url: URL } | { readonly ok: false; readonly refusal: PushUrlRefusal };

/** No allowlist at all: what a caller's URL is checked against, besides the gateway's own policy. */
const CALLER_POLICY: EgressPolicy = { allow: [] };

/** The caller's words for each egress refusal: none of them points at gateway configuration. */
const REASONS: Readonly<Record<EgressRefusalCode, string>> = {
  invalid_url: "is not an absolute URL with a valid host",
  scheme_not_allowed: "must use https",
  credentials_in_url: "must not carry credentials; use the push config's token or authentication",
  http_not_allowed: "must use https",
  private_address: "is a private, loopback, link-local or otherwise non-public address",
  internal_name: "names a local or internal host",
  metadata_service: "is a cloud metadata service",
  reserved_address: "is a reserved, unspecified, broadcast or multicast address",
};

function originOf(text: string): string {
  try {
    const u = new URL(text);
    return `${u.protocol}//${u.host}`;
  } catch {
    return "the URL";
  }
}

/**
 * Checks a caller's webhook URL: the egress guard with no allowlist (so the allowlist lifts
 * nothing), then the gateway's own policy (so nothing the deployment refuses is registered).
 */
export function checkPushUrl(target: string, policy: EgressPolicy, allowOrigins: readonly string[] = []): PushUrlVerdict {
  const refuse = (code: PushUrlRefusalCode, message: string): PushUrlVerdict => ({ ok: false, refusal: { code, message } });
  if (target.length > MAX_PUSH_URL_LENGTH) return refuse("too_long", `The push notification URL is longer than ${MAX_PUSH_URL_LENGTH} characters.`);
  const listed = operatorListed(target, allowOrigins);
  if (listed !== undefined) {
    // The operator named this origin: http and a private address are its statement, but the guard
    // still refuses what no listing lifts (a metadata service, a reserved address, credentials).
    const verdict = checkEgress(target, { allow: [listed.host] });
    if (!verdict.ok) return refuse(verdict.refusal.code, `The push notification URL ${originOf(target)} ${REASONS[verdict.refusal.code]}.`);
    if (verdict.url.hash !== "") return refuse("fragment", "The push notification URL must not have a fragment.");
    return { ok: true, url: verdict.url };
  }
  for (const p of [CALLER_POLICY, policy]) {
    const verdict = checkEgress(target, p);
    if (!verdict.ok) return refuse(verdict.refusal.code, `The push notification URL ${originOf(target)} ${REASONS[verdict.refusal.code]}; webhooks must be public https URLs.`);
  }
  const url = new URL(target);
  if (url.protocol !== "https:") return refuse("http_not_allowed", `The push notification URL ${originOf(target)} must use https.`);
  // A fragment is never sent, so a URL with one is not the URL the caller thinks it registered.
  if (url.hash !== "") return refuse("fragment", "The push notification URL must not have a fragment.");
  return { ok: true, url };
}

/**
 * The URL, when its origin is exactly one the operator allows (gateway.yaml `a2a.push.allowOrigins`);
 * undefined otherwise. An exact origin, so a listed `http://127.0.0.1:8123` lifts nothing for
 * another port or for https on the same host.
 */
function operatorListed(target: string, allowOrigins: readonly string[]): URL | undefined {
  if (allowOrigins.length === 0) return undefined;
  try {
    const url = new URL(target);
    return allowOrigins.includes(url.origin) ? url : undefined;
  } catch {
    return undefined;
  }
}

/** The refusal as the one error type: a client error on the push config's `url`. */
export function pushUrlError(refusal: PushUrlRefusal, param = "pushNotificationConfig.url"): GatewayError {
  return new GatewayError("invalid_request", refusal.message, { param, details: [{ reason: refusal.code }] });
}

/** Who registered a push config: its tenant and key. Only they may read, list or delete it. */
export interface PushCaller {
  readonly tenant: string;
  readonly key: string;
}

/** The authentication a caller asked its webhook to be called with: an HTTP scheme and its credentials. */
export interface PushAuthentication {
  readonly scheme: string;
  readonly credentials: string | undefined;
}

/**
 * What the gateway keeps of one registered push-notification config — nowhere but sealed into the
 * relay address it gives the agent (src/a2a/push-relay.ts). The agent is never given `url`,
 * `token` or `authentication`: it is given the relay address and `gatewayToken`, and the relay
 * sends each notification on to `url` (checked again at delivery), in `generation`.
 */
export interface PushRelayRecord {
  readonly tenant: string;
  readonly key: string;
  /** The agent that may notify through it (the relay path must name it too). */
  readonly agent: string;
  /** The generation the caller registered in (`1.0`, `0.3`): notifications reach it in that one. */
  readonly generation: "1.0" | "0.3";
  /** The checked webhook URL, as {@link checkPushUrl} normalized it. */
  readonly url: string;
  /** The caller's token, sent back on each notification so its webhook can tell ours from others'. */
  readonly token: string | undefined;
  readonly authentication: PushAuthentication | undefined;
  /** The config's id as the caller gave it (A2A `PushNotificationConfig.id`), when it gave one. */
  readonly configId: string | undefined;
  /** The token the agent is given in the caller's stead: a notification without it is a forgery. */
  readonly gatewayToken: string;
  /** When it was registered (ms since the epoch). */
  readonly issuedAt: number;
}

/** Whether the caller owns a record: same tenant and same key. */
export function ownsPushConfig(record: PushRelayRecord, caller: PushCaller): boolean {
  return record.tenant === caller.tenant && record.key === caller.key;
}

/**
 * The check before each delivery: the record's URL against today's policy and today's operator
 * list. A URL that passed at registration may fail now (the policy tightened, the origin was taken
 * off the list); then the notification is refused, not sent.
 */
export function deliverableUrl(record: PushRelayRecord, policy: EgressPolicy, allowOrigins: readonly string[] = []): PushUrlVerdict {
  return checkPushUrl(record.url, policy, allowOrigins);
}
