import { describe, expect, it } from "vitest";
import { fromBase64url } from "../../../src/digest/base64url.ts";
import { AgentTaskHandleSealer, isApprovalTaskId, MAX_HELD_MESSAGE_BYTES, type AgentTaskHandle } from "../../../src/approvals/agent-task-handle.ts";
import { TaskHandleSealer } from "../../../src/approvals/task-handle.ts";

const SECRET = "a-secret-of-enough-length";
const handle: AgentTaskHandle = {
  approvalId: "ap_1",
  tenant: "acme",
  key: "k1",
  endpoint: "helpdesk",
  agent: "helpdesk",
  skill: "refund",
  generation: "1.0",
  message: { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "refund order secret-order-42" }] },
  contextId: "ctx-1",
  issuedAt: 100,
  expiresAt: 1_000,
};
const owner = { tenant: "acme", key: "k1" };

describe("sealed agent task handles", () => {
  it("opens what it sealed for its principal on its endpoint until it expires; the message is not readable in it", async () => {
    const sealer = await AgentTaskHandleSealer.fromSecret(SECRET);
    const sealed = (await sealer.seal(handle))!;
    expect(sealed).toMatch(/^ga1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(isApprovalTaskId(sealed)).toBe(true);
    expect(String.fromCharCode(...fromBase64url(sealed.split(".")[2]!)!)).not.toContain("secret-order");
    expect(await sealer.open(sealed, owner, "helpdesk", 999)).toEqual({ ok: true, handle });
    expect(await sealer.open(sealed, owner, "helpdesk", 1_000)).toEqual({ ok: false, why: "expired" });
    expect(await sealer.seal(handle)).not.toBe(sealed);
  });

  it("is no task to another key, another tenant or another endpoint", async () => {
    const sealer = await AgentTaskHandleSealer.fromSecret(SECRET);
    const sealed = (await sealer.seal(handle))!;
    expect(await sealer.open(sealed, { tenant: "acme", key: "k2" }, "helpdesk", 0)).toEqual({ ok: false, why: "other_principal" });
    expect(await sealer.open(sealed, { tenant: "other", key: "k1" }, "helpdesk", 0)).toEqual({ ok: false, why: "other_principal" });
    // Issued on /a2a/helpdesk: not a task of the virtual agent /a2a, nor of another agent.
    expect(await sealer.open(sealed, owner, "*", 0)).toEqual({ ok: false, why: "other_endpoint" });
    expect(await sealer.open(sealed, owner, "billing", 0)).toEqual({ ok: false, why: "other_endpoint" });
  });

  it("refuses a tampered handle, another secret's, MCP's task handles and garbage", async () => {
    const sealer = await AgentTaskHandleSealer.fromSecret(SECRET);
    const sealed = (await sealer.seal(handle))!;
    const [v, iv, body] = sealed.split(".");
    const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === "A" ? "B" : "A") + s.slice(i + 1);
    expect(await sealer.open(`${v}.${iv}.${flip(body!, 5)}`, owner, "helpdesk", 0)).toEqual({ ok: false, why: "tampered" });
    expect(await (await AgentTaskHandleSealer.fromSecret("another-secret-of-enough-length")).open(sealed, owner, "helpdesk", 0)).toEqual({ ok: false, why: "tampered" });
    // Same secret, MCP's key and prefix: neither one's handle opens as the other's.
    const mcp = await TaskHandleSealer.fromSecret(SECRET);
    const mcpHandle = (await mcp.seal({ approvalId: "ap_1", tenant: "acme", key: "k1", endpoint: "helpdesk", server: "s", tool: "t", arguments: {}, issuedAt: 0, expiresAt: 1_000 }))!;
    expect(isApprovalTaskId(mcpHandle)).toBe(false);
    expect((await sealer.open(`ga1.${mcpHandle.slice(3)}`, owner, "helpdesk", 0)).ok).toBe(false);
    expect((await mcp.open(`t1.${sealed.slice(4)}`, owner, 0)).ok).toBe(false);
    for (const junk of ["", "ga1", "ga1.x", "ga1.!!.??", `ga2.${iv}.${body}`, `${sealed}.extra`]) expect((await sealer.open(junk, owner, "helpdesk", 0)).ok, junk).toBe(false);
    for (const id of [undefined, 7, "task-1", "t1.a.b", "ga1"]) expect(isApprovalTaskId(id), String(id)).toBe(false);
  });

  it("bounds the message it carries, and reads no oversized handle", async () => {
    const sealer = await AgentTaskHandleSealer.fromSecret(SECRET);
    const big = (n: number) => ({ ...handle, message: { ...handle.message, parts: [{ text: "x".repeat(n) }] } });
    expect((await sealer.open((await sealer.seal(big(MAX_HELD_MESSAGE_BYTES - 200)))!, owner, "helpdesk", 0)).ok).toBe(true);
    expect(await sealer.seal(big(MAX_HELD_MESSAGE_BYTES))).toBeUndefined();
    expect(await sealer.open(`ga1.${"A".repeat(16)}.${"A".repeat(70_000)}`, owner, "helpdesk", 0)).toEqual({ ok: false, why: "malformed" });
  });
});
