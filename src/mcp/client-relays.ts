import { GatewayError } from "../errors/gateway-error.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import type { ServerRequestAnswer, UpstreamServerRequest } from "./upstream-client.ts";

/**
 * Requests the gateway relays to stateful-era clients (elicitation, sampling, roots) while one of
 * their requests runs, waiting for the answer the client POSTs back in the same session. The
 * answer must reach the isolate that asked: the waiting request is held here, in memory, for as
 * long as the client's request that caused it stays open — never longer.
 */
export class ClientRelays {
  readonly #waiting = new Map<string, (answer: ServerRequestAnswer) => void>();
  #next = 0;

  /**
   * Sends `request` to the client through `send` under a gateway-minted id and waits for the
   * client's answer, until `signal` ends the request that caused it.
   */
  ask(session: string, request: UpstreamServerRequest, send: (message: Readonly<Record<string, unknown>>) => void, signal: AbortSignal): Promise<ServerRequestAnswer> {
    if (signal.aborted) return Promise.reject(new GatewayError("client_closed", "The request ended before its client could be asked."));
    const id = `sluice-${++this.#next}-${crypto.randomUUID()}`;
    const key = `${session} ${id}`;
    return new Promise<ServerRequestAnswer>((resolve, reject) => {
      const onAbort = () => {
        this.#waiting.delete(key);
        reject(new GatewayError("client_closed", "The request ended before its client answered."));
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.#waiting.set(key, (answer) => {
        signal.removeEventListener("abort", onAbort);
        this.#waiting.delete(key);
        resolve(answer);
      });
      send({ jsonrpc: "2.0", id, method: request.method, ...(request.params !== undefined ? { params: request.params } : {}) });
    });
  }

  /** Delivers a client's JSON-RPC response; false when no request of `session` waits for its id. */
  answer(session: string, response: ClientResponse): boolean {
    const deliver = this.#waiting.get(`${session} ${String(response.id)}`);
    if (!deliver) return false;
    deliver("error" in response ? { error: response.error } : { result: response.result });
    return true;
  }

  /** How many relayed requests wait (for tests and the isolate's own bookkeeping). */
  get size(): number {
    return this.#waiting.size;
  }
}

/** A JSON-RPC response a client sent: the answer to a request the gateway relayed to it. */
export type ClientResponse = { readonly id: string | number; readonly result: unknown } | { readonly id: string | number; readonly error: { readonly code: number; readonly message: string } };

/** The message as a JSON-RPC response, or undefined when it is a request or a notification. */
export function clientResponseOf(body: unknown): ClientResponse | undefined {
  if (!isRecord(body) || body.jsonrpc !== "2.0" || "method" in body) return undefined;
  if (!(typeof body.id === "string" || typeof body.id === "number")) return undefined;
  if ("result" in body) return { id: body.id, result: body.result };
  if (isRecord(body.error) && typeof body.error.code === "number") return { id: body.id, error: { code: body.error.code, message: String(body.error.message ?? "") } };
  return undefined;
}
