import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { AgentCardRegistry } from "../../../durable-objects/agent-card-registry.ts";
import { SqliteAgentCardStore } from "../../../durable-objects/sqlite-agent-card-store.ts";
import { FAILURE_RETRY_MS, type CardFetch, type CardRegistryView, type CardTarget } from "../../../src/a2a/card-registry-service.ts";
import { cardV1 } from "../a2a/cards.ts";

/** An hour: after a good fetch the object's own alarm stays away while a test runs; the tests run it themselves. */
const REFRESH_MS = 3_600_000;
const target = (agent: string): CardTarget => ({ agent, url: `https://agent.test/${agent}/.well-known/agent-card.json`, refreshMs: REFRESH_MS });

/** What the fake agent serves: a card, or a failure. */
interface Served {
  body: unknown;
  status: number;
  calls: number;
}

const fakeFetch =
  (served: Served): CardFetch =>
  async () => {
    served.calls++;
    return new Response(JSON.stringify(served.body), { status: served.status, headers: { "content-type": "application/json" } });
  };

/**
 * Watches `agent` with its fetch replaced first (a watch arms the alarm at once, and the object's
 * own alarm may fire before the test runs it), then runs the alarm and waits for the first fetch's
 * outcome to be recorded.
 */
async function watched(agent: string, served: Served): Promise<DurableObjectStub<AgentCardRegistry>> {
  const stub = env.AGENT_CARD_REGISTRY.getByName(agent);
  await runInDurableObject(stub, async (instance: AgentCardRegistry) => {
    instance.cardFetch = fakeFetch(served);
    await instance.watch(target(agent));
  });
  await runDurableObjectAlarm(stub);
  await recorded(stub, (v) => v.card !== undefined || v.lastFailure !== undefined);
  return stub;
}

/** Polls the registry until `pred` holds (an alarm that fired on its own may still be finishing). */
async function recorded(stub: DurableObjectStub<AgentCardRegistry>, pred: (v: CardRegistryView) => boolean): Promise<CardRegistryView> {
  const end = Date.now() + 5000;
  for (;;) {
    const v = await stub.state();
    if (pred(v)) return v;
    if (Date.now() > end) throw new Error(`the registry never reached the expected state: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("AgentCardRegistry Durable Object", () => {
  it("fetches the card on its alarm, stores it in SQLite, and a new instance over the same storage serves it", async () => {
    const served: Served = { body: cardV1({ name: "kept" }), status: 200, calls: 0 };
    const stub = await watched("registry-store", served);
    const view = await stub.state();
    expect(view).toMatchObject({ watching: true, lastFailure: undefined });
    expect(view.card!.view.name).toBe("kept");
    expect(served.calls).toBeGreaterThanOrEqual(1); // the object's own alarm may have run first
    await runInDurableObject(stub, async (_instance: AgentCardRegistry, state) => {
      const rows = state.storage.sql.exec<{ target: string; record: string }>("SELECT target, record FROM card").toArray();
      expect(rows).toHaveLength(1);
      expect(JSON.parse(rows[0]!.target)).toEqual(target("registry-store"));
      expect(JSON.parse(rows[0]!.record).card.view.name).toBe("kept");
      // What a restarted object reads: a fresh store and a fresh instance over the same storage.
      expect(new SqliteAgentCardStore(state.storage).loadRecord().card!.view.name).toBe("kept");
      const fresh = new AgentCardRegistry(state, env);
      const again = await fresh.state();
      expect(again.card).toEqual(view.card);
      expect(again.targetKey).toBe(view.targetKey);
    });
  });

  it("refreshes on the alarm and re-arms refreshMs later", async () => {
    const served: Served = { body: cardV1({ name: "first" }), status: 200, calls: 0 };
    const stub = await watched("registry-refresh", served);
    const first = await stub.state();
    const calls = served.calls;
    expect(first.card!.view.name).toBe("first");
    expect(first.nextFetchAt).toBe(first.card!.fetchedAt + REFRESH_MS);

    served.body = cardV1({ name: "second", skills: [{ id: "only", name: "Only", description: "The one skill.", tags: [], examples: [] }] });
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const second = await stub.state();
    expect(second.card!.view.name).toBe("second");
    expect(second.card!.view.skills.map((s) => s.id)).toEqual(["only"]);
    expect(second.card!.fetchedAt).toBeGreaterThanOrEqual(first.card!.fetchedAt);
    expect(second.nextFetchAt).toBe(second.card!.fetchedAt + REFRESH_MS);
    expect(served.calls).toBe(calls + 1);
  });

  it("a failed fetch keeps the last good card, records why, and re-arms sooner", async () => {
    const served: Served = { body: cardV1({ name: "good" }), status: 200, calls: 0 };
    const stub = await watched("registry-failure", served);
    const good = (await stub.state()).card!;

    served.body = { name: 42, skills: "none" };
    const before = Date.now();
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const invalid = await stub.state();
    expect(invalid.card).toEqual(good);
    expect(invalid.lastFailure!.reasons.length).toBeGreaterThan(0);
    expect(invalid.lastFailure!.at).toBeGreaterThanOrEqual(before);
    expect(invalid.nextFetchAt).toBe(invalid.lastFailure!.at + FAILURE_RETRY_MS);

    served.status = 503;
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const down = await stub.state();
    expect(down.card).toEqual(good);
    expect(down.lastFailure!.reasons).toEqual(["status 503"]);

    // A good fetch clears the failure.
    served.status = 200;
    served.body = cardV1({ name: "good-again" });
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const back = await stub.state();
    expect(back).toMatchObject({ lastFailure: undefined });
    expect(back.card!.view.name).toBe("good-again");
    expect(back.nextFetchAt).toBe(back.card!.fetchedAt + REFRESH_MS);
  });

  it("unwatch deletes the card and stops the alarm", async () => {
    const stub = await watched("registry-unwatch", { body: cardV1(), status: 200, calls: 0 });
    await stub.unwatch();
    expect(await stub.state()).toMatchObject({ watching: false, card: undefined, lastFailure: undefined, nextFetchAt: undefined });
    expect(await runDurableObjectAlarm(stub)).toBe(false);
  });
});
