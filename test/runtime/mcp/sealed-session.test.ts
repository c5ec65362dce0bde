import { describe, expect, it } from "vitest";
import { SessionSealer, type SessionState } from "../../../src/mcp/sealed-session.ts";

const SECRET_A = "a".repeat(16) + "-first-session-secret-0123456789";
const SECRET_B = "b".repeat(16) + "-second-session-secret-987654321";
const state: SessionState = {
  principal: "acme/analyst-1",
  protocolVersion: "2025-11-25",
  clientCapabilities: { elicitation: {} },
  upstream: { github: "upstream-session-1" },
  expiresAt: 10_000,
};

describe("sealed MCP session ids", () => {
  it("round-trips the state on any sealer with the secret, as visible ASCII", async () => {
    const id = await (await SessionSealer.fromSecrets([SECRET_A])).seal(state);
    expect(id).toMatch(/^s1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    // Another isolate: only the secret is shared.
    const other = await SessionSealer.fromSecrets([SECRET_A]);
    expect(await other.open(id, state.principal, 5_000)).toEqual({ ok: true, state });
    // Two seals of one state differ (random IV): ids reveal nothing by equality.
    expect(await (await SessionSealer.fromSecrets([SECRET_A])).seal(state)).not.toBe(id);
  });

  it("refuses another principal, an expired id, a tampered one and a malformed one", async () => {
    const sealer = await SessionSealer.fromSecrets([SECRET_A]);
    const id = await sealer.seal(state);
    expect(await sealer.open(id, "other/key", 5_000)).toEqual({ ok: false, reason: "other_principal" });
    expect(await sealer.open(id, state.principal, 10_000)).toEqual({ ok: false, reason: "expired" });
    const parts = id.split(".");
    // The second-to-last character (every bit of it is data) changed to another one.
    const flipped = parts[3]!.slice(0, -2) + (parts[3]!.at(-2) === "A" ? "B" : "A") + parts[3]!.slice(-1);
    expect(await sealer.open([parts[0], parts[1], parts[2], flipped].join("."), state.principal, 5_000)).toEqual({ ok: false, reason: "tampered" });
    for (const bad of ["", "s1.x", "s2.a.b.c", `${id}.extra`, "s1.k.!!.x", "x".repeat(9000)]) expect((await sealer.open(bad, state.principal, 5_000)).ok, bad).toBe(false);
  });

  it("rotates keys: the first seals, every listed key opens, a retired key's ids are refused", async () => {
    const old = await SessionSealer.fromSecrets([SECRET_A]);
    const oldId = await old.seal(state);
    const rotated = await SessionSealer.fromSecrets([SECRET_B, SECRET_A]);
    expect((await rotated.open(oldId, state.principal, 5_000)).ok).toBe(true);
    const newId = await rotated.seal(state);
    expect(newId.split(".")[1]).not.toBe(oldId.split(".")[1]);
    const retired = await SessionSealer.fromSecrets([SECRET_B]);
    expect(await retired.open(oldId, state.principal, 5_000)).toEqual({ ok: false, reason: "unknown_key" });
    expect((await retired.open(newId, state.principal, 5_000)).ok).toBe(true);
  });

  it("refuses short secrets and an empty key list", async () => {
    await expect(SessionSealer.fromSecrets(["short"])).rejects.toThrow(/at least 32 bytes/);
    await expect(SessionSealer.fromSecrets([])).rejects.toThrow(/at least one/);
  });
});
