/**
 * A client that goes away reaches the request's terminal in every phase: queued for admission,
 * waiting for the provider's headers, and streaming. Under `workerd serve` the runtime reports a
 * disconnect it can see (a reset connection) through `request.signal`; a quiet close (FIN) of a
 * request still waiting for its answer is only noticed when the answer is written, and the
 * request must still give everything back then.
 */
import type { Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rawSocket } from "./support/raw-http.ts";
import { bundledConfig, DEMO_KEY, expectResourcesReleased, resourcesHeld, startStack, type Stack } from "./support/stack.ts";

let stack: Stack;
beforeAll(async () => {
  const gateway = bundledConfig("gateway");
  gateway.admission = { maxConcurrent: 1, maxQueue: 4, maxQueuePerTenant: 4 };
  stack = await startStack({ gateway });
});
afterAll(async () => {
  await stack?.stop();
});

/** A chat request on a raw socket, so the test chooses how the client leaves. */
async function rawRequest(content: string, stream = false): Promise<Socket> {
  const url = new URL(stack.gateway.publicUrl);
  const body = JSON.stringify({ model: "sluice-chat", stream, messages: [{ role: "user", content }] });
  const socket = await rawSocket(stack.gateway.publicUrl);
  socket.on("error", () => {});
  socket.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${DEMO_KEY}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  return socket;
}

const ask = (content: string) =>
  fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content }] }),
  });

async function until<T>(what: string, probe: () => Promise<T>, ok: (v: T) => boolean, waitMs = 10_000): Promise<T> {
  const end = Date.now() + waitMs;
  for (;;) {
    const v = await probe();
    if (ok(v)) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}: last ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const simStats = () => stack.simStats(stack.sims[0]!) as Promise<{ total: number; inFlight: number; outcomes: Record<string, number> }>;
const attemptLines = () =>
  stack.gateway
    .output()
    .split("\n")
    .filter((l) => l.startsWith('{"kind":"request"'))
    .flatMap((l) => (JSON.parse(l) as { attempts: { outcome: string; errorCode?: string }[] }).attempts);

describe("client disconnects reach the terminal in every phase", () => {
  it("a client that resets while queued leaves the queue at once and is never sent upstream", async () => {
    await fetch(`${stack.sims[0]!.url}/__sim/reset`, { method: "POST" });
    const holder = ask("hold the slot [[sim latency-ms=1500]]");
    await until("the holder to reach the provider", simStats, (s) => s.inFlight === 1);
    const queued = await rawRequest("queued");
    await until("the request to queue", () => resourcesHeld(stack.gateway.adminUrl), (r) => r.admissionQueued === 1);
    queued.resetAndDestroy();
    const after = await until("the queue to empty", () => resourcesHeld(stack.gateway.adminUrl), (r) => r.admissionQueued === 0);
    expect(after.requestsInFlight).toBe(1); // only the holder
    expect((await holder).status).toBe(200);
    await expectResourcesReleased(stack.gateway.adminUrl);
    expect((await simStats()).total).toBe(1);
  });

  it("a client that resets while the provider works aborts the upstream call, frees its slot at once, and the attempt is client_cancelled", async () => {
    await fetch(`${stack.sims[0]!.url}/__sim/reset`, { method: "POST" });
    const before = attemptLines().length;
    const socket = await rawRequest("slow answer [[sim latency-ms=4000]]");
    await until("the request to reach the provider", simStats, (s) => s.inFlight === 1);
    const t0 = Date.now();
    socket.resetAndDestroy();
    await until("the upstream call to be aborted", simStats, (s) => s.outcomes["aborted"] === 1);
    await expectResourcesReleased(stack.gateway.adminUrl);
    // Freed long before the provider's 4 s answer would have come.
    expect(Date.now() - t0).toBeLessThan(3500);
    const lines = await until("the attempt's log line", async () => attemptLines().slice(before), (l) => l.length === 1);
    expect(lines[0]).toMatchObject({ outcome: "client_cancelled", errorCode: "client_closed" });
  });

  it("a client that resets mid-stream ends the attempt as client_cancelled and aborts the provider's stream", async () => {
    await fetch(`${stack.sims[0]!.url}/__sim/reset`, { method: "POST" });
    const before = attemptLines().length;
    const socket = await rawRequest("stream [[sim tokens=300 token-interval-ms=20]]", true);
    await new Promise<void>((resolve) => socket.once("data", () => resolve()));
    socket.resetAndDestroy();
    await until("the provider's stream to be aborted", simStats, (s) => s.outcomes["aborted"] === 1);
    await expectResourcesReleased(stack.gateway.adminUrl);
    const lines = await until("the attempt's log line", async () => attemptLines().slice(before), (l) => l.length === 1);
    expect(lines[0]).toMatchObject({ outcome: "client_cancelled", errorCode: "client_closed" });
  });

  it("a client that closes quietly while waiting gives everything back once its answer is written", async () => {
    await fetch(`${stack.sims[0]!.url}/__sim/reset`, { method: "POST" });
    const socket = await rawRequest("quiet close [[sim latency-ms=600]]");
    await until("the request to reach the provider", simStats, (s) => s.inFlight === 1);
    socket.end();
    await until("the provider to answer", simStats, (s) => s.outcomes["completed"] === 1);
    await expectResourcesReleased(stack.gateway.adminUrl);
  });
});
