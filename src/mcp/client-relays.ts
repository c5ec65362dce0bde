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

/**
 * Stateful-era requests in flight, by session and JSON-RPC id, so that the client's
 * `notifications/cancelled` (its way to cancel in that era) ends the request it names. The
 * notification arrives as another HTTP request; it only settles a promise the running request
 * created and awaits, so the request ends itself — the runtime lets no request touch another's
 * connections.
 */
export class InFlightRequests {
  readonly #running = new Map<string, () => void>();

  /** Registers a running request; `onCancel` runs in the request's own context. Returns its unregistration. */
  register(session: string, id: string | number, onCancel: () => void): () => void {
    const key = `${session} ${typeof id}:${String(id)}`;
    let cancel!: () => void;
    const cancelled = new Promise<void>((resolve) => (cancel = resolve));
    void cancelled.then(onCancel);
    this.#running.set(key, cancel);
    return () => {
      if (this.#running.get(key) === cancel) this.#running.delete(key);
    };
  }

  /** Cancels the request `id` of `session`; false when none such runs here. */
  cancel(session: string, id: unknown): boolean {
    if (typeof id !== "string" && typeof id !== "number") return false;
    const key = `${session} ${typeof id}:${String(id)}`;
    const cancel = this.#running.get(key);
    if (!cancel) return false;
    this.#running.delete(key);
    cancel();
    return true;
  }
}
