import { classifyIp, hostCidr, NEVER_ALLOWED, parseIpLiteral, type AddressKind, type IpLiteral } from "./ip-address.ts";

/**
 * The egress guard: one check for every address the gateway sends a request to (backend base
 * URLs, health probes, telemetry exporters). The rules, in order:
 *
 * 1. The target is an absolute `http:` or `https:` URL without credentials in it.
 * 2. Cloud metadata services, unspecified, broadcast, multicast and reserved addresses are
 *    refused, whatever the allowlist says.
 * 3. A host the allowlist names (host, or host and port) may be reached over `http` and may be
 *    private: that is how a loopback simulator or a sidecar is reached.
 * 4. Anything else must be `https` to a public address or a public-looking name: loopback,
 *    private, link-local, shared (CGNAT), unique-local and special-purpose literals, in every
 *    spelling, and names such as `localhost` or `*.internal` are refused.
 *
 * The guard sees literals and names, never DNS answers: see docs/security.md for what it cannot
 * see and what covers that.
 */

/** The egress rules of a deployment: gateway.yaml `security.egress`. */
export interface EgressPolicy {
  /**
   * `host:port` (or `host`, any port) entries that may be reached over plain http and inside
   * private ranges. IPv6 hosts in brackets: `[::1]:8080`.
   */
  readonly allow: readonly string[];
}

/** Why a target was refused. */
export type EgressRefusalCode =
  | "invalid_url"
  | "scheme_not_allowed"
  | "credentials_in_url"
  | "http_not_allowed"
  | "private_address"
  | "internal_name"
  | "metadata_service"
  | "reserved_address";

/** A refusal with a message fit for an operator (it names the host, never a secret). */
export interface EgressRefusal {
  readonly code: EgressRefusalCode;
  readonly message: string;
}

export type EgressVerdict = { readonly ok: true; readonly url: URL } | { readonly ok: false; readonly refusal: EgressRefusal };

/** Host names of cloud metadata services: refused like their addresses, allowlisted or not. */
const METADATA_NAMES = new Set(["metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal"]);

/** Names that only ever mean this machine or a private network. */
function isInternalName(name: string): boolean {
  if (!name.includes(".")) return true; // single-label: resolved by search domains, i.e. locally
  return /(^|\.)(localhost|local|internal|localdomain|home\.arpa|home|lan|corp)$/.test(name);
}

const KIND_TEXT: Readonly<Record<AddressKind, string>> = {
  public: "public",
  loopback: "loopback",
  private: "private (RFC 1918)",
  link_local: "link-local",
  shared: "shared address space (CGNAT, 100.64.0.0/10)",
  unique_local: "unique-local (fc00::/7)",
  special: "special-purpose",
  metadata: "a cloud metadata service",
  unspecified: "unspecified",
  broadcast: "broadcast",
  multicast: "multicast",
  reserved: "reserved",
};

/** What a host is: an IP literal of some kind, a name of some kind, or not a host at all. */
type HostFacts =
  | { readonly type: "ip"; readonly ip: IpLiteral; readonly kind: AddressKind }
  | { readonly type: "name"; readonly name: string; readonly kind: "public" | "internal" | "metadata" }
  | { readonly type: "invalid" };

/** Classifies a host as `URL.hostname` gives it (lower-case, IPv6 in brackets); trailing dots do not change it. */
function hostFacts(hostname: string): HostFacts {
  const host = hostname.toLowerCase().replace(/\.+$/, "");
  if (host === "") return { type: "invalid" };
  const ip = parseIpLiteral(host);
  if (ip === "invalid") return { type: "invalid" };
  if (ip !== undefined) return { type: "ip", ip, kind: classifyIp(ip) };
  if (METADATA_NAMES.has(host)) return { type: "name", name: host, kind: "metadata" };
  return { type: "name", name: host, kind: isInternalName(host) ? "internal" : "public" };
}

/** The canonical spelling of a host for comparisons: URL-normalized, trailing dots gone. */
function canonicalHost(hostname: string): string {
  return hostname.toLowerCase().replace(/\.+$/, "");
}

/** One allowlist entry, parsed. */
export interface AllowEntry {
  /** Canonical host (IPv6 in brackets, as `URL.hostname` writes it). */
  readonly host: string;
  /** Undefined: any port. */
  readonly port: number | undefined;
  /** The IP literal the host is, when it is one. */
  readonly ip: IpLiteral | undefined;
}

/**
 * Parses an allowlist entry: `host:port` or `host`. `host` is a name, an IPv4 address or an IPv6
 * address in brackets; no scheme, path, credentials or wildcard. An entry naming a metadata
 * service, or an unspecified, broadcast, multicast or reserved address, is refused: allowing it
 * would lift nothing legitimate.
 */
export function parseAllowEntry(entry: string): { readonly ok: true; readonly entry: AllowEntry } | { readonly ok: false; readonly message: string } {
  const bad = (why: string) => ({ ok: false as const, message: `"${entry}" ${why}` });
  let hostText = entry;
  let portText: string | undefined;
  if (entry.startsWith("[")) {
    const close = entry.indexOf("]");
    if (close < 0) return bad("is not host:port (an IPv6 address needs its closing bracket)");
    hostText = entry.slice(0, close + 1);
    const rest = entry.slice(close + 1);
    if (rest !== "") {
      if (!rest.startsWith(":")) return bad("is not host:port");
      portText = rest.slice(1);
    }
  } else if (entry.includes(":")) {
    const colon = entry.lastIndexOf(":");
    hostText = entry.slice(0, colon);
    portText = entry.slice(colon + 1);
  }
  if (!/^[A-Za-z0-9.\-[\]:]+$/.test(hostText)) return bad("is not host:port (no scheme, path, credentials or wildcard)");
  let url: URL;
  try {
    url = new URL(`http://${hostText}/`);
  } catch {
    return bad("is not a host name or an IP address");
  }
  let port: number | undefined;
  if (portText !== undefined) {
    if (!/^[0-9]{1,5}$/.test(portText) || Number(portText) < 1 || Number(portText) > 65535) return bad("has no port from 1 to 65535 after its ':'");
    port = Number(portText);
  }
  const facts = hostFacts(url.hostname);
  if (facts.type === "invalid") return bad("is not a host name or an IP address");
  if (facts.kind === "metadata") return bad("names a cloud metadata service, which is never allowed");
  if (facts.type === "ip" && NEVER_ALLOWED.has(facts.kind)) return bad(`is a ${KIND_TEXT[facts.kind]} address, which is never allowed`);
  return { ok: true, entry: { host: canonicalHost(url.hostname), port, ip: facts.type === "ip" ? facts.ip : undefined } };
}

/** Parsed entries per policy object: the allow list is parsed once, not per check. */
const parsedPolicies = new WeakMap<EgressPolicy, readonly AllowEntry[]>();

function allowEntries(policy: EgressPolicy): readonly AllowEntry[] {
  let entries = parsedPolicies.get(policy);
  if (!entries) {
    // An entry that does not parse allows nothing; the config schema reports it at load.
    entries = policy.allow.flatMap((e) => {
      const p = parseAllowEntry(e);
      return p.ok ? [p.entry] : [];
    });
    parsedPolicies.set(policy, entries);
  }
  return entries;
}

const defaultPort = (url: URL) => (url.port !== "" ? Number(url.port) : url.protocol === "https:" ? 443 : 80);

/** True when the policy's allowlist names this URL's host (and port, when the entry has one). */
function allowlisted(url: URL, policy: EgressPolicy): boolean {
  const host = canonicalHost(url.hostname);
  const port = defaultPort(url);
  return allowEntries(policy).some((e) => e.host === host && (e.port === undefined || e.port === port));
}

/** The URL without anything secret, for messages: scheme, host and port. */
function origin(url: URL): string {
  return `${url.protocol}//${url.host}`;
}

/**
 * Checks one outbound target. Never throws: a target that is not a URL is refused as
 * `invalid_url`. Call it wherever a request is about to leave for an address the configuration
 * gave, and again at send time when that address may have been stored before this check existed.
 */
export function checkEgress(target: string | URL, policy: EgressPolicy): EgressVerdict {
  const refuse = (code: EgressRefusalCode, message: string): EgressVerdict => ({ ok: false, refusal: { code, message } });
  let url: URL;
  try {
    url = typeof target === "string" ? new URL(target) : target;
  } catch {
    return refuse("invalid_url", "the target is not an absolute URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return refuse("scheme_not_allowed", `scheme ${url.protocol} is not allowed; use https`);
  if (url.username !== "" || url.password !== "") return refuse("credentials_in_url", "credentials in a URL are not allowed; name a secret instead");
  const facts = hostFacts(url.hostname);
  if (facts.type === "invalid") return refuse("invalid_url", `host ${url.hostname} is not a host name or an IP address`);
  if (facts.kind === "metadata") return refuse("metadata_service", `${origin(url)} is a cloud metadata service, which is never allowed`);
  if (facts.type === "ip" && NEVER_ALLOWED.has(facts.kind)) {
    return refuse("reserved_address", `${origin(url)} is a ${KIND_TEXT[facts.kind]} address, which is never allowed`);
  }
  if (allowlisted(url, policy)) return { ok: true, url };
  if (facts.type === "ip" && facts.kind !== "public") {
    return refuse("private_address", `${origin(url)} is a ${KIND_TEXT[facts.kind]} address; list it in gateway.yaml security.egress.allow to reach it`);
  }
  if (facts.type === "name" && facts.kind === "internal") {
    return refuse("internal_name", `${origin(url)} names a local or internal host; list it in gateway.yaml security.egress.allow to reach it`);
  }
  if (url.protocol === "http:") return refuse("http_not_allowed", `${origin(url)} is plain http; use https, or list the host in gateway.yaml security.egress.allow`);
  return { ok: true, url };
}

/**
 * What workerd's own network allow list must let through for this policy (`public`, plus each
 * allowlisted IP literal as a one-address CIDR; `local` for an allowlisted loopback name, and
 * `private` for any other allowlisted name, which workerd can only filter after resolving it).
 * workerd applies the list to DNS answers too, which the guard never sees.
 */
export function networkAllowFor(policy: EgressPolicy): string[] {
  const out = new Set<string>(["public"]);
  for (const e of allowEntries(policy)) {
    if (e.ip) out.add(hostCidr(e.ip));
    else out.add(/(^|\.)localhost$/.test(e.host) ? "local" : "private");
  }
  return [...out];
}
