/**
 * What crosses the gateway's edges, tried against a running gateway: the egress guard at snapshot
 * push, redirects never followed, provider response headers only through a backend's allowlist,
 * caller headers never forwarded nor trusted beyond `security.trustedHeaders`, and CORS closed
 * unless origins are listed. The providers here are small fakes on loopback ports, so a test can
 * send exactly the headers and redirects a real provider might.
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderWorkerdConfig } from "../../cli/workerd-config.ts";
import { buildBundle } from "../../local-stack/build.ts";
import { startGateway, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { FORBIDDEN_TARGETS } from "../runtime/support/egress-targets.ts";
import { ADMIN_TOKEN, allowingSimulators, backendsFor, bundledConfig, DEMO_KEY, expectNothingLeft, startStack, type Stack } from "./support/stack.ts";

/** A fake provider on a loopback port: it records every request and answers as `answer` says. */
interface FakeServer {
  readonly url: string;
  readonly requests: { readonly path: string; readonly headers: IncomingHttpHeaders; readonly body: any }[];
  close(): Promise<void>;
}

type Answer = { status: number; headers: Record<string, string | string[]>; body: string };

async function fakeServer(answer: (path: string, body: any) => Answer): Promise<FakeServer> {
  const requests: FakeServer["requests"][number][] = [];
  const server: Server = createServer((req, res) => {
    let text = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (text += c));
    req.on("end", () => {
      let body: any = null;
      try {
        body = text === "" ? null : JSON.parse(text);
      } catch {
        body = text;
      }
      requests.push({ path: req.url ?? "", headers: req.headers, body });
      const a = answer(req.url ?? "", body);
      res.writeHead(a.status, a.headers);
      res.end(a.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** What a careless provider sends besides its answer. */
const PROVIDER_HEADERS = {
  "set-cookie": ["session=provider-secret; Path=/", "tracking=1"],
  server: "nginx/1.25.3",
  "x-powered-by": "Express",
  via: "1.1 provider-cdn",
  "keep-alive": "timeout=5",
  "x-request-id": "prov-req-1",
  "openai-processing-ms": "7",
  "x-ratelimit-remaining-requests": "99",
};

function chatAnswer(body: any): Answer {
  if (body?.stream) {
    const chunk = (delta: object, finish: string | null) => ({ id: "c1", object: "chat.completion.chunk", created: 1, model: body.model, choices: [{ index: 0, delta, finish_reason: finish }] });
    const events = [
      chunk({ role: "assistant", content: "Hi" }, null),
      chunk({}, "stop"),
      { id: "c1", object: "chat.completion.chunk", created: 1, model: body.model, choices: [], usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 } },
    ];
    return {
      status: 200,
      headers: { ...PROVIDER_HEADERS, "content-type": "text/event-stream" },
      body: events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join("") + "data: [DONE]\n\n",
    };
  }
  return {
    status: 200,
    headers: { ...PROVIDER_HEADERS, "content-type": "application/json" },
    body: JSON.stringify({
      id: "c1",
      object: "chat.completion",
      created: 1,
      model: body?.model,
      choices: [{ index: 0, message: { role: "assistant", content: "Hi" }, finish_reason: "stop" }],
      usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 },
    }),
  };
}

const CAPS = ["chat", "streaming", "stream-usage", "tools", "images", "json-schema", "embeddings", "moderations", "logprobs"];

const chat = (gw: RunningGateway, model: string, extra: Record<string, string> = {}, stream = false) =>
  fetch(`${gw.publicUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json", ...extra },
    body: JSON.stringify({ model, stream, messages: [{ role: "user", content: "hello" }] }),
  });

describe("a gateway between fake providers", () => {
  let provider: FakeServer;
  let redirector: FakeServer;
  let trap: FakeServer;
  let gateway: RunningGateway;

  beforeAll(async () => {
    provider = await fakeServer((_path, body) => chatAnswer(body));
    trap = await fakeServer((_path, body) => chatAnswer(body));
    redirector = await fakeServer(() => ({ status: 307, headers: { location: `${trap.url}/v1/chat/completions` }, body: "" }));
    // sluice-chat reaches the provider (small pool), sluice-large the redirector (large pool).
    const backends = {
      version: 1,
      backends: [
        { name: "prov", protocol: "openai-chat", baseUrl: `${provider.url}/v1`, credential: { secret: "SIMULATOR_API_KEY" }, capabilities: CAPS, responseHeaders: ["openai-processing-ms", "x-ratelimit-remaining-requests", "x-request-id"] },
        { name: "redir", protocol: "openai-chat", baseUrl: `${redirector.url}/v1`, credential: { secret: "SIMULATOR_API_KEY" }, capabilities: CAPS },
      ],
      pools: [
        { name: "sim-small", members: [{ backend: "prov", model: "small-upstream" }] },
        { name: "sim-large", members: [{ backend: "redir", model: "large-upstream" }] },
        { name: "sim-embed", members: [{ backend: "prov", model: "embed-upstream" }] },
        { name: "sim-moderate", members: [{ backend: "prov", model: "moderate-upstream" }] },
        { name: "sim-small-scored", members: [{ backend: "prov", model: "sim-small" }] },
        { name: "sim-large-scored", members: [{ backend: "prov", model: "sim-large" }] },
      ],
    };
    // x-sluice-tier is not trusted here, so no route may read it.
    const gw = allowingSimulators(bundledConfig("gateway"), provider.url, redirector.url, trap.url);
    gw.security.trustedHeaders = ["x-sluice-session", "x-sluice-end-user"];
    gw.breaker = { enabled: false };
    const pub = bundledConfig("publication");
    for (const ep of pub.entrypoints) ep.routes = (ep.routes ?? []).filter((r: any) => r.when?.header?.name !== "x-sluice-tier");
    gateway = await startGateway({ adminToken: ADMIN_TOKEN, config: { gateway: stringify(gw), publication: stringify(pub), backends: stringify(backends) } });
  });

  afterAll(async () => {
    try {
      if (gateway) await expectNothingLeft(gateway.adminUrl);
    } finally {
      await gateway?.stop();
      await Promise.all([provider, redirector, trap].map((s) => s?.close()));
    }
  });

  it("passes only the provider headers the backend lists; cookies, server software and hop-by-hop never", async () => {
    for (const stream of [false, true]) {
      const res = await chat(gateway, "sluice-chat", {}, stream);
      expect(res.status).toBe(200);
      await res.text();
      expect(res.headers.get("openai-processing-ms")).toBe("7");
      expect(res.headers.get("x-ratelimit-remaining-requests")).toBe("99");
      // Listed, but the gateway's own request-id header wins the clash.
      expect(res.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]{32}$/);
      for (const h of ["set-cookie", "x-powered-by", "via", "keep-alive"]) expect(res.headers.get(h), `${h} (stream: ${stream})`).toBeNull();
      expect(res.headers.get("server") ?? "").not.toContain("nginx");
    }
  });

  it("forwards nothing the caller sends, and an x-sluice-* header outside trustedHeaders changes nothing", async () => {
    const before = provider.requests.length;
    const caller = {
      "x-sluice-tier": "premium",
      "x-sluice-backend": "redir",
      "x-sluice-budget": "unchecked",
      "x-sluice-attempts": "att_forged",
      "x-forwarded-for": "10.0.0.1",
      "x-real-ip": "10.0.0.1",
      cookie: "session=caller-cookie",
      "x-api-key": "sk-caller-other-key",
      "openai-organization": "org-caller",
      "x-custom-caller": "caller-value",
    };
    const res = await chat(gateway, "sluice-chat", caller);
    expect(res.status).toBe(200);
    await res.text();
    // Not premium: the default tier's pool, i.e. the provider and its small model, not the redirector.
    expect(provider.requests.length).toBe(before + 1);
    const sent = provider.requests.at(-1)!;
    expect(sent.body.model).toBe("small-upstream");
    expect(redirector.requests).toHaveLength(0);
    // The upstream request carries the gateway's own headers only, and the provider's key.
    const names = Object.keys(sent.headers);
    for (const name of Object.keys(caller)) expect(names, name).not.toContain(name);
    const values = JSON.stringify(sent.headers);
    for (const value of [...Object.values(caller), DEMO_KEY]) expect(values, value).not.toContain(value);
    expect(sent.headers.authorization).toBe(`Bearer ${SIMULATOR_API_KEY}`);
    // And the caller's x-sluice-* never comes back as if the gateway had said it.
    expect(res.headers.get("x-sluice-budget")).toBeNull();
    expect(res.headers.get("x-sluice-attempts")).not.toContain("att_forged");
  });

  it("never follows a provider's redirect: the client gets 502 and the redirect target is never called", async () => {
    const res = await chat(gateway, "sluice-large");
    expect(res.status).toBe(502);
    expect(res.headers.get("x-sluice-error-code")).toBe("upstream_error");
    expect(res.headers.get("location")).toBeNull();
    expect(await res.text()).not.toContain(trap.url);
    expect(redirector.requests.length).toBeGreaterThan(0);
    expect(trap.requests).toHaveLength(0);
  });

  it("sends no CORS header and grants no preflight when no origin is configured", async () => {
    const preflight = await fetch(`${gateway.publicUrl}/v1/chat/completions`, {
      method: "OPTIONS",
      headers: { origin: "https://app.example.com", "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type" },
    });
    await preflight.text();
    expect(preflight.status).not.toBe(204);
    expect([...preflight.headers.keys()].filter((h) => h.startsWith("access-control-"))).toEqual([]);
    const res = await chat(gateway, "sluice-chat", { origin: "https://app.example.com" });
    await res.text();
    expect(res.status).toBe(200);
    expect([...res.headers.keys()].filter((h) => h.startsWith("access-control-") || h === "vary")).toEqual([]);
  });
});

describe("the egress guard at snapshot push", () => {
  let stack: Stack;

  beforeAll(async () => {
    stack = await startStack();
  });

  afterAll(async () => {
    await stack?.stop();
  });

  it("rejects every snapshot that names a forbidden target, with the reason, and keeps the active one", async () => {
    const revision = async () => ((await (await stack.admin("/admin/status")).json()) as any).snapshot.revision;
    const active = await revision();
    for (const { url, what } of FORBIDDEN_TARGETS) {
      const candidate = backendsFor(stack.sims[0]!.url);
      candidate.backends[0].baseUrl = url;
      const res = await stack.admin("/admin/snapshot", { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify(candidate) });
      expect(res.status, what).toBe(422);
      const body = (await res.json()) as any;
      expect(body.error.code, what).toBe("snapshot_rejected");
      expect(body.error.details, what).toContainEqual(expect.objectContaining({ path: "backends[0].baseUrl" }));
    }
    const metadata = backendsFor(stack.sims[0]!.url);
    metadata.backends[0].baseUrl = "http://169.254.169.254/latest";
    const res = await stack.admin("/admin/snapshot", { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify(metadata) });
    expect(((await res.json()) as any).error.details).toEqual([
      { code: "url_not_allowed", path: "backends[0].baseUrl", message: "http://169.254.169.254 is a cloud metadata service, which is never allowed" },
    ]);
    expect(await revision()).toBe(active);
    expect((await chat(stack.gateway, "sluice-chat")).status).toBe(200);
  });
});

describe("CORS with listed origins", () => {
  const APP = "https://app.example.com";
  let stack: Stack;

  beforeAll(async () => {
    const gw = bundledConfig("gateway");
    gw.security.cors = { allowOrigins: [APP] };
    stack = await startStack({ gateway: gw });
  });

  afterAll(async () => {
    await stack?.stop();
  });

  const preflight = (origin: string, method = "POST", headers = "authorization, content-type, x-stainless-os") =>
    fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
      method: "OPTIONS",
      headers: { origin, "access-control-request-method": method, "access-control-request-headers": headers },
    });

  it("grants a listed origin's preflight, and only for the methods the API answers", async () => {
    const res = await preflight(APP);
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe(APP);
    expect(res.headers.get("access-control-allow-methods")).toBe("GET, POST");
    expect(res.headers.get("access-control-allow-headers")).toBe("authorization, content-type, x-stainless-os");
    expect(res.headers.get("access-control-allow-credentials")).toBeNull();
    expect(res.headers.get("vary")).toContain("Origin");
    const del = await preflight(APP, "DELETE");
    await del.text();
    expect(del.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("grants nothing to an origin that is not listed", async () => {
    for (const origin of ["https://evil.example.com", "https://app.example.com.evil.com", "http://app.example.com", "null"]) {
      const res = await preflight(origin);
      await res.text();
      expect(res.status, origin).not.toBe(204);
      expect([...res.headers.keys()].filter((h) => h.startsWith("access-control-")), origin).toEqual([]);
    }
  });

  it("lets a listed origin read the answer and the gateway's headers; another origin gets no grant", async () => {
    const ok = await chat(stack.gateway, "sluice-chat", { origin: APP });
    await ok.text();
    expect(ok.status).toBe(200);
    expect(ok.headers.get("access-control-allow-origin")).toBe(APP);
    const exposed = (ok.headers.get("access-control-expose-headers") ?? "").split(", ");
    expect(exposed).toEqual(expect.arrayContaining(["x-request-id", "x-sluice-attempts"]));
    expect(exposed).not.toContain("content-type");
    expect(ok.headers.get("vary")).toBe("Origin");
    const other = await chat(stack.gateway, "sluice-chat", { origin: "https://evil.example.com" });
    await other.text();
    expect(other.status).toBe(200);
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
    expect(other.headers.get("vary")).toBe("Origin");
    // An error answer to a listed origin is readable too, its error code header included.
    const bad = await fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, { method: "POST", headers: { origin: APP, "content-type": "application/json" }, body: "{}" });
    await bad.text();
    expect(bad.status).toBe(401);
    expect(bad.headers.get("access-control-allow-origin")).toBe(APP);
    expect(bad.headers.get("access-control-expose-headers")).toContain("x-sluice-error-code");
  });
});

describe("workerd's own network allow list", () => {
  it("opens public addresses and only the private ones the egress allowlist names", () => {
    const bundleDir = buildBundle();
    const dir = mkdtempSync(join(tmpdir(), "sluice-network-"));
    try {
      const render = (gateway?: unknown) => {
        const files: { gateway?: string } = {};
        if (gateway !== undefined) {
          files.gateway = join(dir, "gateway.yaml");
          writeFileSync(files.gateway, typeof gateway === "string" ? gateway : stringify(gateway));
        }
        const capnp = renderWorkerdConfig({ configDir: dir, bundleDir, publicAddress: "127.0.0.1:1", adminAddress: "127.0.0.1:2", stateDir: dir, compatibilityDate: "2026-08-15", compatibilityFlags: [], vars: {}, secretsFromEnv: [], configFiles: files });
        return /\(name = "internet", network = \(allow = \[([^\]]*)\]\)\)/.exec(capnp)?.[1];
      };
      expect(readdirSync(bundleDir).some((f) => f.endsWith("gateway.yaml"))).toBe(true);
      expect(render()).toBe('"public", "127.0.0.1/32"');
      const g = bundledConfig("gateway");
      g.security.egress.allow = ["127.0.0.1:9901", "127.0.0.1:9902", "[::1]:8080"];
      expect(render(g)).toBe('"public", "127.0.0.1/32", "0:0:0:0:0:0:0:1/128"');
      g.security.egress.allow = [];
      expect(render(g)).toBe('"public"');
      expect(render("version: 1\nnot: [valid")).toBe('"public"');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
