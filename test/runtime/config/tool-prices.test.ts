import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/load-config.ts";
import { ToolPrices } from "../../../src/publication/tool-prices.ts";
import { issuesOf } from "../support/config-issues.ts";
import { bundled, textsWith } from "../support/fixtures.ts";


/** The bundled config with two MCP servers and the given `mcp.prices`. */
function texts(prices: unknown[]) {
  const g = bundled("gateway");
  g.mcp = { servers: [{ name: "docs", url: "https://docs.example.com/mcp", era: "stateless" }, { name: "fs", url: "https://fs.example.com/mcp", era: "stateful", connectCheck: true }] };
  const p = bundled("publication");
  p.mcp = { policy: { revision: "r1", rules: [] }, prices };
  return textsWith({ gateway: g, publication: p });
}

const price = (perCall: number, currency = "USD") => ({ version: "t-1", currency, perCall });

describe("mcp.prices", () => {
  it("loads rules as micro-units, and the first matching rule decides", () => {
    const cfg = loadConfig(texts([
      { id: "search", servers: ["docs"], names: ["search"], price: price(0.002), requests: { perMinute: 30, burst: 10 } },
      { id: "rest", servers: ["*"], names: ["read_*"], price: price(0.0005) },
      { id: "rate-only", servers: ["fs"], names: ["*"], requests: { perMinute: 6, burst: 1 } },
    ]));
    expect(cfg.gateway.mcp.servers[1]!.connectCheck).toBe(true);
    expect(cfg.gateway.mcp.servers[0]!.connectCheck).toBe(false);
    const prices = new ToolPrices(cfg.publication.mcp!.prices);
    expect(prices.of("docs", "search")).toEqual({ rule: "search", price: { version: "t-1", currency: "USD", micros: 2000 }, requests: { perMinute: 30, burst: 10 } });
    expect(prices.of("fs", "read_file")).toMatchObject({ rule: "rest", price: { micros: 500 }, requests: undefined });
    expect(prices.of("fs", "write_file")).toMatchObject({ rule: "rate-only", price: undefined, requests: { perMinute: 6, burst: 1 } });
    expect(prices.of("docs", "write")).toBeUndefined();
    // A name's dots are literal, not wildcards.
    expect(new ToolPrices([{ id: "a", servers: ["docs"], names: ["a.b"], price: { version: "v", currency: "USD", perCall: 1 } }]).of("docs", "aXb")).toBeUndefined();
  });

  it("defaults to no prices", () => {
    const p = bundled("publication");
    p.mcp = { policy: { revision: "r1", rules: [] } };
    expect(loadConfig(textsWith({ publication: p })).publication.mcp!.prices).toEqual([]);
  });

  it("refuses duplicate ids, unknown servers, a second currency, empty rules and sub-micro prices, naming each", () => {
    const issues = issuesOf(() =>
      loadConfig(texts([
        { id: "a", servers: ["docs"], names: ["x"], price: price(0.01) },
        { id: "a", servers: ["nosuch"], names: ["x"], price: price(0.01) },
        { id: "eur", servers: ["docs"], names: ["y"], price: price(0.01, "EUR") },
      ])),
    );
    expect(issues.map((i) => `${i.path}: ${i.message}`)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^mcp\.prices: duplicate price rule id "a"/),
        expect.stringMatching(/^mcp\.prices\[1\]\.servers: .*no server "nosuch"/),
        expect.stringMatching(/^mcp\.prices\[2\]\.price\.currency: one currency/),
      ]),
    );
    const shape = issuesOf(() => loadConfig(texts([{ id: "empty", servers: ["docs"], names: ["x"] }, { id: "tiny", servers: ["docs"], names: ["x"], price: price(0.0000001) }])));
    expect(shape.map((i) => i.path)).toEqual(expect.arrayContaining(["mcp.prices[0]", "mcp.prices[1].price.perCall"]));
  });
});
