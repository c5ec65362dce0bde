import { describe, expect, it } from "vitest";
import { APPROVAL_RETENTION_MS, approvalId, callKey, type Approval, type ApprovalFacts } from "../../../src/approvals/approval-desk.ts";
import { ApprovalDeskService, type ApprovalDeskObjectStore } from "../../../src/approvals/approval-desk-service.ts";
import { FakeAlarmStorage } from "../support/fake-alarm-storage.ts";
import { FakeClock } from "../support/fixtures.ts";

/** Approvals in memory, with counted transactions. */
class MemoryDeskStore implements ApprovalDeskObjectStore {
  readonly rows = new Map<string, Approval>();
  transactions = 0;
  transaction<T>(fn: () => T): T {
    this.transactions++;
    return fn();
  }
  get(id: string) {
    return this.rows.get(id);
  }
  put(a: Approval) {
    this.rows.set(a.id, a);
  }
  all() {
    return [...this.rows.values()];
  }
  ofCall(key: string) {
    return this.all().filter((a) => callKey(a) === key);
  }
  delete(id: string) {
    this.rows.delete(id);
  }
}

const facts: ApprovalFacts = { principal: { tenant: "acme", key: "k1" }, server: "files", tool: "delete", toolDigest: "sha256:t", argumentsDigest: "sha256:a", policyRevision: "p1", rule: "risky" };
const TTL = 60_000;
const init = (id = approvalId("acme")) => ({ id, statusUrl: `http://127.0.0.1/approvals/${id}`, ttlMs: TTL });

describe("ApprovalDeskService", () => {
  const make = (alarmAt: number | null = null) => {
    const store = new MemoryDeskStore();
    const alarm = new FakeAlarmStorage(alarmAt);
    const clock = new FakeClock();
    return { store, alarm, clock, desk: new ApprovalDeskService(store, alarm, clock) };
  };

  it("arms the alarm for a new approval's expiry when none is set, on its own clock", async () => {
    const { alarm, clock, desk } = make();
    const out = await desk.request(facts, init());
    expect(out).toMatchObject({ created: true, approval: { state: "pending", createdAt: clock.now(), expiresAt: clock.now() + TTL } });
    expect(alarm.log).toEqual(["get", `set ${clock.now() + TTL}`]);
  });

  it("leaves a set alarm alone, and does no alarm work for a call that already has its approval", async () => {
    const { alarm, desk } = make(5);
    await desk.request(facts, init());
    expect(alarm.log).toEqual(["get"]);
    expect((await desk.request(facts, init())).created).toBe(false);
    expect(alarm.log).toEqual(["get"]);
    expect(alarm.at).toBe(5);
  });

  it("on its alarm expires what is due and re-arms for when the ended approval may be dropped", async () => {
    const { alarm, clock, desk } = make();
    const { approval } = await desk.request(facts, init());
    clock.advance(TTL);
    await desk.alarm();
    expect(desk.get(approval.id)?.state).toBe("expired");
    expect(alarm.at).toBe(approval.expiresAt + APPROVAL_RETENTION_MS);
  });

  it("drops an approval past the retention on its alarm, and leaves the alarm unset when nothing is left", async () => {
    const { store, alarm, clock, desk } = make();
    const { approval } = await desk.request(facts, init());
    clock.advance(TTL + APPROVAL_RETENTION_MS);
    alarm.log.length = 0;
    await desk.alarm();
    expect(store.rows.has(approval.id)).toBe(false);
    expect(alarm.log).toEqual([]);
  });

  it("decides on its own clock, each call in one transaction: approve, claim once, finish", async () => {
    const { store, clock, desk } = make();
    const { approval } = await desk.request(facts, init());
    clock.advance(1_000);
    expect(desk.decide(approval.id, "approve", "alice", "ok")).toMatchObject({ ok: true, approval: { state: "approved", decidedAt: clock.now() } });
    expect(desk.claim(approval.id, facts, "req-1").ok).toBe(true);
    expect(desk.claim(approval.id, facts, "req-2")).toMatchObject({ ok: false, why: "executed" });
    expect(desk.finish(approval.id, "succeeded")).toMatchObject({ state: "executed" });
    expect(desk.list("executed").map((a) => a.id)).toEqual([approval.id]);
    expect(desk.cancel(approval.id, facts.principal, "late").ok).toBe(false);
    expect(store.transactions).toBe(7);
  });
});
