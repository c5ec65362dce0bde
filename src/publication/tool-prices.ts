import type { ToolPriceRuleConfig } from "../config/tool-price-schema.ts";
import type { ScopeLimits } from "../ledger/ledger.ts";

/** What the first matching rule of `mcp.prices` says about one tool. */
export interface ToolPricing {
  readonly rule: string;
  /** Per call, in integer micro-units; undefined when the rule only limits the rate. */
  readonly price: { readonly version: string; readonly currency: string; readonly micros: number } | undefined;
  /** The rule's per-key call rate, as the ledger's request bucket. */
  readonly requests: ScopeLimits["requests"] | undefined;
}

const globRe = (g: string) => new RegExp(`^${g.replace(/[.+?^${}()|[\]\\/:]/g, "\\$&").replace(/\*/g, ".*")}$`, "s");

/** The publication's tool prices, compiled once: first matching rule wins. */
export class ToolPrices {
  readonly #rules: readonly { readonly servers: readonly RegExp[]; readonly names: readonly RegExp[]; readonly pricing: ToolPricing }[];

  constructor(rules: readonly ToolPriceRuleConfig[]) {
    this.#rules = rules.map((r) => ({
      servers: r.servers.map(globRe),
      names: r.names.map(globRe),
      pricing: {
        rule: r.id,
        price: r.price ? { version: r.price.version, currency: r.price.currency, micros: r.price.perCall } : undefined,
        requests: r.requests ? { perMinute: r.requests.perMinute, burst: r.requests.burst } : undefined,
      },
    }));
  }

  /** True when no rule prices or limits anything: no call needs the ledger. */
  get empty(): boolean {
    return this.#rules.length === 0;
  }

  /** The pricing of a tool (its upstream name on `server`); undefined: free and unlimited. */
  of(server: string, name: string): ToolPricing | undefined {
    for (const r of this.#rules) if (r.servers.some((s) => s.test(server)) && r.names.some((n) => n.test(name))) return r.pricing;
    return undefined;
  }
}
