import { describe, expect, it } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import type { AttemptRecord } from "../../../src/context/attempt-record.ts";
import type { AttemptScope } from "../../../src/context/request-context.ts";
import { GatewayExecutor } from "../../../src/invoker/executor.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { LoadTracker } from "../../../src/traffic/load-tracker.ts";
import { CredentialWatch } from "../../../src/traffic/credential-watch.ts";
import type { DispatchAction } from "../../../src/engine/session-api.ts";
import type { PinnedSnapshot } from "../../../src/snapshot/pinned-snapshot.ts";
import { clock, errorOf, harness, live, okBody, plan, runner, snapshot, type Seen } from "../support/executor-harness.ts";

describe("GatewayExecutor", () => {
  it("sends only what the provider needs: its credential, identity encoding, the upstream model", async () => {
    const { executor, seen, attempts } = harness(() => okBody());
    const a = plan();
    const res = await executor.execute(a.plan, a.request, { snapshot: await snapshot([{ name: "a", port: 9001 }]), clientSignal: live() });
    expect(res.ok && res.kind).toBe("buffered");
    const s = seen[0]!;
    expect(s.url).toBe("http://127.0.0.1:9001/v1/chat/completions");
    expect([...s.headers.keys()].sort()).toEqual(["accept", "accept-encoding", "authorization", "content-type", "user-agent"]);
    expect(s.headers.get("authorization")).toBe("Bearer provider-secret");
    expect(s.headers.get("accept-encoding")).toBe("identity");
    expect(s.body.model).toBe("sim-small-upstream");
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ outcome: "success", status: 200, backendName: "a", logicalModel: "chat-small", snapshotRevision: 1 });
    expect(attempts[0]!.id).toMatch(/^att_[0-9a-f]{32}$/);
    expect(attempts[0]!.usage).toMatchObject({ inputTokens: 5, outputTokens: 2, source: "provider" });
  });

  it("uses the snapshot the request pinned, whatever is newer", async () => {
    const { executor, seen } = harness(() => okBody());
    const old = await snapshot([{ name: "old", port: 9001 }], "weighted-round-robin", 1);
    const newer = await snapshot([{ name: "new", port: 9002 }], "weighted-round-robin", 2);
    const a = plan();
    await executor.execute(a.plan, a.request, { snapshot: old, clientSignal: live() });
    await executor.execute(a.plan, a.request, { snapshot: newer, clientSignal: live() });
    expect(seen.map((s) => new URL(s.url).port)).toEqual(["9001", "9002"]);
  });

  it("spreads traffic by the pool's selector (smooth weighted round robin)", async () => {
    const { executor, seen } = harness(() => okBody());
    const snap = await snapshot([{ name: "a", port: 9001, weight: 3 }, { name: "b", port: 9002, weight: 1 }]);
    const a = plan();
    for (let i = 0; i < 40; i++) await executor.execute(a.plan, a.request, { snapshot: snap, clientSignal: live() });
    const counts = seen.reduce<Record<string, number>>((m, s) => ((m[new URL(s.url).port] = (m[new URL(s.url).port] ?? 0) + 1), m), {});
    expect(counts).toEqual({ "9001": 30, "9002": 10 });
  });

  it("narrows candidates by capability and says which feature is missing", async () => {
    const { executor, seen } = harness(() => okBody());
    const snap = await snapshot([{ name: "a", port: 9001 }]);
    const a = plan({ messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:image/png;base64,AA" } }] }] });
    const err = await executor.execute(a.plan, a.request, { snapshot: snap, clientSignal: live() }).then(errorOf);
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).code).toBe("invalid_request");
    expect((err as GatewayError).message).toContain("images");
    expect(seen).toHaveLength(0);
  });

  it("maps provider statuses to stable codes and keeps provider text internal", async () => {
    const cases: [number, string, Record<string, string>][] = [
      [429, "upstream_rate_limited", { "retry-after": "7" }],
      [503, "upstream_overloaded", {}],
      [529, "upstream_overloaded", {}],
      [500, "upstream_error", {}],
      [400, "invalid_request", {}],
    ];
    for (const [status, code, headers] of cases) {
      const { executor, attempts } = harness(() => Response.json({ error: { message: "sk-provider-detail model gpt-secret" } }, { status, headers }));
      const a = plan();
      const err = (await executor.execute(a.plan, a.request, { snapshot: await snapshot([{ name: "a", port: 9001 }]), clientSignal: live() }).then(errorOf)) as GatewayError;
      expect(err.code).toBe(code);
      expect(err.message).not.toContain("gpt-secret");
      if (status === 429) expect(err.retryAfterSeconds).toBe(7);
      expect(attempts[0]).toMatchObject({ outcome: "upstream_status", status, errorCode: code });
    }
  });

  it("classifies a network failure, a client abort and a passed deadline by signal, not by text", async () => {
    const snap = await snapshot([{ name: "a", port: 9001 }]);
    const down = harness(() => {
      throw new TypeError("fetch failed");
    });
    const a = plan();
    const e1 = (await down.executor.execute(a.plan, a.request, { snapshot: snap, clientSignal: live() }).then(errorOf)) as GatewayError;
    expect(e1.code).toBe("upstream_unreachable");
    expect(down.attempts[0]?.outcome).toBe("network_error");

    // A client gone before the attempt: nothing is opened or sent.
    const gone = harness(() => okBody());
    const ac = new AbortController();
    ac.abort();
    const e2 = (await gone.executor.execute(a.plan, a.request, { snapshot: snap, clientSignal: ac.signal }).then(errorOf)) as GatewayError;
    expect(e2.code).toBe("client_closed");
    expect(gone.seen).toHaveLength(0);
    expect(gone.attempts).toHaveLength(0);

    // A client leaving while the provider works: the upstream call is aborted, the attempt ends once.
    const leaving = new AbortController();
    const waiting = harness(
      (s) =>
        new Promise<Response>((_, reject) => {
          void s;
          leaving.signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")));
          queueMicrotask(() => leaving.abort());
        }),
    );
    const e4 = (await waiting.executor.execute(a.plan, a.request, { snapshot: snap, clientSignal: leaving.signal }).then(errorOf)) as GatewayError;
    expect(e4.code).toBe("client_closed");
    expect(waiting.seen).toHaveLength(1);
    expect(waiting.attempts.map((x) => [x.outcome, x.errorCode, x.evidence?.class])).toEqual([["client_cancelled", "client_closed", "unknown"]]);

    const late = harness(() => okBody());
    const expired = { ...a.plan, deadlineAt: clock.now() - 1 };
    const e3 = (await late.executor.execute(expired, a.request, { snapshot: snap, clientSignal: live() }).then(errorOf)) as GatewayError;
    expect(e3.code).toBe("deadline_exceeded");
    expect(late.seen).toHaveLength(0);
  });

  it("fails without calling the provider when its credential is not set", async () => {
    const { executor, seen, attempts } = harness(() => okBody(), {});
    const a = plan();
    const err = (await executor.execute(a.plan, a.request, { snapshot: await snapshot([{ name: "a", port: 9001 }]), clientSignal: live() }).then(errorOf)) as GatewayError;
    expect(err.code).toBe("internal_error");
    expect(err.message).not.toContain("SIM_KEY");
    expect(seen).toHaveLength(0);
    expect(attempts).toHaveLength(1);
  });

  it("answers 503 when the pinned snapshot has no pool for the plan", async () => {
    const { executor } = harness(() => okBody());
    const snap = await snapshot([{ name: "a", port: 9001 }]);
    const a = plan();
    const bare = { ...snap, pools: new Map() } as PinnedSnapshot;
    const err = (await executor.execute(a.plan, a.request, { snapshot: bare, clientSignal: live() }).then(errorOf)) as GatewayError;
    expect(err.code).toBe("no_backend_available");
    expect(err.status).toBe(503);
  });

  it("rejects a stream answered without text/event-stream", async () => {
    const { executor, attempts } = harness(() => okBody());
    const a = plan({ stream: true });
    const err = (await executor.execute(a.plan, a.request, { snapshot: await snapshot([{ name: "a", port: 9001 }]), clientSignal: live() }).then(errorOf)) as GatewayError;
    expect(err.code).toBe("upstream_protocol_error");
    expect(attempts[0]?.outcome).toBe("protocol_error");
  });
});

describe("GatewayExecutor: request features a backend protocol cannot carry", () => {
  it("refuses a feature the backend protocol lacks, naming the client's own field", async () => {
    const { executor, seen } = harness(() => okBody());
    const a = plan();
    const withTopK = { ...a.request, topK: 5 };
    const err = (await executor.execute(a.plan, withTopK, { snapshot: await snapshot([{ name: "a", port: 9001 }]), clientSignal: live() }).then(errorOf)) as GatewayError;
    expect(err.code).toBe("invalid_request");
    expect(err.param).toBe("top_k");
    expect(err.message).toContain("sluice-chat");
    expect(seen).toHaveLength(0);
  });

  it("drops it only under the revision's declared downgrade, and reports the drop", async () => {
    const { executor, seen, attempts } = harness(() => okBody());
    const a = plan();
    const downgradable = { ...a.plan, tiers: a.plan.tiers.map((t) => t.map((m) => ({ ...m, downgrades: ["top_k" as const] }))) };
    const res = await executor.execute(downgradable, { ...a.request, topK: 5 }, { snapshot: await snapshot([{ name: "a", port: 9001 }]), clientSignal: live() });
    expect(res.ok && res.downgraded).toEqual(["top_k"]);
    expect(seen[0]!.body.top_k).toBeUndefined();
    expect(attempts[0]!.downgraded).toEqual(["top_k"]);
  });
});

describe("GatewayExecutor: retries and fallback on evidence", () => {
  const planWith = (maxAttempts: number, tiers?: DispatchAction["plan"]["tiers"]) => {
    const a = plan();
    return { ...a, plan: { ...a.plan, retry: { maxAttempts }, tiers: tiers ?? a.plan.tiers } };
  };

  function harnessWith(respond: (s: Seen, n: number) => Response | Promise<Response>, extra: Record<string, unknown> = {}) {
    const seen: Seen[] = [];
    const attempts: AttemptRecord[] = [];
    const sleeps: number[] = [];
    const executor = new GatewayExecutor({
      codecs: builtinCodecs,
      credentials: { get: () => "provider-secret" },
      load: new LoadTracker(clock),
      clock,
      rng: { next: () => 0.5 },
      sleep: async (ms: number) => {
        sleeps.push(ms);
      },
      fetch: async (input, init) => {
        const s = { url: String(input), headers: new Headers(init?.headers), body: JSON.parse(String(init?.body)) };
        seen.push(s);
        return respond(s, seen.length);
      },
      ...extra,
    });
    return { executor: runner(executor, attempts), seen, attempts, sleeps };
  }
  const port = (s: Seen) => new URL(s.url).port;
  const rateLimited = () => Response.json({ error: { message: "slow down" } }, { status: 429, headers: { "retry-after": "0" } });

  it("retries a known-zero refusal on another backend of the same model first", async () => {
    const h = harnessWith((s) => (port(s) === "9001" ? rateLimited() : okBody()));
    const a = planWith(3);
    const snap = await snapshot([{ name: "a", port: 9001 }, { name: "b", port: 9002 }], "round-robin");
    // Whichever backend the selector tries first, a refusal moves to the untried one.
    const res = await h.executor.execute(a.plan, a.request, { snapshot: snap, clientSignal: live() });
    expect(res.ok && res.kind).toBe("buffered");
    const ports = h.seen.map(port);
    expect(ports.at(-1)).toBe("9002");
    expect(new Set(ports).size).toBe(ports.length); // no backend tried twice while another was untried
    expect(res.attempts.length).toBe(ports.length);
    expect(h.attempts.every((x) => x.evidence !== undefined)).toBe(true);
  });

  it("never retries unknown evidence: a 500, a 503 or a network failure is one attempt", async () => {
    for (const respond of [
      () => Response.json({}, { status: 500 }),
      () => Response.json({}, { status: 503 }),
      () => {
        throw new TypeError("Network connection lost.");
      },
    ]) {
      const h = harnessWith(respond);
      const a = planWith(5);
      const err = await h.executor.execute(a.plan, a.request, { snapshot: await snapshot([{ name: "a", port: 9001 }, { name: "b", port: 9002 }]), clientSignal: live() }).then((r) => r);
      expect(err.ok).toBe(false);
      expect(err.attempts).toHaveLength(1);
      expect(h.seen).toHaveLength(1);
      expect(h.attempts[0]!.evidence?.class).toBe("unknown");
    }
  });

  it("a provider's 401 or 403 is upstream_auth_failed (502): one attempt, nothing billed, no retry elsewhere; the backend shows as credential_rejected until an accepted answer", async () => {
    for (const status of [401, 403]) {
      const watch = new CredentialWatch();
      let refuse = true;
      const h = harnessWith(() => (refuse ? Response.json({ error: { message: "Incorrect API key provided: sk-prov***" } }, { status }) : okBody()), { credentialWatch: watch });
      const snap = await snapshot([{ name: "a", port: 9001 }, { name: "b", port: 9002 }]);
      const a = planWith(5);
      const res = await h.executor.execute(a.plan, a.request, { snapshot: snap, clientSignal: live() });
      expect(res.ok).toBe(false);
      const err = (res as { error: GatewayError }).error;
      expect(err).toMatchObject({ code: "upstream_auth_failed", status: 502, source: "upstream", retryable: false });
      expect(err.message).not.toContain("sk-prov");
      // Refused before any work: client_error evidence, which settles at zero and is never retried.
      expect(h.seen).toHaveLength(1);
      expect(h.attempts[0]).toMatchObject({ outcome: "upstream_status", status, errorCode: "upstream_auth_failed", evidence: { class: "client_error", status } });
      const refusedId = [...snap.backends.values()].find((b) => new URL(h.seen[0]!.url).port === new URL(b.baseUrl!).port)!.id;
      expect(watch.view(refusedId)).toMatchObject({ state: "credential_rejected", status });
      refuse = false;
      const b = planWith(1);
      for (let i = 0; i < 4 && watch.view(refusedId)?.state !== "accepted"; i++) {
        expect((await h.executor.execute(b.plan, b.request, { snapshot: snap, clientSignal: live() })).ok).toBe(true);
      }
      expect(watch.view(refusedId)?.state).toBe("accepted");
    }
  });

  it("falls back along the plan's tiers only, and within the attempt authority", async () => {
    const h = harnessWith((s) => (s.body.model === "sim-small-upstream" ? rateLimited() : okBody()));
    const a = planWith(2);
    const res = await h.executor.execute(a.plan, a.request, { snapshot: await snapshot([{ name: "a", port: 9001 }]), clientSignal: live() });
    expect(h.seen.map((s) => s.body.model)).toEqual(["sim-small-upstream", "sim-large-upstream"]);
    expect(res.attempts.map((x) => x.logicalModel)).toEqual(["chat-small", "chat-large"]);

    const one = harnessWith(() => rateLimited());
    const b = planWith(1);
    const err = (await one.executor.execute(b.plan, b.request, { snapshot: await snapshot([{ name: "a", port: 9001 }]), clientSignal: live() }).then((r) => r)); // the execution result
    expect(errorOf(err).code).toBe("upstream_rate_limited");
    expect(one.seen).toHaveLength(1);
  });

  it("retries the same backend after backoff when nothing untried is left, until the authority is spent", async () => {
    const h = harnessWith((_s, n) => (n < 3 ? rateLimited() : okBody()));
    const a = planWith(3, [[plan().plan.tiers[0]![0]!]]);
    const res = await h.executor.execute(a.plan, a.request, { snapshot: await snapshot([{ name: "a", port: 9001 }]), clientSignal: live() });
    expect(res.attempts).toHaveLength(3);
    expect(h.sleeps).toHaveLength(2);
    expect(new Set(res.attempts.map((x) => x.id)).size).toBe(3);
  });

  it("never waits past the one deadline, and keeps it across attempts", async () => {
    const h = harnessWith(() => Response.json({ error: {} }, { status: 429, headers: { "retry-after": "30" } }));
    const a = planWith(5);
    const err = (await h.executor.execute({ ...a.plan, deadlineAt: clock.now() + 5_000 }, a.request, { snapshot: await snapshot([{ name: "a", port: 9001 }]), clientSignal: live() }).then((r) => r)); // the execution result
    expect(errorOf(err).code).toBe("upstream_rate_limited");
    expect(h.seen).toHaveLength(1);
    expect(h.sleeps).toHaveLength(0);
  });

  it("stops waiting when the client leaves during the backoff", async () => {
    const ac = new AbortController();
    const h = harnessWith(() => rateLimited(), {
      sleep: async () => {
        ac.abort();
        throw new Error("aborted");
      },
    });
    const a = planWith(3);
    const err = (await h.executor.execute(a.plan, a.request, { snapshot: await snapshot([{ name: "a", port: 9001 }]), clientSignal: ac.signal }).then((r) => r)); // the execution result
    expect(errorOf(err).code).toBe("client_closed");
    expect(h.seen).toHaveLength(1);
  });
});

describe("GatewayExecutor: circuit breakers narrow, never widen", () => {
  function gate(hints: Record<string, "allow" | "deny" | "probe">, probeAllowed = true) {
    const reports: [string, string, string | undefined][] = [];
    const g = {
      isOpen: (id: string) => hints[id] === "deny",
      admission: (id: string) => hints[id] ?? "allow",
      state: () => "closed" as const,
      acquireProbe: async () => (probeAllowed ? { allowed: true, probe: true, permitId: "permit-1" } : { allowed: false, probe: true }),
      report: (id: string, outcome: string, permitId?: string) => void reports.push([id, outcome, permitId]),
    };
    return { g, reports };
  }

  it("skips a backend whose breaker is open and reports each outcome", async () => {
    const { executor, seen } = harness(() => okBody());
    const snap = await snapshot([{ name: "a", port: 9001 }, { name: "b", port: 9002 }], "round-robin");
    const idA = [...snap.backends.values()].find((b) => b.name === "a")!.id;
    const idB = [...snap.backends.values()].find((b) => b.name === "b")!.id;
    const { g, reports } = gate({ [idA]: "deny" });
    const a = plan();
    for (let i = 0; i < 6; i++) await executor.execute(a.plan, a.request, { snapshot: snap, clientSignal: live(), breakers: g });
    expect(new Set(seen.map((s) => new URL(s.url).port))).toEqual(new Set(["9002"]));
    expect(reports.every(([id, outcome]) => id === idB && outcome === "success")).toBe(true);
    expect(reports).toHaveLength(6);
  });

  it("answers 503 when every candidate's breaker is open, without calling anyone", async () => {
    const { executor, seen } = harness(() => okBody());
    const snap = await snapshot([{ name: "a", port: 9001 }]);
    const { g } = gate(Object.fromEntries([...snap.backends.keys()].map((id) => [id, "deny" as const])));
    const a = plan();
    const err = (await executor.execute(a.plan, a.request, { snapshot: snap, clientSignal: live(), breakers: g }).then(errorOf)) as GatewayError;
    expect(err.code).toBe("no_backend_available");
    expect(seen).toHaveLength(0);
  });

  it("sends a half-open probe only with a permit, and reports with that permit", async () => {
    const failing = harness(() => Response.json({}, { status: 500 }));
    const snap = await snapshot([{ name: "a", port: 9001 }]);
    const id = [...snap.backends.keys()][0]!;
    const allowed = gate({ [id]: "probe" });
    const a = plan();
    await failing.executor.execute(a.plan, a.request, { snapshot: snap, clientSignal: live(), breakers: allowed.g }).then(errorOf);
    expect(failing.seen).toHaveLength(1);
    expect(allowed.reports).toEqual([[id, "failure", "permit-1"]]);

    const other = harness(() => okBody());
    const refused = gate({ [id]: "probe" }, false);
    const err = (await other.executor.execute(a.plan, a.request, { snapshot: snap, clientSignal: live(), breakers: refused.g }).then(errorOf)) as GatewayError;
    expect(err.code).toBe("no_backend_available");
    expect(other.seen).toHaveLength(0);
  });

  it("hands a probe permit back when the budget refuses the attempt it was taken for", async () => {
    const h = harness(() => okBody());
    const snap = await snapshot([{ name: "a", port: 9001 }]);
    const id = [...snap.backends.keys()][0]!;
    const probing = gate({ [id]: "probe" });
    const a = plan();
    const charges = {
      reserve: async () => {
        throw new GatewayError("budget_exceeded", "The budget is spent.");
      },
    };
    const err = (await h.executor.execute(a.plan, a.request, { snapshot: snap, clientSignal: live(), breakers: probing.g, charges }).then(errorOf)) as GatewayError;
    expect(err.code).toBe("budget_exceeded");
    expect(h.seen).toHaveLength(0);
    expect(probing.reports).toEqual([[id, "neutral", "permit-1"]]);
  });
});

describe("GatewayExecutor: an attempt refused before it is sent gives back what it took", () => {
  async function probing() {
    const snap = await snapshot([{ name: "a", port: 9001 }]);
    const id = [...snap.backends.keys()][0]!;
    const reports: [string, string, string | undefined][] = [];
    const g = {
      isOpen: () => false,
      admission: () => "probe" as const,
      state: () => "half_open" as const,
      acquireProbe: async () => ({ allowed: true, probe: true, permitId: "permit-1" }),
      report: (bid: string, outcome: string, permitId?: string) => void reports.push([bid, outcome, permitId]),
    };
    return { snap, id, g, reports };
  }

  it("hands the probe permit back when the call budget refuses", async () => {
    const { snap, id, g, reports } = await probing();
    const h = harness(() => okBody());
    const a = plan();
    const err = (await h.executor.execute(a.plan, a.request, { snapshot: snap, breakers: g, callBudget: async () => ({ ok: false, reason: "exhausted" }) }).then(errorOf)) as GatewayError;
    expect(err.code).toBe("attempt_budget_exhausted");
    expect(h.seen).toHaveLength(0);
    expect(reports).toEqual([[id, "neutral", "permit-1"]]);
  });

  it("hands the probe permit back when the call budget cannot be asked", async () => {
    const { snap, id, g, reports } = await probing();
    const h = harness(() => okBody());
    const a = plan();
    const err = (await h.executor.execute(a.plan, a.request, { snapshot: snap, breakers: g, callBudget: () => Promise.reject(new Error("object down")) }).then(errorOf)) as GatewayError;
    expect(err.code).toBe("attempt_budget_unavailable");
    expect(reports).toEqual([[id, "neutral", "permit-1"]]);
  });

  it("spends no call-budget unit on an attempt the ledger refuses, and releases what the ledger granted when the call budget refuses", async () => {
    const snap = await snapshot([{ name: "a", port: 9001 }]);
    const h = harness(() => okBody());
    const a = plan();
    let units = 0;
    const callBudget = async () => (units++, { ok: true as const, remaining: 9 });
    const refusing = {
      reserve: async () => {
        throw new GatewayError("budget_exceeded", "The budget is spent.");
      },
    };
    expect(errorOf(await h.executor.execute(a.plan, a.request, { snapshot: snap, charges: refusing, callBudget })).code).toBe("budget_exceeded");
    expect(units).toBe(0);

    const ended: string[] = [];
    const granting = { reserve: async (attempt: AttemptScope) => void attempt.own("ledger_reservation", (r) => ended.push(`${r.outcome}/${r.evidence?.class}`)) };
    const exhausted = async () => ({ ok: false as const, reason: "exhausted" as const });
    expect(errorOf(await h.executor.execute(a.plan, a.request, { snapshot: snap, charges: granting, callBudget: exhausted })).code).toBe("attempt_budget_exhausted");
    // Released as an attempt that never happened: nothing sent, nothing to settle.
    expect(ended).toEqual(["not_sent/known_zero"]);
    expect(h.seen).toHaveLength(0);
    expect(h.attempts).toHaveLength(0);
  });
});

describe("GatewayExecutor: active health narrows, never below one backend", () => {
  async function probed(names: string[]) {
    const snap = await snapshot(names.map((n, i) => ({ name: n, port: 9001 + i })), "round-robin");
    // Give every backend a health check, as a snapshot with healthCheck would.
    const backends = new Map([...snap.backends].map(([id, b]) => [id, { ...b, healthCheck: { path: "/models", intervalMs: 1000, timeoutMs: 100 } }]));
    const pools = new Map(
      [...snap.pools].map(([n, p]) => [n, { ...p, members: p.members.map((m) => ({ ...m, backend: backends.get(m.backend.id)! })) }]),
    );
    return { ...snap, backends, pools } as PinnedSnapshot;
  }
  function healthGate(unhealthy: Set<string>) {
    const watched: string[] = [];
    return {
      watched,
      g: { isHealthy: (id: string) => !unhealthy.has(id), status: () => "unknown" as const, ensureWatched: (id: string) => void watched.push(id) },
    };
  }

  it("skips an unhealthy backend and asks the monitors to watch every probed candidate", async () => {
    const snap = await probed(["a", "b"]);
    const idA = [...snap.backends.values()].find((b) => b.name === "a")!.id;
    const { executor, seen } = harness(() => okBody());
    const { g, watched } = healthGate(new Set([idA]));
    const a = plan();
    for (let i = 0; i < 4; i++) await executor.execute(a.plan, a.request, { snapshot: snap, clientSignal: live(), health: g });
    expect(new Set(seen.map((s) => new URL(s.url).port))).toEqual(new Set(["9002"]));
    expect(new Set(watched)).toEqual(new Set(snap.backends.keys()));
  });

  it("keeps serving from the only backend even when its probes say unhealthy", async () => {
    const snap = await probed(["a"]);
    const { executor, seen } = harness(() => okBody());
    const { g } = healthGate(new Set(snap.backends.keys()));
    const a = plan();
    await executor.execute(a.plan, a.request, { snapshot: snap, clientSignal: live(), health: g });
    expect(seen).toHaveLength(1);
  });
});

describe("GatewayExecutor: backend-level admission", () => {
  it("skips a backend without room and takes the slot of the one it calls", async () => {
    const snap = await snapshot([{ name: "a", port: 9001 }, { name: "b", port: 9002 }], "round-robin");
    const idA = [...snap.backends.values()].find((b) => b.name === "a")!.id;
    const idB = [...snap.backends.values()].find((b) => b.name === "b")!.id;
    const acquired: string[] = [];
    const slots = { hasRoom: (id: string) => id !== idA, acquire: (id: string) => (acquired.push(id), true) };
    const { executor, seen } = harness(() => okBody());
    const a = plan();
    for (let i = 0; i < 3; i++) await executor.execute(a.plan, a.request, { snapshot: snap, clientSignal: live(), backendSlots: slots });
    expect(seen.map((s) => new URL(s.url).port)).toEqual(["9002", "9002", "9002"]);
    expect(acquired).toEqual([idB, idB, idB]);
  });

  it("moves on when a slot is taken between the check and the call", async () => {
    const snap = await snapshot([{ name: "a", port: 9001 }]);
    const { executor, seen } = harness(() => okBody());
    const a = plan();
    const err = (await executor.execute(a.plan, a.request, { snapshot: snap, clientSignal: live(), backendSlots: { hasRoom: () => true, acquire: () => false } }).then(errorOf)) as GatewayError;
    expect(err.code).toBe("no_backend_available");
    expect(seen).toHaveLength(0);
  });
});

describe("GatewayExecutor: the client hears the real failure", () => {
  it("answers the last attempt's error when nothing is left to retry on", async () => {
    const snap = await snapshot([{ name: "a", port: 9001 }]);
    let calls = 0;
    // The breaker opens after the first failure: the retry finds no candidate left.
    const g = {
      isOpen: () => calls > 0,
      admission: () => (calls > 0 ? ("deny" as const) : ("allow" as const)),
      state: () => "closed" as const,
      acquireProbe: async () => ({ allowed: false, probe: true }),
      report: () => {},
    };
    const { executor } = harness(() => (calls++, Response.json({ error: {} }, { status: 429, headers: { "retry-after": "0" } })));
    const a = plan();
    const err = (await executor
      .execute({ ...a.plan, retry: { maxAttempts: 3 }, tiers: [[a.plan.tiers[0]![0]!]] }, a.request, { snapshot: snap, clientSignal: live(), breakers: g })
      .then(errorOf)) as GatewayError;
    expect(err.code).toBe("upstream_rate_limited");
    expect(calls).toBe(1);
  });
});

describe("GatewayExecutor: egress", () => {
  /** A harness whose fake fetch records what each call asked for, redirect mode included. */
  function recording(respond: (url: string) => Response, extra: Record<string, unknown> = {}) {
    const calls: { url: string; redirect: RequestInit["redirect"] }[] = [];
    const h = harness(() => okBody(), undefined, {
      fetch: async (input: RequestInfo | URL, init?: RequestInit) => {
        calls.push({ url: String(input), redirect: init?.redirect });
        return respond(String(input));
      },
      ...extra,
    });
    return { ...h, calls };
  }

  it("never follows a redirect: a 3xx is the provider's failed answer, and its location is never asked", async () => {
    const { executor, calls, attempts } = recording(() => new Response("moved", { status: 302, headers: { location: "http://169.254.169.254/latest/meta-data" } }));
    const a = plan();
    const err = (await executor.execute(a.plan, a.request, { snapshot: await snapshot([{ name: "a", port: 9001 }]), clientSignal: live() }).then(errorOf)) as GatewayError;
    expect(calls).toEqual([{ url: "http://127.0.0.1:9001/v1/chat/completions", redirect: "manual" }]);
    expect(err.code).toBe("upstream_error");
    expect(err.status).toBe(502);
    expect(err.message).not.toContain("169.254");
    expect(attempts).toMatchObject([{ outcome: "upstream_status", status: 302 }]);
  });

  it("checks each attempt's address again: one the policy refuses is never sent, and another backend serves", async () => {
    // A snapshot stored before the guard (or before the allowlist changed) still names 9001.
    const { executor, calls, attempts } = recording(() => okBody(), { egress: { allow: ["127.0.0.1:9002"] } });
    const a = plan();
    const snap = await snapshot([{ name: "a", port: 9001 }, { name: "b", port: 9002 }], "round-robin");
    for (let i = 0; i < 4; i++) {
      const res = await executor.execute({ ...a.plan, retry: { maxAttempts: 2 } }, a.request, { snapshot: snap, clientSignal: live() });
      expect(res.ok).toBe(true);
    }
    expect(calls.map((c) => new URL(c.url).port)).toEqual(["9002", "9002", "9002", "9002"]);
    const refused = attempts.filter((x) => x.backendName === "a");
    expect(refused.length).toBeGreaterThan(0);
    expect(refused.every((x) => x.outcome === "connect_failed" && x.errorCode === "internal_error" && x.evidence?.class === "known_zero")).toBe(true);

    const only = recording(() => okBody(), { egress: { allow: [] } });
    const err = (await only.executor.execute(a.plan, a.request, { snapshot: await snapshot([{ name: "a", port: 9001 }]), clientSignal: live() }).then(errorOf)) as GatewayError;
    expect(err.code).toBe("internal_error");
    expect(err.message).not.toContain("127.0.0.1");
    expect(only.calls).toHaveLength(0);
  });

  /** A provider answering with these headers: buffered on port 9001, an (empty) stream elsewhere. */
  const answeringWith = (providerHeaders: Record<string, string>) => (url: string) =>
    url.includes("9001")
      ? Response.json(
          { id: "c", model: "x", choices: [{ index: 0, message: { role: "assistant", content: "Hi!" }, finish_reason: "stop" }], usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } },
          { headers: providerHeaders },
        )
      : new Response("data: [DONE]\n\n", { headers: { ...providerHeaders, "content-type": "text/event-stream" } });
  /** The headers a client is given, buffered and streamed, from backends listing `listed`. */
  const passedBothWays = async (executor: ReturnType<typeof recording>["executor"], listed: readonly string[]) => {
    const a = plan();
    const buffered = await executor.execute(a.plan, a.request, { snapshot: await snapshot([{ name: "a", port: 9001, responseHeaders: [...listed] }]), clientSignal: live() });
    const s = plan({ stream: true });
    const streamed = await executor.execute(s.plan, s.request, { snapshot: await snapshot([{ name: "b", port: 9002, responseHeaders: [...listed] }]), clientSignal: live() });
    if (streamed.ok && streamed.kind === "stream") await streamed.body.cancel();
    return { buffered: buffered.ok && buffered.headers, streamed: streamed.ok && streamed.kind === "stream" && streamed.headers };
  };

  it("passes the provider headers a backend lists, and no other, on buffered and streamed answers", async () => {
    const { executor } = recording(answeringWith({ "x-request-id": "prov-123", "openai-processing-ms": "42", "set-cookie": "session=abc", server: "nginx", "x-powered-by": "Express" }));
    const passed = { "x-request-id": "prov-123", "openai-processing-ms": "42" };
    expect(await passedBothWays(executor, ["openai-processing-ms", "x-request-id"])).toEqual({ buffered: passed, streamed: passed });
    const a = plan();
    const unlisted = await executor.execute(a.plan, a.request, { snapshot: await snapshot([{ name: "a", port: 9001 }]), clientSignal: live() });
    expect(unlisted.ok && unlisted.headers).toEqual({});
  });

  it("drops a listed provider header whose value contains a secret the gateway holds, buffered and streamed", async () => {
    const held = ["provider-secret", "sk-other-backend-key"];
    const { executor } = recording(
      answeringWith({ "x-request-id": "prov-123", "x-echo-key": "Bearer provider-secret", "x-debug": "keys=sk-other-backend-key;", "openai-processing-ms": "42" }),
      { heldSecrets: () => held },
    );
    const passed = { "x-request-id": "prov-123", "openai-processing-ms": "42" };
    expect(await passedBothWays(executor, ["openai-processing-ms", "x-debug", "x-echo-key", "x-request-id"])).toEqual({ buffered: passed, streamed: passed });
  });
});
