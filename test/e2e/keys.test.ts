import { createHash } from "node:crypto";
import { Client as LegacyClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as LegacyTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { sluiceAdmin, within } from "./support/admin-cli.ts";
import { startCountingToolServer, type CountingToolServer } from "./support/counting-tool-server.ts";
import { ADMIN_TOKEN, allowingSimulators, backendsFor, bundledConfig, type Simulator } from "./support/stack.ts";

/** The propagation bound this test runs with; docs/publication.md states the default's. */
const TTL_MS = 1000;
const sha = (k: string) => createHash("sha256").update(k).digest("hex");

let sim: Simulator;
let tools: CountingToolServer;
let gateway: RunningGateway;

beforeAll(async () => {
  [sim, tools] = await Promise.all([
    startSimulatorProcess({ apiKey: SIMULATOR_API_KEY }),
    startCountingToolServer({ deploy: { description: "deploys", run: async () => ({ content: [{ type: "text", text: "deployed" }] }) }, status: { run: async () => ({ content: [{ type: "text", text: "green" }] }) } }),
  ]);
  const g = allowingSimulators(bundledConfig("gateway"), sim.url, tools.url);
  g.traffic = { ...g.traffic, publicationCacheTtlMs: TTL_MS };
  g.mcp = { servers: [{ name: "ops", url: tools.url, era: "stateless" }], sessions: { secrets: ["MCP_SESSION_SECRET"] } };
  g.governance = { approvals: { ttlMs: 600_000, stateSecret: "APPROVAL_STATE_SECRET" } };
  const p = bundledConfig("publication");
  p.mcp = {
    policy: {
      revision: "keys-1",
      rules: [
        { id: "risky", effect: "allow", principals: { tenants: ["demo"] }, servers: ["ops"], names: ["deploy"], approval: "required" },
        { id: "plain", effect: "allow", principals: { tenants: ["demo"] }, servers: ["ops"], names: ["status"] },
      ],
    },
  };
  gateway = await startGateway({
    adminToken: ADMIN_TOKEN,
    secretNames: ["MCP_SESSION_SECRET", "APPROVAL_STATE_SECRET"],
    secrets: { MCP_SESSION_SECRET: "mcp-session-secret-for-the-keys-tests-0123456789", APPROVAL_STATE_SECRET: "approval-state-secret-0123456789" },
    config: { gateway: stringify(g), publication: stringify(p), backends: stringify(backendsFor(sim.url)) },
  });
});
afterAll(async () => {
  await Promise.all([gateway?.stop(), sim?.stop(), tools?.http.close()]);
});

const sluice = (...args: string[]) => sluiceAdmin(gateway.adminUrl, ADMIN_TOKEN, ...args);
const admin = async (path: string, body?: unknown) => {
  const res = await fetch(`${gateway.adminUrl}/admin${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, json: (await res.json()) as any };
};
const chat = async (key: string, headers: Record<string, string> = {}) => {
  const res = await fetch(`${gateway.publicUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: "hi" }] }),
  });
  const body = (await res.json()) as { error?: { code?: string; message?: string } };
  return { status: res.status, error: body.error };
};
describe("API keys as a lifecycle", () => {
  it("sluice keys create prints a new key once, publishes only its digest, and the key works within the stated time", async () => {
    const created = await sluice("keys", "create", "--tenant", "demo", "--id", "ci", "--charge-to", "platform/playground", "--entrypoints", "sluice-chat", "--expires", "30d");
    expect(created.status, created.stderr).toBe(0);
    const key = created.stdout.split("\n")[0]!;
    expect(key).toMatch(/^sk-sluice-[A-Za-z0-9_-]{43}$/);
    expect(created.stdout).toContain("created key demo/ci in revision");
    await within(TTL_MS + 2000, async () => (await chat(key)).status === 200);
    // The key's grants hold: it may call only sluice-chat.
    const other = await fetch(`${gateway.publicUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "sluice-large", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(other.status).toBe(403);
    await other.text();

    const published = await (await fetch(`${gateway.adminUrl}/admin/publication`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
    expect(published).toContain(sha(key));
    expect(published).not.toContain(key);
    const listed = await sluice("keys", "list", "--tenant", "demo", "--json");
    expect(listed.status, listed.stderr).toBe(0);
    expect(listed.stdout).not.toContain(key);
    const ci = (JSON.parse(listed.stdout) as { keys: any[] }).keys.find((k) => k.id === "ci");
    expect(ci).toMatchObject({ tenant: "demo", state: "active", digestPrefix: sha(key).slice(0, 8), chargeTo: "platform/playground", entrypoints: ["sluice-chat"] });
    expect(Date.parse(ci.expiresAt) - Date.now()).toBeGreaterThan(29 * 86_400_000);

    // Disabled, then enabled again: refused, then served.
    expect((await admin("/keys/ci/disable", {})).json.key.state).toBe("disabled");
    await within(TTL_MS + 2000, async () => (await chat(key)).status === 401);
    expect((await admin("/keys/ci/enable", {})).json.key.state).toBe("active");
    await within(TTL_MS + 2000, async () => (await chat(key)).status === 200);

    // Bad requests are refused and change nothing.
    expect(await admin("/keys", { tenant: "ghost" })).toMatchObject({ status: 404, json: { error: { code: "not_found" } } });
    expect(await admin("/keys", { tenant: "demo", id: "ci" })).toMatchObject({ status: 422, json: { error: { code: "publication_rejected" } } });
    expect(await admin("/keys", { tenant: "demo", entrypoints: ["no-such-entrypoint"] })).toMatchObject({ status: 422 });
    expect(await admin("/keys/ci/rotate", { graceSeconds: -1 })).toMatchObject({ status: 400, json: { error: { code: "invalid_request" } } });
    const raw = async (path: string, body: string) => {
      const res = await fetch(`${gateway.adminUrl}/admin${path}`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" }, body });
      return { status: res.status, code: ((await res.json()) as { error?: { code?: string } }).error?.code };
    };
    expect(await raw("/keys/ci/revoke", "{not json")).toEqual({ status: 400, code: "invalid_json" });
    expect(await raw("/keys/ci/revoke", '{"reason": 7}')).toEqual({ status: 400, code: "invalid_request" });
    expect(await raw("/publication/rollback", '{"revision": "one"}')).toEqual({ status: 400, code: "invalid_request" });
    // None of these changed the key.
    expect((await chat(key)).status).toBe(200);
  });

  it("a key revoked while a 2025-era MCP session is open: the next call on that session is refused, and its approvals end with it", async () => {
    const created = await admin("/keys", { tenant: "demo", id: "agent" });
    expect(created.status).toBe(201);
    const key = created.json.apiKey as string;
    await within(TTL_MS + 2000, async () => (await chat(key)).status === 200);

    const client = new LegacyClient({ name: "keys-e2e", version: "1.0.0" }, { capabilities: { elicitation: { url: {} } } });
    const transport = new LegacyTransport(new URL(`${gateway.publicUrl}/mcp/ops`), { requestInit: { headers: { authorization: `Bearer ${key}` } } });
    await client.connect(transport);
    try {
      expect(transport.sessionId).toBeTruthy();
      expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(["deploy", "status"]);
      // A call that needs approval: pending on the approvers' desk.
      const pending = await client.callTool({ name: "deploy", arguments: { to: "prod" } }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(pending).toBeInstanceOf(McpError);
      expect((pending as McpError).code).toBe(-32042);
      const approvalId = ((pending as McpError).data as { elicitations: { elicitationId: string }[] }).elicitations[0]!.elicitationId;
      expect((await admin(`/approvals/${approvalId}?tenant=demo`)).json.approval.state).toBe("pending");

      const revoked = await sluice("keys", "revoke", "agent", "--tenant", "demo", "--reason", "leaked in a build log");
      expect(revoked.status, revoked.stderr).toBe(0);
      expect(revoked.stdout).toContain(`key demo/agent is revoked from revision`);
      expect(revoked.stdout).toContain(approvalId);

      // The next call on the open session is refused (within the propagation time; this instance at once).
      const sessionId = transport.sessionId!;
      const took = await within(TTL_MS + 2000, async () => {
        const res = await fetch(`${gateway.publicUrl}/mcp/ops`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-session-id": sessionId, "mcp-protocol-version": "2025-11-25" },
          body: JSON.stringify({ jsonrpc: "2.0", id: 99, method: "tools/list" }),
        });
        await res.text();
        return res.status === 401;
      });
      expect(took).toBeLessThanOrEqual(TTL_MS + 2000);
      await expect(client.listTools()).rejects.toThrow();
      expect((await chat(key)).error?.code).toBe("invalid_api_key");
      const approval = (await admin(`/approvals/${approvalId}?tenant=demo`)).json.approval;
      expect(approval).toMatchObject({ state: "revoked", decidedBy: "admin", reason: "leaked in a build log" });
      // The id of a revoked key is never reused.
      expect((await admin("/keys", { tenant: "demo", id: "agent" })).status).toBe(422);
      expect(tools.executions("deploy")).toBe(0);
    } finally {
      await client.close().catch(() => {});
    }
  });

  it("rotation: the successor carries the key's identity and tasks; each replaced value works until its own grace ends, and rotations may overlap", async () => {
    const k0 = (await admin("/keys", { tenant: "demo", id: "rot", chargeTo: "platform/playground" })).json.apiKey as string;
    const task = { "x-sluice-task-id": "rotation-task-1" };
    await within(TTL_MS + 2000, async () => (await chat(k0, task)).status === 200);

    // First rotation: the old value keeps working for a short grace.
    const first = await sluice("keys", "rotate", "rot", "--grace", "8s", "--json");
    expect(first.status, first.stderr).toBe(0);
    const r1 = JSON.parse(first.stdout) as { apiKey: string; key: { previous: { until: string }[] } };
    const k1 = r1.apiKey;
    const firstEnds = Date.parse(r1.key.previous[0]!.until);
    // Second rotation inside the first's grace, with a long one.
    const r2 = (await admin("/keys/rot/rotate", { graceSeconds: 3600 })).json;
    const k2 = r2.apiKey as string;
    expect(r2.key.previous.map((p: { until: string }) => p.until)).toEqual([r1.key.previous[0]!.until, expect.any(String)]);

    // All three values work as the same key, in the same task (a task binds to the key's project).
    for (const k of [k0, k1, k2]) await within(TTL_MS + 2000, async () => (await chat(k, task)).status === 200);
    // Then the first value stops at its grace end, not before, and the other two go on.
    await within(firstEnds - Date.now() + 3000, async () => (await chat(k0, task)).status === 401);
    expect(Date.now()).toBeGreaterThanOrEqual(firstEnds - 1000);
    expect((await chat(k0)).error).toMatchObject({ code: "invalid_api_key", message: "This API key has expired." });
    expect((await chat(k1, task)).status).toBe(200);
    expect((await chat(k2, task)).status).toBe(200);
    const listed = (await admin("/keys?tenant=demo")).json.keys.find((k: { id: string }) => k.id === "rot");
    expect(listed).toMatchObject({ state: "active", digestPrefix: sha(k2).slice(0, 8), previous: [{ digestPrefix: sha(k1).slice(0, 8) }] });
  });
});
