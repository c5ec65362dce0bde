import type { Clock } from "../../deps/clock.ts";
import { signSigV4, type AwsCredentials } from "./aws-sigv4.ts";
import type { TokenCache, TokenSource } from "./token-cache.ts";

/*
 * The one seam every minted or computed authorization goes through. A static secret is a header
 * set when the request is built; everything else (an Entra ID token, a Google service account's
 * token, an AWS SigV4 signature) needs work that may be asynchronous and may fail, so it runs
 * once the request is final, just before it is sent, and its failure is known-zero: nothing
 * reached the provider.
 */

/** The request as it will leave: the exact URL, headers and body. */
export interface OutgoingRequest {
  readonly url: string;
  /** Mutable: the authorizer adds its headers here. */
  readonly headers: Headers;
  /** The body text, sent as UTF-8. */
  readonly body: string;
}

/** Adds a request's authorization just before it is sent. */
export interface Authorizer {
  /** Sets the authorization headers; rejects (with no secret in the error) when it cannot. */
  authorize(request: OutgoingRequest, signal: AbortSignal): Promise<void>;
  /** The provider refused the authorization that was sent (401): a cached token is dropped. */
  refused?(): void;
}

/** `Authorization: Bearer` with a token from the per-isolate cache, minted by `source` when none is fresh. */
export function bearerTokenAuthorizer(source: TokenSource, tokens: TokenCache): Authorizer {
  let sent: string | undefined;
  return {
    async authorize(request, signal) {
      sent = await tokens.token(source, signal);
      request.headers.set("authorization", `Bearer ${sent}`);
    },
    // A 401 means the provider no longer takes this token (revoked early, say): the next request mints anew.
    refused() {
      if (sent !== undefined) tokens.invalidate(source, sent);
    },
  };
}

/**
 * Headers the runtime or a proxy on the way may set or rewrite: left out of the signature (as
 * AWS's own SDKs leave them out), so a rewritten value cannot void it.
 */
const UNSIGNED_HEADERS: ReadonlySet<string> = new Set(["user-agent", "accept-encoding", "expect", "connection"]);

/** The headers a signature adds; a request signed again (a retry) drops the old ones first. */
const SIGNATURE_HEADERS = ["authorization", "x-amz-date", "x-amz-security-token"] as const;

const utf8 = new TextEncoder();

/**
 * AWS SigV4 over exactly the bytes sent (the body after every plugin), at the gateway's clock at
 * send time, so a request that waited in a queue is not signed with a stale date.
 */
export function sigV4Authorizer(credentials: AwsCredentials, region: string, service: string, clock: Clock): Authorizer {
  return {
    async authorize(request) {
      for (const h of SIGNATURE_HEADERS) request.headers.delete(h);
      const toSign: Record<string, string> = {};
      for (const [k, v] of request.headers) if (!UNSIGNED_HEADERS.has(k)) toSign[k] = v;
      const signed = await signSigV4({ method: "POST", url: request.url, headers: toSign, body: utf8.encode(request.body), credentials, region, service, now: new Date(clock.now()) });
      for (const [k, v] of Object.entries(signed)) request.headers.set(k, v);
    },
  };
}
