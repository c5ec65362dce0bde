import { describe, expect, it } from "vitest";
import { CardRegistryService, FAILURE_RETRY_MS, type CardFetch, type CardRecord, type CardStore, type CardTarget } from "../../../src/a2a/card-registry-service.ts";
import type { EgressPolicy } from "../../../src/egress/egress-guard.ts";
import { FakeAlarmStorage } from "../support/fake-alarm-storage.ts";
import { FakeClock } from "../support/fixtures.ts";
import { cardV03, cardV1 } from "./cards.ts";

const REFRESH = 60_000;
const target: CardTarget = { agent: "echo", url: "https://agent.test/.well-known/agent-card.json", refreshMs: REFRESH };

class MemoryCardStore implements CardStore {
  target: CardTarget | undefined;
  record: CardRecord = { card: undefined, lastFailure: undefined };
  constructor(readonly alarm: FakeAlarmStorage) {}
  transaction<T>(fn: () => T): T {
    return fn();
  }
  loadTarget() {
    return this.target;
  }
  saveTarget(t: CardTarget) {
    this.target = t;
  }
  loadRecord() {
    return this.record;
  }
  saveRecord(r: CardRecord) {
    this.record = r;
  }
  async drop() {
    this.target = undefined;
    this.record = { card: undefined, lastFailure: undefined };
    this.alarm.at = null;
  }
}

/** A fake agent: answers each fetch with the next body (JSON unless a string), recording what it was sent. */
function fakeAgent(...answers: (unknown | Response)[]) {
  const calls: { url: string; headers: Headers }[] = [];
  const fetchFn: CardFetch = async (url, init) => {
    calls.push({ url, headers: new Headers(init.headers) });
    const next = answers.length > 1 ? answers.shift() : answers[0];
    return next instanceof Response ? next : new Response(typeof next === "string" ? next : JSON.stringify(next), { status: 200 });
  };
  return { calls, fetchFn };
}

function setup(egress: EgressPolicy = { allow: [] }, secrets: Record<string, string> = {}) {
  const clock = new FakeClock();
  const alarm = new FakeAlarmStorage();
  const store = new MemoryCardStore(alarm);
  const registry = new CardRegistryService({ store, alarm, clock, egress: () => egress, secret: (n) => secrets[n] });
  return { clock, alarm, store, registry };
}

describe("CardRegistryService", () => {
  it("fetches only on its alarm: watch arms it at once, reads never fetch", async () => {
    const { clock, alarm, registry } = setup();
    const agent = fakeAgent(cardV1());
    const first = await registry.watch(target);
    expect(first).toMatchObject({ watching: true, card: undefined, nextFetchAt: clock.now() });
    await registry.state();
    await registry.watch(target);
    expect(agent.calls).toHaveLength(0);
    await registry.alarm(agent.fetchFn);
    expect(agent.calls).toHaveLength(1);
    expect(agent.calls[0]?.headers.get("a2a-version")).toBe("1.0");
    const after = await registry.state();
    expect(after.card?.view.jsonRpc).toEqual({ "1.0": "https://agent.test/rpc" });
    expect(after.card?.fetchedAt).toBe(clock.now());
    expect(alarm.at).toBe(clock.now() + REFRESH);
  });

  it("refreshes on the alarm and keeps the last good card when a refresh fails, with the reasons", async () => {
    const { clock, alarm, registry } = setup();
    await registry.watch(target);
    await registry.alarm(fakeAgent(cardV1()).fetchFn);
    const good = (await registry.state()).card;
    clock.advance(REFRESH);
    await registry.alarm(fakeAgent(cardV1({ supportedInterfaces: [] })).fetchFn);
    const s = await registry.state();
    expect(s.card).toEqual(good);
    expect(s.lastFailure?.at).toBe(clock.now());
    expect(s.lastFailure?.reasons.join(" ")).toMatch(/supportedInterfaces/);
    expect(alarm.at).toBe(clock.now() + Math.min(REFRESH, FAILURE_RETRY_MS));
    // A later good card replaces it and clears the failure.
    clock.advance(FAILURE_RETRY_MS);
    await registry.alarm(fakeAgent(cardV03()).fetchFn);
    const next = await registry.state();
    expect(next.card?.view.shape).toBe("0.3");
    expect(next.lastFailure).toBeUndefined();
  });

  it("records failures without a card: status, not JSON, a redirect, unreachable", async () => {
    const cases: [unknown, RegExp][] = [
      [new Response("no", { status: 404 }), /status 404/],
      ["{not json", /not JSON/],
      [new Response(null, { status: 302, headers: { location: "http://169.254.169.254/" } }), /redirects are not followed/],
    ];
    for (const [answer, reason] of cases) {
      const { registry } = setup();
      await registry.watch(target);
      await registry.alarm(fakeAgent(answer).fetchFn);
      const s = await registry.state();
      expect(s.card).toBeUndefined();
      expect(s.lastFailure?.reasons.join(" ")).toMatch(reason);
    }
    const { registry } = setup();
    await registry.watch(target);
    await registry.alarm(async () => {
      throw new TypeError("connection refused");
    });
    expect((await registry.state()).lastFailure?.reasons).toEqual(["unreachable: TypeError"]);
  });

  it("passes the card URL and the card's endpoints through the egress guard", async () => {
    const { registry } = setup();
    await registry.watch({ ...target, url: "http://127.0.0.1:9/card" });
    const agent = fakeAgent(cardV1());
    await registry.alarm(agent.fetchFn);
    expect(agent.calls).toHaveLength(0);
    expect((await registry.state()).lastFailure?.reasons[0]).toMatch(/^egress_refused/);

    const second = setup();
    await second.registry.watch(target);
    await second.registry.alarm(fakeAgent(cardV1({ supportedInterfaces: [{ url: "http://169.254.169.254/rpc", protocolBinding: "JSONRPC", protocolVersion: "1.0" }] })).fetchFn);
    const s = await second.registry.state();
    expect(s.card).toBeUndefined();
    expect(s.lastFailure?.reasons[0]).toMatch(/^egress_refused: the A2A 1.0 JSON-RPC endpoint/);
  });

  it("sends the agent's credential only when the target carries it, and fails without the secret", async () => {
    const { registry } = setup({ allow: [] }, { AGENT_KEY: "s3cret" });
    await registry.watch(target);
    const plain = fakeAgent(cardV1());
    await registry.alarm(plain.fetchFn);
    expect(plain.calls[0]?.headers.get("authorization")).toBeNull();

    await registry.watch({ ...target, credential: { secret: "AGENT_KEY", scheme: "bearer" } });
    const authed = fakeAgent(cardV1());
    await registry.alarm(authed.fetchFn);
    expect(authed.calls[0]?.headers.get("authorization")).toBe("Bearer s3cret");

    await registry.watch({ ...target, credential: { secret: "MISSING", scheme: "x-api-key" } });
    const never = fakeAgent(cardV1());
    await registry.alarm(never.fetchFn);
    expect(never.calls).toHaveLength(0);
    expect((await registry.state()).lastFailure?.reasons).toEqual(["credential_missing: MISSING"]);
  });

  it("arms a changed target at once and an unchanged one when its card is due; unwatch stops it", async () => {
    const { clock, alarm, registry } = setup();
    await registry.watch(target);
    await registry.alarm(fakeAgent(cardV1()).fetchFn);
    const due = alarm.at;
    clock.advance(1000);
    await registry.watch(target);
    expect(alarm.at).toBe(due);
    await registry.watch({ ...target, url: "https://agent.test/other-card.json" });
    expect(alarm.at).toBe(clock.now());
    await registry.unwatch();
    expect(await registry.state()).toMatchObject({ watching: false, card: undefined });
    const agent = fakeAgent(cardV1());
    await registry.alarm(agent.fetchFn);
    expect(agent.calls).toHaveLength(0);
  });
});
