import type { Workload } from "../../attribution/workload.ts";
import type { TraceParent } from "../../context/trace-context.ts";
import type { GatewayError } from "../../errors/gateway-error.ts";
import type { HeaderReader } from "../../protocol/mcp/stateless-request.ts";

/** What the HTTP adapter hands the engine for one MCP request: nothing transport-specific. */
export interface McpIngress {
  readonly requestId: string;
  readonly receivedAt: number;
  readonly apiKey: string | undefined;
  /** The `Authorization: Bearer` credential alone: an OAuth access token is only read from there. */
  readonly bearer?: string | undefined;
  /** The request's headers, read only to cross-check the body (never to decide). */
  readonly headers: HeaderReader;
  readonly readBody: () => Promise<unknown>;
  /** `/mcp/<server>`: that server alone, names unchanged; undefined: the virtual server. */
  readonly server: string | undefined;
  readonly traceParent?: TraceParent | undefined;
  readonly waitUntil: (p: Promise<unknown>) => void;
  /**
   * Sends a message to the client before the answer (progress, logging, a relayed request). The
   * first one turns the answer into a stream; the reply then ends that stream.
   */
  readonly send: (message: Readonly<Record<string, unknown>>) => void;
  /** Turns the answer into a stream before any message (a stream that carries only what comes later). */
  readonly open: () => void;
  /** The workload behind the call, from the trusted headers configured for it. */
  readonly workload?: Workload | undefined;
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
