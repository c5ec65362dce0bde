/**
 * Reproduces the tiny-chunk stall: one client sends a request body in tiny chunks over a raw
 * socket while another sends ordinary requests; prints how long the tiny-chunk upload took and
 * what it did to the other client's latency. See docs/performance.md.
 *
 *   npm run bench:tiny-chunks -- [--body-bytes 262144] [--chunk 16] [--framing chunked|length] [--probes 20]
 *
 * `chunked` frames every chunk with HTTP chunked encoding, so the server sees each one as its own
 * read whatever TCP does; `length` sends a content-length body in paced tiny writes.
 */
import { existsSync, readFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { SIMULATOR_API_KEY, startGateway, startSimulatorProcess } from "../local-stack/stack.ts";
import { chunkedWire } from "../local-stack/chunked-wire.ts";
import { ROOT } from "../local-stack/build.ts";
import { allowingSimulator } from "./sluice-config.ts";

const { values } = parseArgs({
  options: {
    "body-bytes": { type: "string", default: "262144" },
    chunk: { type: "string", default: "16" },
    framing: { type: "string", default: "chunked" },
    probes: { type: "string", default: "20" },
  },
});
const bodyBytes = Number(values["body-bytes"]);
const chunk = Number(values.chunk);
const framing = values.framing === "length" ? "length" : "chunked";
const probes = Number(values.probes);

const DEMO_KEY = "sk-sluice-demo";

/** A valid chat request of exactly `n` bytes (ASCII padding in the user message). */
function requestOfSize(n: number): Buffer {
  const shell = JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: "" }], max_tokens: 4 });
  const pad = "x".repeat(Math.max(0, n - shell.length));
  return Buffer.from(JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: pad }], max_tokens: 4 }));
}

/** Sends `body` in `chunk`-byte pieces on a raw socket; resolves with the status line and the time to it. */
function tinyChunkUpload(url: URL, body: Buffer): Promise<{ status: string; ms: number }> {
  // Built before the clock starts: building it is slow in Node and would stall this process, not the gateway.
  const wire = framing === "chunked" ? chunkedWire(body, chunk) : undefined;
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const sock = connect({ host: url.hostname, port: Number(url.port) });
    sock.setNoDelay(true);
    let answer = "";
    sock.on("data", (d) => {
      answer += d.toString("latin1");
      const line = answer.split("\r\n")[0];
      if (answer.includes("\r\n\r\n") && line) {
        resolve({ status: line, ms: performance.now() - started });
        sock.destroy();
      }
    });
    sock.on("error", reject);
    sock.on("close", () => reject(new Error(`closed before a response: ${JSON.stringify(answer.slice(0, 200))}`)));
    sock.on("connect", async () => {
      const head =
        `POST /v1/chat/completions HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${DEMO_KEY}\r\ncontent-type: application/json\r\n` +
        (wire ? "transfer-encoding: chunked\r\n\r\n" : `content-length: ${body.length}\r\n\r\n`);
      sock.write(head);
      // One big write of many tiny HTTP chunks: the sender is fast, the framing keeps reads tiny.
      if (wire) return void sock.write(wire);
      for (let i = 0; i < body.length; i += chunk) {
        if (!sock.write(body.subarray(i, i + chunk))) await new Promise((r) => sock.once("drain", r));
        // Yield so each piece leaves as its own segment instead of being coalesced.
        await new Promise((r) => setImmediate(r));
      }
    });
  });
}

async function probe(base: string): Promise<number> {
  const t = performance.now();
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: "hi" }], max_tokens: 4 }),
  });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`probe got ${res.status}`);
  return performance.now() - t;
}

/** The gateway's peak resident memory in MiB (Linux), or null where /proc is not available. */
function peakRssMiB(pid: number | undefined): number | null {
  const file = `/proc/${pid}/status`;
  if (pid === undefined || !existsSync(file)) return null;
  const kb = /VmHWM:\s+(\d+)/.exec(readFileSync(file, "utf8"))?.[1];
  return kb === undefined ? null : Math.round(Number(kb) / 1024);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const sim = await startSimulatorProcess({ apiKey: SIMULATOR_API_KEY });
const backends = `version: 1
backends:
  - { name: sim-local, protocol: openai-chat, baseUrl: "${sim.url}/v1", credential: { secret: SIMULATOR_API_KEY, scheme: bearer }, capabilities: [chat, streaming, stream-usage, tools, images, json-schema, embeddings, moderations, logprobs] }
pools:
  - { name: sim-small, selector: p2c, members: [{ backend: sim-local, model: sim-small }] }
  - { name: sim-large, selector: p2c, members: [{ backend: sim-local, model: sim-large }] }
  - { name: sim-embed, selector: p2c, members: [{ backend: sim-local, model: sim-embed }] }
  - { name: sim-moderate, selector: p2c, members: [{ backend: sim-local, model: sim-moderate }] }
  - { name: sim-small-scored, selector: p2c, members: [{ backend: sim-local, model: sim-small }] }
  - { name: sim-large-scored, selector: p2c, members: [{ backend: sim-local, model: sim-large }] }
`;
const gateway = allowingSimulator(readFileSync(join(ROOT, "config", "gateway.yaml"), "utf8"), sim.url);
const gw = await startGateway({ adminToken: "bench-admin-token", config: { backends, gateway }, echo: process.env.ECHO === "1" }).catch(async (e) => {
  await sim.stop();
  throw e;
});
try {
  for (let i = 0; i < 5; i++) await probe(gw.publicUrl);
  const idle: number[] = [];
  for (let i = 0; i < probes; i++) idle.push(await probe(gw.publicUrl));
  const rssBefore = peakRssMiB(gw.process.pid);
  const body = requestOfSize(bodyBytes);
  let done = false;
  const upload = tinyChunkUpload(new URL(gw.publicUrl), body).finally(() => {
    done = true;
  });
  // Probes run one after another for as long as the upload lasts (at least one).
  const busy: number[] = [];
  do busy.push(await probe(gw.publicUrl));
  while (!done);
  const up = await upload;
  console.log(
    JSON.stringify({
      bodyBytes: body.length,
      chunk,
      framing,
      upload: { status: up.status, ms: Math.round(up.ms) },
      gatewayPeakRssMiB: { before: rssBefore, after: peakRssMiB(gw.process.pid) },
      probeIdleMedianMs: +median(idle).toFixed(1),
      probeDuringUpload: { count: busy.length, medianMs: +median(busy).toFixed(1), maxMs: +Math.max(...busy).toFixed(1) },
    }),
  );
} finally {
  await Promise.all([gw.stop(), sim.stop()]);
}
