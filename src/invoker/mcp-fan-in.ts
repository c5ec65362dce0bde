import type { Clock } from "../deps/clock.ts";
import type { Scheduler } from "../deps/scheduler.ts";
import { toGatewayError } from "../errors/gateway-error.ts";
import { filterFor, relayedNotification, type SubscriptionFilter } from "../mcp/subscriptions.ts";
import { clientSide, type McpExchange } from "./mcp-exchange.ts";

/** How long before its request's deadline a subscription stream ends in order (the client then listens again). */
const LISTEN_MARGIN_MS = 1_000;
/** `_meta` key naming the `subscriptions/listen` request a notification belongs to (2026-07-28). */
export const SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId";

/** What a fan-in needs besides the exchange: timers, and where a server's failed subscription is logged. */
export interface FanInDeps {
  readonly clock: Clock;
  readonly scheduler: Scheduler;
  readonly log: (event: Readonly<Record<string, unknown>>) => void;
}

/**
 * The invoke phase of a subscription stream: holds each server's subscription for the client and
 * relays what the client asked for (filtered and renamed by src/mcp/subscriptions.ts), until the
 * client goes, the request's deadline comes near (the stream then ends in order and the client
 * listens again), or every server ended its side. One server's subscription failing leaves the
 * others'.
 */
export async function fanIn(call: McpExchange, deps: FanInDeps, names: readonly string[], filter: SubscriptionFilter, virtual: boolean, subscriptionId: string | number | undefined): Promise<void> {
  const { ctx } = call;
  const end = new AbortController();
  const stop = () => end.abort();
  ctx.signal.addEventListener("abort", stop, { once: true });
  const cancelTimer = deps.scheduler.schedule(Math.max(0, ctx.deadlineAt - deps.clock.now() - LISTEN_MARGIN_MS), stop);
  try {
    await Promise.all(
      names.map(async (name) => {
        const upstream = call.servers.get(name)!;
        if (!upstream.listen) return;
        try {
          await upstream.listen(filterFor(name, filter, virtual), {
            signal: end.signal,
            keepAlive: ctx.waitUntil,
            ...clientSide(call, upstream),
            onNotification: (n) => {
              const out = relayedNotification(name, n, filter, virtual);
              if (out) call.send({ jsonrpc: "2.0", method: out.method, params: subscriptionId === undefined ? out.params : { ...out.params, _meta: { [SUBSCRIPTION_ID]: subscriptionId } } });
            },
          });
        } catch (err) {
          if (!end.signal.aborted) deps.log({ kind: "mcp_subscription_failed", requestId: ctx.requestId, server: name, code: toGatewayError(err).code });
        }
      }),
    );
  } finally {
    cancelTimer();
    ctx.signal.removeEventListener("abort", stop);
    end.abort();
  }
  ctx.checkpoint();
}
