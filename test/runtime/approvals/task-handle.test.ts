import { describe, expect, it } from "vitest";
import { fromBase64url } from "../../../src/digest/base64url.ts";
import { MAX_TASK_ARGUMENTS_BYTES, TaskHandleSealer, type TaskHandle } from "../../../src/approvals/task-handle.ts";

const handle: TaskHandle = { approvalId: "ap_1", tenant: "acme", key: "k1", endpoint: "files", server: "files", tool: "delete", arguments: { path: "/srv/secret-plan" }, issuedAt: 100, expiresAt: 1_000 };
const owner = { tenant: "acme", key: "k1" };

describe("sealed task handles", () => {
  it("opens what it sealed, for its principal, until it expires; the arguments are not readable in it", async () => {
    const sealer = await TaskHandleSealer.fromSecret("a-secret-of-enough-length");
    const sealed = (await sealer.seal(handle))!;
    expect(sealed).toMatch(/^t1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    // Encrypted, not merely encoded: the ciphertext's bytes do not spell the arguments.
    expect(String.fromCharCode(...fromBase64url(sealed.split(".")[2]!)!)).not.toContain("secret-plan");
    expect(await sealer.open(sealed, owner, 999)).toEqual({ ok: true, handle });
    expect(await sealer.open(sealed, owner, 1_000)).toEqual({ ok: false, why: "expired" });
    // Each seal is fresh (its own IV): two handles of one call differ.
    expect(await sealer.seal(handle)).not.toBe(sealed);
  });

  it("refuses a tampered handle, another secret's, and garbage", async () => {
    const sealer = await TaskHandleSealer.fromSecret("a-secret-of-enough-length");
    const sealed = (await sealer.seal(handle))!;
    const [v, iv, body] = sealed.split(".");
    const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === "A" ? "B" : "A") + s.slice(i + 1);
    expect(await sealer.open(`${v}.${iv}.${flip(body!, 5)}`, owner, 0)).toEqual({ ok: false, why: "tampered" });
    expect(await sealer.open(`${v}.${flip(iv!, 0)}.${body}`, owner, 0)).toEqual({ ok: false, why: "tampered" });
    const other = await TaskHandleSealer.fromSecret("another-secret-of-enough-length");
    expect(await other.open(sealed, owner, 0)).toEqual({ ok: false, why: "tampered" });
    for (const junk of ["", "t1", "t1.x", "t1.!!.??", `t2.${iv}.${body}`, `${sealed}.extra`, `t1.AAAA.${body}`]) expect((await sealer.open(junk, owner, 0)).ok, junk).toBe(false);
  });

  it("is another principal's task to anyone else: another key or tenant does not open it", async () => {
    const sealer = await TaskHandleSealer.fromSecret("a-secret-of-enough-length");
    const sealed = (await sealer.seal(handle))!;
    expect(await sealer.open(sealed, { tenant: "acme", key: "k2" }, 0)).toEqual({ ok: false, why: "other_principal" });
    expect(await sealer.open(sealed, { tenant: "other", key: "k1" }, 0)).toEqual({ ok: false, why: "other_principal" });
  });

  it("bounds the arguments it carries, and reads no oversized handle", async () => {
    const sealer = await TaskHandleSealer.fromSecret("a-secret-of-enough-length");
    const fits = (await sealer.seal({ ...handle, arguments: { blob: "x".repeat(MAX_TASK_ARGUMENTS_BYTES - 20) } }))!;
    expect((await sealer.open(fits, owner, 0)).ok).toBe(true);
    expect(await sealer.seal({ ...handle, arguments: { blob: "x".repeat(MAX_TASK_ARGUMENTS_BYTES) } })).toBeUndefined();
    expect(await sealer.open(`t1.${"A".repeat(16)}.${"A".repeat(70_000)}`, owner, 0)).toEqual({ ok: false, why: "malformed" });
  });

  it("refuses a secret too short to derive a key from", async () => {
    await expect(TaskHandleSealer.fromSecret("short")).rejects.toThrow(RangeError);
  });
});
