import type { GatewayError } from "../../errors/gateway-error.ts";
import type { CallerIngress } from "../traffic-kind.ts";

/** What the HTTP adapter hands the engine for one `POST /a2a/<agent>` or `POST /a2a`: nothing transport-specific. */
export interface A2aIngress extends CallerIngress {
  /** The agent named in the path; undefined: the virtual agent `/a2a`, which routes by capability. */
  readonly agent: string | undefined;
  /** The origin the request came in on: the gateway's URL for the agent is built on it. */
  readonly origin: string;
}

/**
 * The answer: one JSON-RPC response (the agent's, or the gateway's own), an SSE stream of the
 * agent's responses, or a refusal the adapter renders in JSON-RPC's envelope with the request's id.
 */
export type A2aReply =
  | { readonly kind: "json"; readonly body: object }
  | { readonly kind: "stream"; readonly body: ReadableStream<Uint8Array> }
  | { readonly kind: "error"; readonly error: GatewayError; readonly id: string | number | null };
