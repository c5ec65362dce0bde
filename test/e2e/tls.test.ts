import { once } from "node:events";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request, type Server } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import OpenAI from "openai";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readConfigDir } from "../../cli/config-dir.ts";
import { checkCredentials } from "../../cli/credential-check.ts";
import { startServe, type ServedGateway } from "../../cli/commands/serve.ts";
import { freePort } from "../../local-stack/ports.ts";
import { fetchTrusting } from "./support/https-fetch.ts";
import { ADMIN_TOKEN, allowingSimulators, bundledConfig, DEMO_KEY } from "./support/stack.ts";
import { createTestCa, type TestCa } from "./support/test-ca.ts";

// The test CA and certificates are made with the openssl CLI (see support/test-ca.ts).
let ca: TestCa;
let upstream: Server;
let upstreamUrl: string;
let gateway: ServedGateway;
let work: string;
let gatewayFetch: typeof fetch;
let config: Awaited<ReturnType<typeof readConfigDir>>;
let clientPair: { cert: string; key: string };
/** What reached the upstream: requests its handler answered, and handshakes it refused. */
const seen = { posts: 0, heads: 0, refusedHandshakes: 0, clientNames: new Set<string>() };

beforeAll(async () => {
  ca = createTestCa();
  const server = ca.issue("upstream.test", "server", "DNS:upstream.test");
  const client = ca.issue("sluice-client", "client", "DNS:sluice-client");
  const inbound = ca.issue("gateway", "server", "IP:127.0.0.1");
  // The private model server: trusts only the test CA and refuses a connection without a client certificate.
  upstream = createServer({ cert: server.cert, key: server.key, ca: ca.cert, requestCert: true, rejectUnauthorized: true, minVersion: "TLSv1.2" }, (req, res) => {
    seen.clientNames.add(String((req.socket as TLSSocket).getPeerCertificate().subject?.CN));
    if (req.method === "HEAD") {
      seen.heads++;
      res.writeHead(405).end();
      return;
    }
    if (req.method === "GET") {
      // The model list a credential check reads: this server's key is "upstream-key".
      const ok = req.headers.authorization === "Bearer upstream-key";
      res.writeHead(ok ? 200 : 401, { "content-type": "application/json" }).end(ok ? '{"object":"list","data":[]}' : '{"error":{"message":"bad key"}}');
      return;
    }
    seen.posts++;
    let raw = "";
    req.on("data", (c: Buffer) => (raw += c.toString()));
    req.on("end", () => {
      const body = JSON.parse(raw) as { model: string };
      res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          id: `chatcmpl-${seen.posts}`,
          object: "chat.completion",
          created: Math.floor(Date.now() / 1000),
          model: body.model,
          choices: [{ index: 0, message: { role: "assistant", content: "served over mTLS" }, finish_reason: "stop" }],
          usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 },
        }),
      );
    });
  });
  upstream.on("tlsClientError", () => seen.refusedHandshakes++);
  upstream.listen(0, "127.0.0.1");
  await once(upstream, "listening");
  const port = (upstream.address() as { port: number }).port;
  upstreamUrl = `https://127.0.0.1:${port}`;

  // Two backends at the one upstream: "mtls" presents the client certificate, "nocert" does not.
  // Both trust only the test CA and verify the name upstream.test (the URL names an IP address).
  const tls = { ca: ca.cert, serverName: "upstream.test" };
  const backend = (name: string, extra: Record<string, unknown>) => ({
    name,
    protocol: "openai-chat",
    baseUrl: `${upstreamUrl}/v1`,
    capabilities: ["chat", "streaming", "stream-usage", "tools", "images", "json-schema", "embeddings", "moderations", "logprobs"],
    connectCheck: true,
    tls: { ...tls, ...extra },
  });
  const backends = bundledConfig("backends");
  backends.backends = [
    backend("mtls", { binding: "MTLS_CLIENT", clientCertificate: { certificateSecret: "E2E_CLIENT_CERT", keySecret: "E2E_CLIENT_KEY" } }),
    backend("nocert", { binding: "TLS_NO_CLIENT" }),
  ];
  for (const p of backends.pools) {
    p.selector = "round-robin";
    p.members = p.name === "sim-large" ? [{ backend: "nocert", model: "sim-large" }, { backend: "mtls", model: "sim-large" }] : p.members.map((m: { model: string }) => ({ backend: "mtls", model: m.model }));
  }
  const gw = allowingSimulators(bundledConfig("gateway"), upstreamUrl);
  // Exact attempt counts below: an opening breaker would steer requests away from "nocert".
  gw.breaker = { ...gw.breaker, enabled: false };
  work = mkdtempSync(join(tmpdir(), "sluice-tls-"));
  const dir = join(work, "config");
  mkdirSync(dir);
  writeFileSync(join(dir, "gateway.yaml"), stringify(gw));
  writeFileSync(join(dir, "publication.yaml"), stringify(bundledConfig("publication")));
  writeFileSync(join(dir, "backends.yaml"), stringify(backends));
  config = await readConfigDir(dir);
  clientPair = client;
  gateway = await startServe({
    config,
    stateDir: join(work, "state"),
    publicAddress: { host: "127.0.0.1", port: await freePort() },
    adminAddress: { host: "127.0.0.1", port: await freePort() },
    env: { ...process.env, SLUICE_ADMIN_TOKEN: ADMIN_TOKEN, E2E_CLIENT_CERT: client.cert, E2E_CLIENT_KEY: client.key },
    publicTls: { certFile: inbound.certFile, keyFile: inbound.keyFile },
    progress: () => {},
  });
  gatewayFetch = fetchTrusting(ca.cert);
}, 180_000);

afterAll(async () => {
  await gateway?.kill();
  upstream?.close();
  ca?.remove();
  if (work) rmSync(work, { recursive: true, force: true });
});

const ask = (model: string, headers: Record<string, string> = {}) =>
  gatewayFetch(`${gateway.publicUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json", ...headers },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }),
  });

describe("TLS: inbound with a private CA, an upstream that requires a client certificate", () => {
  it("serves the official SDK over inbound TLS, through the upstream's mTLS", async () => {
    expect(gateway.publicUrl.startsWith("https://127.0.0.1:")).toBe(true);
    const client = new OpenAI({ apiKey: DEMO_KEY, baseURL: `${gateway.publicUrl}/v1`, fetch: gatewayFetch, maxRetries: 0 });
    const before = seen.posts;
    const answer = await client.chat.completions.create({ model: "sluice-chat", messages: [{ role: "user", content: "hello" }] });
    expect(answer.choices[0]!.message.content).toBe("served over mTLS");
    expect(seen.posts).toBe(before + 1);
    // The upstream saw the gateway's client certificate.
    expect(seen.clientNames.has("sluice-client")).toBe(true);
  });

  it("the inbound listener speaks TLS only: a client that does not trust the test CA is refused", async () => {
    await expect(fetch(`${gateway.publicUrl}/ready`)).rejects.toThrow();
  });

  it("the upstream really refuses a connection without a client certificate", async () => {
    const refused = await new Promise<boolean>((resolve) => {
      const req = request(`${upstreamUrl}/v1/models`, { ca: ca.cert, servername: "upstream.test" }, (res) => {
        res.resume();
        resolve(false);
      });
      req.on("error", () => resolve(true));
      req.end();
    });
    expect(refused).toBe(true);
  });

  it("a handshake refused for want of a certificate is known-zero: retried on the next backend, never sent", async () => {
    const posts = seen.posts;
    const refusals = seen.refusedHandshakes;
    // sluice-chat's premium route serves chat-large (pool sim-large: nocert, then mtls, round-robin) with up to 3 attempts.
    const results = await Promise.all(Array.from({ length: 6 }, () => ask("sluice-chat", { "x-sluice-tier": "premium" })));
    expect(results.map((r) => r.status)).toEqual(Array(6).fill(200));
    const attempts = results.map((r) => (r.headers.get("x-sluice-attempts") ?? "").split(", ").length);
    // Some went to nocert first: one refused handshake each, then one attempt at mtls.
    const twice = attempts.filter((n) => n === 2).length;
    expect(twice).toBeGreaterThan(0);
    expect(attempts.every((n) => n === 1 || n === 2)).toBe(true);
    // Exactly one request per client request reached the upstream's handler: nothing was sent twice.
    expect(seen.posts - posts).toBe(6);
    // No retry storm: one refused handshake per attempt at nocert, no more.
    expect(seen.refusedHandshakes - refusals).toBe(twice);
  });

  it("without another backend, the refusal is 502 upstream_unreachable after one attempt", async () => {
    const posts = seen.posts;
    const refusals = seen.refusedHandshakes;
    // sluice-large allows one attempt: round-robin puts some requests on nocert.
    const results = await Promise.all(Array.from({ length: 4 }, () => ask("sluice-large")));
    const failed = results.filter((r) => r.status !== 200);
    expect(failed.length).toBeGreaterThan(0);
    for (const r of failed) {
      expect(r.status).toBe(502);
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe("upstream_unreachable");
      expect(r.headers.get("x-sluice-attempts")?.split(", ").length).toBe(1);
    }
    expect(seen.posts - posts).toBe(results.length - failed.length);
    expect(seen.refusedHandshakes - refusals).toBe(failed.length);
  });
});

describe("serve --check-credentials over a backend's own TLS", () => {
  it("checks the key over the backend's CA, server name and client certificate; a wrong key is refused, no client certificate is no answer", async () => {
    const withKey = (name: string) => ({ ...config.seedBackends.find((b) => b.name === name)!, credential: { scheme: "bearer" as const, secret: "E2E_UPSTREAM_KEY" } });
    const env = { E2E_CLIENT_CERT: clientPair.cert, E2E_CLIENT_KEY: clientPair.key };
    const [good, wrong, nocert] = await Promise.all([
      checkCredentials([withKey("mtls")], { ...env, E2E_UPSTREAM_KEY: "upstream-key" }),
      checkCredentials([withKey("mtls")], { ...env, E2E_UPSTREAM_KEY: "not-the-key" }),
      checkCredentials([withKey("nocert")], { ...env, E2E_UPSTREAM_KEY: "upstream-key" }),
    ]);
    expect(good).toEqual([{ backend: "mtls", secret: "E2E_UPSTREAM_KEY", result: "accepted", detail: `200 GET ${upstreamUrl}/v1/models` }]);
    expect(wrong[0]).toMatchObject({ result: "refused", detail: `401 GET ${upstreamUrl}/v1/models` });
    expect(nocert[0]).toMatchObject({ result: "inconclusive", detail: expect.stringMatching(/^no answer \(/) });
  });
});
