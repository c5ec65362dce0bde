/**
 * How the executor reaches a backend's connection: `connectCheck` turning a refused connection into
 * known-zero evidence, and a backend with `tls` reached through its binding.
 */
import { describe, expect, it } from "vitest";
import { breakerReport } from "../../../src/invoker/breaker-outcome.ts";
import type { PinnedSnapshot } from "../../../src/snapshot/pinned-snapshot.ts";
import { harness, live, okBody, plan, snapshot } from "../support/executor-harness.ts";

/** The snapshot with each backend changed by `f`, its pools pointing at the changed backends. */
function withBackends(snap: PinnedSnapshot, f: (b: PinnedSnapshot["backends"] extends ReadonlyMap<string, infer B> ? B : never) => unknown): PinnedSnapshot {
  const backends = new Map([...snap.backends].map(([id, b]) => [id, f(b)]));
  const pools = new Map([...snap.pools].map(([n, p]) => [n, { ...p, members: p.members.map((m) => ({ ...m, backend: backends.get(m.backend.id)! })) }]));
  return { ...snap, backends, pools } as unknown as PinnedSnapshot;
}

describe("GatewayExecutor: connectCheck turns a refused connection into known-zero evidence", () => {
  async function checked(names: string[]) {
    return withBackends(await snapshot(names.map((n, i) => ({ name: n, port: 9001 + i })), "round-robin"), (b) => ({ ...b, connectCheck: true }));
  }

  it("never sends to a backend whose connection would not open, and retries elsewhere", async () => {
    const snap = await checked(["a", "b"]);
    const { executor: checkedRun, seen, attempts } = harness(() => okBody(), undefined, { sleep: async () => {}, preconnect: async (_host, port) => port !== 9001 });
    const a = plan();
    const p3 = { ...a.plan, retry: { maxAttempts: 3 } };
    for (let i = 0; i < 4; i++) await checkedRun.execute(p3, a.request, { snapshot: snap, clientSignal: live() });
    expect(seen.every((s) => new URL(s.url).port === "9002")).toBe(true);
    expect(seen).toHaveLength(4);
    const refused = attempts.filter((x) => x.outcome === "connect_failed");
    expect(refused.length).toBeGreaterThan(0);
    expect(refused.every((x) => x.evidence?.class === "known_zero" && x.evidence.reason === "connect_failed")).toBe(true);
  });
});

describe("GatewayExecutor: a backend with tls is reached through its binding", () => {
  async function withTls(binding: string) {
    return withBackends(await snapshot([{ name: "a", port: 9001 }, { name: "b", port: 9002 }], "round-robin"), (b) => (b.name === "a" ? { ...b, connectCheck: true, tls: { binding } } : b));
  }

  function run(fetchers: Record<string, typeof fetch>) {
    const h = harness(() => okBody(), undefined, { sleep: async () => {}, preconnect: async () => true, tlsFetchers: (name) => fetchers[name] });
    return {
      /** URLs sent over the plain fetch (not through a binding), so far. */
      get plain() {
        return h.seen.map((x) => x.url);
      },
      attempts: h.attempts,
      run: h.executor,
    };
  }

  it("sends through the binding, checking the handshake first with a bodiless HEAD", async () => {
    const through: { method: string; url: string; body: boolean }[] = [];
    const r = run({
      BACKEND_TLS: async (input, init) => {
        through.push({ method: init?.method ?? "GET", url: String(input), body: init?.body != null });
        return init?.method === "HEAD" ? new Response(null, { status: 405 }) : okBody();
      },
    });
    const a = plan();
    for (let i = 0; i < 4; i++) await r.run.execute(a.plan, a.request, { snapshot: await withTls("BACKEND_TLS"), clientSignal: live() });
    const posts = through.filter((t) => t.method === "POST");
    expect(posts.length).toBeGreaterThan(0);
    expect(posts.every((p) => new URL(p.url).port === "9001")).toBe(true);
    // Every POST through the binding followed its HEAD; the HEAD carried no body.
    expect(through.filter((t) => t.method === "HEAD")).toHaveLength(posts.length);
    expect(through.filter((t) => t.method === "HEAD").every((t) => !t.body)).toBe(true);
    // The other backend went over the plain fetch.
    expect(r.plain.every((u) => new URL(u).port === "9002")).toBe(true);
  });

  it("a failed handshake is known-zero upstream_unreachable: nothing sent, retried elsewhere, counted against the backend", async () => {
    const through: string[] = [];
    const r = run({
      BACKEND_TLS: async (_input, init) => {
        through.push(init?.method ?? "GET");
        throw new TypeError("handshake refused");
      },
    });
    const a = plan();
    const p3 = { ...a.plan, retry: { maxAttempts: 3 } };
    for (let i = 0; i < 4; i++) await r.run.execute(p3, a.request, { snapshot: await withTls("BACKEND_TLS"), clientSignal: live() });
    expect(through.every((m) => m === "HEAD")).toBe(true);
    expect(r.plain).toHaveLength(4);
    const refused = r.attempts.filter((x) => x.backendName === "a");
    expect(refused.length).toBeGreaterThan(0);
    for (const x of refused) {
      expect(x).toMatchObject({ outcome: "connect_failed", errorCode: "upstream_unreachable", evidence: { class: "known_zero", reason: "connect_failed" } });
      expect(breakerReport(x)).toBe("failure");
    }
  });

  it("a binding the Worker lacks is known-zero and names the binding, never a plain fetch to the address", async () => {
    const r = run({});
    const a = plan();
    const p3 = { ...a.plan, retry: { maxAttempts: 3 } };
    for (let i = 0; i < 4; i++) await r.run.execute(p3, a.request, { snapshot: await withTls("NOT_BOUND"), clientSignal: live() });
    expect(r.plain.every((u) => new URL(u).port === "9002")).toBe(true);
    const missing = r.attempts.filter((x) => x.backendName === "a");
    expect(missing.length).toBeGreaterThan(0);
    expect(missing.every((x) => x.evidence?.class === "known_zero" && x.evidence.reason === "not_attempted")).toBe(true);
  });
});
