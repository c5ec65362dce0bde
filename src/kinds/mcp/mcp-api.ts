import type { GatewayError } from "../../errors/gateway-error.ts";
import type { CallerIngress } from "../traffic-kind.ts";

/** What the HTTP adapter hands the engine for one MCP request (its headers are read only to cross-check the body, never to decide). */
export interface McpIngress extends CallerIngress {
  /** `/mcp/<server>`: that server alone, names unchanged; undefined: the virtual server. */
  readonly server: string | undefined;
  /**
   * Sends a message to the client before the answer (progress, logging, a relayed request). The
   * first one turns the answer into a stream; the reply then ends that stream.
   */
  readonly send: (message: Readonly<Record<string, unknown>>) => void;
  /** Turns the answer into a stream before any message (a stream that carries only what comes later). */
  readonly open: () => void;
  /** `GET`: a stateful-era client's stream of what its servers send outside its requests. */
  readonly httpMethod: "POST" | "GET";
  /**
   * The origin the request came in on (an approval's status page is named under it unless
   * configured); read only when an approval is opened, so the URL is not parsed for every request.
   */
  readonly origin?: (() => string) | undefined;
}

/**
 * The answer: a JSON-RPC result (200), an accepted notification (202, no body), or a refusal the
 * adapter renders in JSON-RPC's envelope, answering the request's id when it was read.
 */
export type McpReply =
  | { readonly kind: "result"; readonly status: 200 | 202; readonly body: unknown; readonly headers?: Readonly<Record<string, string>> | undefined }
  | {
      readonly kind: "error";
      readonly error: GatewayError;
      readonly id: string | number | null;
      /** The HTTP status when the error is in-band (a server's own refusal, answered as the server would); else the code's. */
      readonly status?: number | undefined;
    };
