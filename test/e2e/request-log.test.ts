import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { within } from "./support/admin-cli.ts";
import { DEMO_KEY, startStack, type Stack } from "./support/stack.ts";

/**
 * The request log end to end: plain calls (no task) through a real gateway appear in
 * `GET /admin/calls` within seconds, each with the figures of its own access line.
 */
describe("the request log", () => {
  let stack: Stack;
  const ids: string[] = [];

  beforeAll(async () => {
    stack = await startStack();
  });

  afterAll(async () => {
    await stack?.stop();
  });

  const accessLines = () =>
    stack.gateway
      .output()
      .split("\n")
      .filter((l) => l.startsWith('{"kind":"request"'))
      .map((l) => JSON.parse(l));
  const adminJson = async (path: string): Promise<{ status: number; body: any }> => {
    const res = await stack.admin(path);
    return { status: res.status, body: await res.json() };
  };
  /** Every page of the tenant's log for `query`, following the cursor. */
  const allPages = async (query: string): Promise<any[]> => {
    const rows: any[] = [];
    let cursor: string | undefined;
    do {
      const { status, body } = await adminJson(`/admin/calls?tenant=demo&${query}${cursor ? `&cursor=${cursor}` : ""}`);
      expect(status).toBe(200);
      rows.push(...body.calls);
      cursor = body.next;
    } while (cursor !== undefined);
    return rows;
  };

  it("lists ten calls that name no task within seconds, with the figures of each one's access line", async () => {
    for (let i = 0; i < 10; i++) {
      const stream = i % 2 === 1;
      const res = await fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "sluice-chat", stream, messages: [{ role: "user", content: `plain call number ${i}` }] }),
      });
      expect(res.status).toBe(200);
      await res.text();
      ids.push(res.headers.get("x-request-id")!);
    }
    let listed: any[] = [];
    await within(10_000, async () => {
      listed = (await adminJson("/admin/calls?tenant=demo&limit=50")).body.calls;
      return ids.every((id) => listed.some((c) => c.requestId === id));
    });
    const lines = accessLines();
    for (const id of ids) {
      const row = listed.find((c) => c.requestId === id);
      const line = lines.find((l) => l.requestId === id);
      expect(line, `access line of ${id}`).toBeDefined();
      const attempts: any[] = line.attempts;
      expect(row).toMatchObject({ tenant: "demo", key: line.key, project: line.chargeTo, entrypoint: line.entrypoint, decision: line.route, outcome: "success", attempts: attempts.length });
      expect(row.taskId).toBeUndefined();
      expect(row.stream).toBe(line.stream);
      expect(row.latencyMs).toBe(line.durationMs);
      expect(row.model).toBe(line.model);
      expect(row.backend).toBe(attempts.at(-1).backend);
      expect(row.tokens).toEqual({ input: attempts.reduce((n, a) => n + a.usage.inputTokens, 0), output: attempts.reduce((n, a) => n + a.usage.outputTokens, 0) });
      expect(row.costMicros).toBe(attempts.reduce((n, a) => n + (a.costMicros ?? 0), 0));
      expect(row.costMicros).toBeGreaterThan(0);
      expect(row.currency).toBe(attempts.at(-1).currency);
      // TTFT from receipt (the access line's is from its attempt's start), for the calls that streamed.
      if (attempts.at(-1).ttftMs === undefined) expect(row.ttftMs).toBeUndefined();
      else {
        expect(row.ttftMs).toBeGreaterThanOrEqual(attempts.at(-1).ttftMs);
        expect(row.ttftMs).toBeLessThanOrEqual(row.latencyMs);
      }
    }
    // The five streamed calls have a TTFT.
    expect(listed.filter((c) => ids.includes(c.requestId) && typeof c.ttftMs === "number")).toHaveLength(5);
    // Newest first.
    const order = listed.filter((c) => ids.includes(c.requestId)).map((c) => c.requestId);
    expect(order).toEqual([...ids].reverse());
    // One call by its id.
    const one = await adminJson(`/admin/calls/${ids[0]}?tenant=demo`);
    expect(one.status).toBe(200);
    expect(one.body.call).toEqual(listed.find((c) => c.requestId === ids[0]));
  });

  it("pages by cursor without repeating or skipping a call, and filters", async () => {
    const paged = await allPages("limit=3");
    const ours = paged.filter((c) => ids.includes(c.requestId)).map((c) => c.requestId);
    expect(ours).toEqual([...ids].reverse());
    expect(new Set(paged.map((c) => c.requestId)).size).toBe(paged.length);
    const first = paged.find((c) => c.requestId === ids[0]);
    const byTime = await allPages(`since=${first.at}&until=${first.at}&key=demo`);
    expect(byTime.map((c) => c.requestId)).toContain(ids[0]);
    expect(byTime.every((c) => c.at === first.at)).toBe(true);
    expect(await allPages("outcome=error")).toEqual([]);
    expect((await allPages(`model=${encodeURIComponent(first.model)}&decision=${encodeURIComponent(first.decision)}`)).map((c) => c.requestId)).toContain(ids[0]);
  });

  it("refuses a bad filter or cursor with the admin API's error, and answers 404 for a call it does not keep", async () => {
    const noTenant = await adminJson("/admin/calls");
    expect(noTenant.status).toBe(400);
    expect(noTenant.body.error).toMatchObject({ code: "invalid_request", param: "tenant" });
    const badCursor = await adminJson("/admin/calls?tenant=demo&cursor=not-a-cursor");
    expect(badCursor.status).toBe(400);
    expect(badCursor.body.error).toMatchObject({ code: "invalid_request", param: "cursor" });
    const badOutcome = await adminJson("/admin/calls?tenant=demo&outcome=maybe");
    expect(badOutcome.body.error).toMatchObject({ code: "invalid_request", param: "outcome" });
    const missing = await adminJson("/admin/calls/req_nope?tenant=demo");
    expect(missing.status).toBe(404);
    expect(missing.body.error).toMatchObject({ code: "not_found" });
  });
});
