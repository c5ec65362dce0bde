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
export function checkPushUrl(target: string, policy: EgressPolicy): PushUrlVerdict {
  const refuse = (code: PushUrlRefusalCode, message: string): PushUrlVerdict => ({ ok: false, refusal: { code, message } });
  if (target.length > MAX_PUSH_URL_LENGTH) return refuse("too_long", `The push notification URL is longer than ${MAX_PUSH_URL_LENGTH} characters.`);
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

/** The refusal as the one error type: a client error on the push config's `url`. */
export function pushUrlError(refusal: PushUrlRefusal, param = "pushNotificationConfig.url"): GatewayError {
  return new GatewayError("invalid_request", refusal.message, { param, details: [{ reason: refusal.code }] });
}

/** Who registered a push config: its tenant and key. Only they may read, list or delete it. */
export interface PushCaller {
  readonly tenant: string;
  readonly key: string;
}

/**
 * What the A2A kind stores for one registered push-notification config. The agent is never given
 * `url`: it is given the gateway's relay address for `id`, and the gateway relays to `url` (checked
 * again at delivery) only the notifications of `taskId` from `agent`.
 */
export interface PushConfigRecord {
  /** The gateway's id of the config (also the relay address's last segment); not the caller's. */
  readonly id: string;
  /** The caller's own id of the config (A2A `PushNotificationConfig.id`), when it gave one. */
  readonly callerConfigId: string | undefined;
  readonly agent: string;
  /** The A2A task id at the agent (a correlation, never the business task id). */
  readonly taskId: string;
  readonly tenant: string;
  readonly key: string;
  /** The checked webhook URL, as {@link checkPushUrl} normalized it. */
  readonly url: string;
  /** The caller's token, sent back on each notification so its webhook can tell ours from others'. */
  readonly token: string | undefined;
  /** When it was registered (ms since the epoch). */
  readonly createdAt: number;
}

/** A new record for a caller's config whose URL passed {@link checkPushUrl}. */
export function pushConfigRecord(input: {
  readonly id: string;
  readonly callerConfigId?: string | undefined;
  readonly agent: string;
  readonly taskId: string;
  readonly caller: PushCaller;
  readonly url: URL;
  readonly token?: string | undefined;
  readonly now: number;
}): PushConfigRecord {
  return {
    id: input.id,
    callerConfigId: input.callerConfigId,
    agent: input.agent,
    taskId: input.taskId,
    tenant: input.caller.tenant,
    key: input.caller.key,
    url: input.url.href,
    token: input.token,
    createdAt: input.now,
  };
}

/** Whether the caller owns a record: same tenant and same key. */
export function ownsPushConfig(record: PushConfigRecord, caller: PushCaller): boolean {
  return record.tenant === caller.tenant && record.key === caller.key;
}

/**
 * The check before each delivery: the record's URL against today's policy. A URL that passed at
 * registration may fail now (the policy tightened, or the record predates a rule); then the
 * notification is dropped, not sent.
 */
export function deliverableUrl(record: PushConfigRecord, policy: EgressPolicy): PushUrlVerdict {
  return checkPushUrl(record.url, policy);
}
