/*
 * AWS Signature Version 4 on Web Crypto, for Bedrock. Written here (about a hundred lines) rather
 * than taken from aws4fetch: that library wraps fetch with its own retries and body handling, while
 * the gateway needs only the headers, over the exact body bytes it then sends itself (after every
 * plugin's change), with the signing time injected from the gateway's clock.
 *
 * The canonical request follows AWS's specification for services other than S3: the path is
 * URI-encoded once more as it is canonicalised (so a model id's `%3A` is signed as `%253A`), the
 * query is sorted by encoded name and value, and every header passed is signed with `host`,
 * `x-amz-date` and (with temporary credentials) `x-amz-security-token`.
 */

/** An AWS access key: the id, its secret, and the session token of temporary credentials. */
export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string | undefined;
}

/** One request to sign. */
export interface SigV4Request {
  readonly method: string;
  readonly url: string;
  /** Headers the request will carry, all of them signed (`host` and the `x-amz-*` ones are added). */
  readonly headers: Readonly<Record<string, string>>;
  /** The exact body bytes to be sent (a string is signed as its UTF-8 bytes). */
  readonly body: Uint8Array | string;
  readonly credentials: AwsCredentials;
  readonly region: string;
  readonly service: string;
  /** The signing time. */
  readonly now: Date;
}

const encoder = new TextEncoder();

const hex = (bytes: ArrayBuffer): string => Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");

async function sha256Hex(data: Uint8Array | string): Promise<string> {
  return hex(await crypto.subtle.digest("SHA-256", typeof data === "string" ? encoder.encode(data) : data));
}

async function hmac(key: ArrayBuffer | Uint8Array, data: string): Promise<ArrayBuffer> {
  const k = await crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return crypto.subtle.sign("HMAC", k, encoder.encode(data));
}

/**
 * Signing keys by secret, day, region and service. A key is four chained HMACs (each a key import
 * and a sign) and stays the same all day, so it is derived once, not per request: that was most of
 * a signature's cost. Bounded: past `MAX_SIGNING_KEYS` it starts over (a rotated secret or a new
 * day makes new entries; old ones are never used again).
 */
const signingKeys = new Map<string, Promise<CryptoKey>>();
const MAX_SIGNING_KEYS = 64;

function signingKey(secret: string, day: string, region: string, service: string): Promise<CryptoKey> {
  const id = `${day}\n${region}\n${service}\n${secret}`;
  let key = signingKeys.get(id);
  if (key === undefined) {
    if (signingKeys.size >= MAX_SIGNING_KEYS) signingKeys.clear();
    key = deriveSigningKey(secret, day, region, service);
    signingKeys.set(id, key);
    // A failed derivation is not remembered.
    key.catch(() => signingKeys.delete(id));
  }
  return key;
}

async function deriveSigningKey(secret: string, day: string, region: string, service: string): Promise<CryptoKey> {
  const kDate = await hmac(encoder.encode(`AWS4${secret}`), day);
  const kRegion = await hmac(kDate, region);
  const kService = await hmac(kRegion, service);
  const kSigning = await hmac(kService, "aws4_request");
  return crypto.subtle.importKey("raw", kSigning, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}

/** RFC 3986 encoding, as SigV4 wants it: everything but unreserved characters, uppercase hex. */
function uriEncode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** The canonical URI of a path as sent on the wire (each segment encoded again). */
export function canonicalPath(pathname: string): string {
  return pathname === "" ? "/" : pathname.split("/").map(uriEncode).join("/");
}

/** The canonical query: names and values encoded, sorted by name then value. */
function canonicalQuery(search: string): string {
  if (search === "" || search === "?") return "";
  const pairs = search
    .slice(1)
    .split("&")
    .filter((p) => p !== "")
    .map((p) => {
      const eq = p.indexOf("=");
      const [k, v] = eq < 0 ? [p, ""] : [p.slice(0, eq), p.slice(eq + 1)];
      return [uriEncode(decodeURIComponent(k.replaceAll("+", " "))), uriEncode(decodeURIComponent(v.replaceAll("+", " ")))] as const;
    });
  pairs.sort(([ak, av], [bk, bv]) => (ak < bk ? -1 : ak > bk ? 1 : av < bv ? -1 : av > bv ? 1 : 0));
  return pairs.map(([k, v]) => `${k}=${v}`).join("&");
}

/** `YYYYMMDDTHHMMSSZ`. */
export function amzDate(now: Date): string {
  return now.toISOString().replace(/[-:]/g, "").replace(/\.\d{3}/, "");
}

/**
 * The headers to add to the request: `x-amz-date`, `x-amz-security-token` (temporary
 * credentials) and `authorization`. The request must then be sent with exactly the headers and
 * body signed here.
 */
export async function signSigV4(req: SigV4Request): Promise<Record<string, string>> {
  const url = new URL(req.url);
  const date = amzDate(req.now);
  const day = date.slice(0, 8);
  const added: Record<string, string> = { "x-amz-date": date };
  if (req.credentials.sessionToken !== undefined) added["x-amz-security-token"] = req.credentials.sessionToken;

  const signed = new Map<string, string>([["host", url.host]]);
  for (const [name, value] of Object.entries({ ...req.headers, ...added })) {
    // Values trimmed and inner runs of spaces collapsed, as the specification asks.
    signed.set(name.toLowerCase(), value.trim().replace(/\s+/g, " "));
  }
  const names = [...signed.keys()].sort();
  const signedHeaders = names.join(";");
  const canonical = [
    req.method.toUpperCase(),
    canonicalPath(url.pathname),
    canonicalQuery(url.search),
    names.map((n) => `${n}:${signed.get(n)}\n`).join(""),
    signedHeaders,
    await sha256Hex(req.body),
  ].join("\n");
  const scope = `${day}/${req.region}/${req.service}/aws4_request`;
  const toSign = `AWS4-HMAC-SHA256\n${date}\n${scope}\n${await sha256Hex(canonical)}`;

  const kSigning = await signingKey(req.credentials.secretAccessKey, day, req.region, req.service);
  const signature = hex(await crypto.subtle.sign("HMAC", kSigning, encoder.encode(toSign)));

  added.authorization = `AWS4-HMAC-SHA256 Credential=${req.credentials.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
  return added;
}
