import { GatewayError } from "../errors/gateway-error.ts";
import type { NeutralEvent } from "../protocol/neutral.ts";
import type { StreamEventFilter, StreamEventPlugin } from "./plugin.ts";

interface Stage {
  readonly name: string;
  readonly bound: number;
  readonly filter: StreamEventFilter;
  /** Events in minus events out: what the filter holds now. */
  held: number;
}

/**
 * One stream's `stream_event_safe` plugins, in order: each decoded neutral event passes through
 * every filter before the client's encoder sees it. The chain enforces each plugin's declared
 * hold-back bound: a filter that holds more ends the stream as the gateway's fault (the client
 * gets an error event, never a silent truncation). An error event is never held: whatever the
 * filters still hold is released first, then the error passes, and the chain is over.
 */
export class StreamEventChain {
  readonly #stages: readonly Stage[];
  #over = false;

  constructor(plugins: readonly StreamEventPlugin[]) {
    this.#stages = plugins.map((p) => ({ name: p.name, bound: p.maxHoldBack, filter: p.open(), held: 0 }));
  }

  /** What the client's encoder gets for one decoded event, now. @throws GatewayError internal_error past a hold-back bound. */
  push(ev: NeutralEvent): readonly NeutralEvent[] {
    if (this.#over) return [ev];
    if (ev.type === "error") return [...this.end(), ev];
    let events: readonly NeutralEvent[] = [ev];
    for (const stage of this.#stages) {
      const out: NeutralEvent[] = [];
      for (const e of events) {
        const passed = stage.filter.event(e);
        stage.held += 1 - passed.length;
        if (stage.held > stage.bound) throw new GatewayError("internal_error", "The gateway failed while streaming the response.", { cause: `plugin ${stage.name} held back more than its ${stage.bound} events` });
        // A filter may release more than it took in (what it held): the count only goes down to zero.
        if (stage.held < 0) stage.held = 0;
        out.push(...passed);
      }
      events = out;
      if (events.length === 0) break;
    }
    return events;
  }

  /** Releases what every filter still holds, in order (the stream ends); later events pass untouched. */
  end(): readonly NeutralEvent[] {
    if (this.#over) return [];
    this.#over = true;
    let events: NeutralEvent[] = [];
    for (const stage of this.#stages) {
      const out: NeutralEvent[] = [];
      for (const e of events) out.push(...stage.filter.event(e));
      out.push(...stage.filter.end());
      stage.held = 0;
      events = out;
    }
    return events;
  }
}
