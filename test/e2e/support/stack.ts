import { readFileSync } from "node:fs";
import { join } from "node:path";
import OpenAI from "openai";
import { parse, stringify } from "yaml";
import { ROOT } from "../../../local-stack/build.ts";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type Child, type RunningGateway } from "../../../local-stack/stack.ts";
import { testServiceAccount } from "./service-account.ts";

export const DEMO_KEY = "sk-sluice-demo";
export const LIMITED_KEY = "sk-sluice-limited";
export const ADMIN_TOKEN = "e2e-admin-token";

export type Simulator = Child & { url: string };

/** The bundled config file, parsed, for a test to edit. */
export function bundledConfig(file: "gateway" | "publication" | "backends"): any {
  return parse(readFileSync(join(ROOT, "config", `${file}.yaml`), "utf8"));
}

/**
 * A gateway.yaml source whose egress allowlist also names each URL's loopback address (host and
 * port): simulators listen on random ports, and the egress guard lets plain http to loopback
 * through only for listed addresses. Edits `gateway` in place and returns it.
 */
export function allowingSimulators(gateway: any, ...urls: string[]): any {
  gateway.security ??= {};
  gateway.security.egress ??= {};
  const allow: string[] = gateway.security.egress.allow ?? [];
  gateway.security.egress.allow = [...new Set([...allow, ...urls.map((u) => new URL(u).host)])];
  return gateway;
}

/** A backends.yaml source whose one backend points at the given simulator. */
export function backendsFor(simUrl: string, name = "sim-local"): any {
  const b = bundledConfig("backends");
  b.backends[0].baseUrl = `${simUrl}/v1`;
  b.backends[0].name = name;
  for (const p of b.pools) for (const m of p.members) m.backend = name;
  return b;
}

export interface Stack {
  readonly sims: readonly Simulator[];
  readonly gateway: RunningGateway;
  readonly client: OpenAI;
  admin(path: string, init?: RequestInit): Promise<Response>;
  simRequests(sim: Simulator, limit?: number): Promise<any[]>;
  simStats(sim: Simulator): Promise<any>;
  stop(): Promise<void>;
}

/**
 * Starts `simulators` provider simulators and a gateway whose seed snapshot points at the first.
 * Circuit breakers are off unless the given gateway config enables them: fault-injection tests
 * assert exact upstream attempt counts, which an opening breaker would change. The gateway's
 * egress allowlist names every simulator, so snapshots may point at any of them.
 */
export async function startStack(options: { simulators?: number; gateway?: any; publication?: any } = {}): Promise<Stack> {
  const gatewayConfig = options.gateway ?? bundledConfig("gateway");
  gatewayConfig.breaker = { enabled: false, ...gatewayConfig.breaker };
  const sims: Simulator[] = [];
  try {
    for (let i = 0; i < (options.simulators ?? 1); i++) sims.push(await startSimulatorProcess({ apiKey: SIMULATOR_API_KEY }));
    const gateway = await startGateway({
      adminToken: ADMIN_TOKEN,
      config: {
        backends: stringify(backendsFor(sims[0]!.url)),
        gateway: stringify(allowingSimulators(gatewayConfig, ...sims.map((s) => s.url))),
        publication: options.publication === undefined ? undefined : stringify(options.publication),
      },
    });
    const client = new OpenAI({ apiKey: DEMO_KEY, baseURL: `${gateway.publicUrl}/v1`, maxRetries: 0 });
    return {
      sims,
      gateway,
      client,
      admin: (path, init = {}) =>
        fetch(`${gateway.adminUrl}${path}`, { ...init, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(init.headers ?? {}) } }),
      simRequests: async (sim, limit = 50) => {
        const body = (await (await fetch(`${sim.url}/__sim/requests?limit=${limit}`)).json()) as any;
        return Array.isArray(body) ? body : body.requests;
      },
      simStats: async (sim) => (await fetch(`${sim.url}/__sim/stats`)).json(),
      async stop() {
        try {
          await expectNothingLeft(gateway.adminUrl);
        } finally {
          await Promise.all([gateway.stop(), ...sims.map((s) => s.stop())]);
        }
      },
    };
  } catch (err) {
    await Promise.all(sims.map((s) => s.stop()));
    throw err;
  }
}

/**
 * Every attempt a gateway made must end settled, released or pending reconciliation: none may
 * stay `held` once the requests are over. Settlement runs after the response (waitUntil), so the
 * check waits a little for the last ones. Throws naming the attempts still held.
 */
export async function expectBooksClosed(adminUrl: string, waitMs = 5000): Promise<void> {
  const admin = (path: string) => fetch(`${adminUrl}${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }).then((r) => r.json() as Promise<any>);
  const { tenants } = await admin("/admin/budgets");
  for (const t of tenants as { tenant: string }[]) {
    const until = Date.now() + waitMs;
    for (;;) {
      const { attempts } = await admin(`/admin/budgets/${t.tenant}/attempts?state=held&limit=100`);
      if (attempts.length === 0) break;
      if (Date.now() > until) throw new Error(`tenant ${t.tenant}: ${attempts.length} attempt(s) still held: ${attempts.map((a: any) => a.attemptId).join(", ")}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** What the gateway reports holding for requests in flight (`GET /admin/status`). */
export interface ResourcesHeld {
  readonly requestsInFlight: number;
  readonly admissionLeases: number;
  readonly admissionQueued: number;
  readonly backendSlots: number;
  readonly breakerPermits: number;
}

/** The gateway's resource counts now. */
export async function resourcesHeld(adminUrl: string): Promise<ResourcesHeld> {
  const res = await fetch(`${adminUrl}/admin/status`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  return ((await res.json()) as { resources: ResourcesHeld }).resources;
}

/**
 * Once every request is over, the gateway holds nothing: no request in flight, no admission lease
 * or queue place, no backend slot, no breaker probe permit. The last releases may follow the last
 * response by a moment, so the check polls for a while. Throws naming what is still held.
 */
export async function expectResourcesReleased(adminUrl: string, waitMs = 5000): Promise<void> {
  const until = Date.now() + waitMs;
  for (;;) {
    const held = await resourcesHeld(adminUrl);
    if (Object.values(held).every((n) => n === 0)) return;
    if (Date.now() > until) throw new Error(`the gateway still holds resources after every request ended: ${JSON.stringify(held)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Every stack's stop check: the books are closed and nothing is held. */
export async function expectNothingLeft(adminUrl: string): Promise<void> {
  await expectResourcesReleased(adminUrl);
  await expectBooksClosed(adminUrl);
}

/** The protocols a backend may speak over HTTP (the simulator serves each). */
export const BACKEND_PROTOCOLS = ["openai-chat", "openai-responses", "anthropic-messages", "azure-openai", "bedrock-converse", "gemini"] as const;
export type BackendProtocol = (typeof BACKEND_PROTOCOLS)[number];

/** The AWS access key the protocol simulator verifies Bedrock signatures with (a test key, not a secret). */
export const SIM_AWS = { accessKeyId: "AKIAE2ESIMULATOR0001", secretAccessKey: "e2e/simulator+secret0000000000000000000" } as const;

/** The Vertex AI project and location of {@link protocolBackend}'s gemini backend. */
export const SIM_VERTEX = { project: "sluice-e2e", location: "europe-west4" } as const;

/**
 * A simulator that checks every backend protocol's credentials, and the secrets a gateway serving
 * {@link perProtocolConfig}'s backends at it needs besides the simulator's API key, by the names
 * the config gives: the AWS access key its Bedrock backend signs with, and the key file of the
 * service account its Vertex backend mints tokens for (naming this simulator's token endpoint).
 */
export type ProtocolSimulator = Simulator & { readonly secrets: Readonly<Record<string, string>> };

/**
 * Starts a {@link ProtocolSimulator}: it takes the API key, SigV4 signatures made with
 * {@link SIM_AWS}, and bearer tokens its Google token endpoint minted for a service account made
 * for it (whose key file is removed when it stops).
 */
export async function startProtocolSimulator(args: readonly string[] = []): Promise<ProtocolSimulator> {
  const account = testServiceAccount("sluice-gateway@sluice-e2e.iam.gserviceaccount.com");
  try {
    const sim = await startSimulatorProcess({
      apiKey: SIMULATOR_API_KEY,
      args: ["--aws-key", `${SIM_AWS.accessKeyId}:${SIM_AWS.secretAccessKey}`, "--google-service-account", account.path, ...args],
    });
    const secrets = { SIM_AWS_KEY_ID: SIM_AWS.accessKeyId, SIM_AWS_SECRET: SIM_AWS.secretAccessKey, SIM_GOOGLE_SERVICE_ACCOUNT: account.keyFile(`${sim.url}/token`) };
    return {
      ...sim,
      secrets,
      async stop() {
        try {
          await sim.stop();
        } finally {
          account.remove();
        }
      },
    };
  } catch (err) {
    account.remove();
    throw err;
  }
}

/** One backend of each protocol at the simulator, named `name`, for the pool members' models. */
export function protocolBackend(p: BackendProtocol, simUrl: string, caps: readonly string[], name = `sim-${p}`): Record<string, unknown> {
  const common = { name, protocol: p, capabilities: caps };
  switch (p) {
    // Azure's addresses are the resource's endpoint, its deployment paths and an API version.
    case "azure-openai":
      return { ...common, baseUrl: simUrl, apiVersion: "2024-10-21", credential: { secret: "SIMULATOR_API_KEY", scheme: "api-key" } };
    // Bedrock's runtime endpoint and region; every request SigV4-signed with the key the secrets name.
    case "bedrock-converse":
      return { ...common, baseUrl: simUrl, region: "us-east-1", awsCredential: { accessKeyId: "SIM_AWS_KEY_ID", secretAccessKey: "SIM_AWS_SECRET" } };
    // Vertex AI (a project and a location), with bearer tokens the gateway mints from the service account's key file.
    case "gemini":
      return { ...common, baseUrl: simUrl, ...SIM_VERTEX, credential: { kind: "google-service-account", secret: "SIM_GOOGLE_SERVICE_ACCOUNT" } };
    case "anthropic-messages":
      return { ...common, baseUrl: `${simUrl}/v1`, credential: { secret: "SIMULATOR_API_KEY", scheme: "x-api-key" } };
    default:
      return { ...common, baseUrl: `${simUrl}/v1`, credential: { secret: "SIMULATOR_API_KEY", scheme: "bearer" } };
  }
}

/**
 * The model a simulator request asked for, whatever its wire: the body's `model` (OpenAI,
 * Anthropic), the deployment (Azure) or the path's model id (Bedrock, the Gemini API, Vertex AI);
 * undefined for a request that generates nothing (a token mint, a model list).
 */
export function upstreamModel(req: { path: string; body: any }): string | undefined {
  const inPath =
    /^\/openai\/deployments\/([^/]+)\/chat\/completions$/.exec(req.path) ??
    /^\/model\/([^/]+)\/converse(?:-stream)?$/.exec(req.path) ??
    /^\/v1beta\/models\/([^/:]+):(?:generateContent|streamGenerateContent)$/.exec(req.path) ??
    /^\/v1(?:beta1)?\/projects\/[^/]+\/locations\/[^/]+\/publishers\/google\/models\/([^/:]+):(?:generateContent|streamGenerateContent)$/.exec(req.path);
  if (inPath) return decodeURIComponent(inPath[1]!);
  if (["/v1/chat/completions", "/v1/responses", "/v1/messages"].includes(req.path)) return req.body?.model;
  return undefined;
}

/**
 * How many generation requests the simulator has received since its start or last reset: its
 * request count less the token mints among them (a minted credential's first use mints one).
 */
export async function generationCount(sim: Simulator): Promise<number> {
  const stats = (await (await fetch(`${sim.url}/__sim/stats`)).json()) as { total: number; paths: Record<string, number> };
  return stats.total - (stats.paths["/token"] ?? 0);
}

/**
 * A backends source with one simulator backend per wire format (`sim-<protocol>`), each alone in
 * its pool `pool-<protocol>`, and a publication whose model `m-<protocol>` (priced with `price`)
 * serves entrypoint `via-<protocol>`: for tests that run one request shape against every format.
 * The simulator is a {@link ProtocolSimulator}, and the gateway holds its `secrets`.
 */
export function perProtocolConfig(simUrl: string, caps: readonly string[], price: Record<string, unknown>, entrypoint: Record<string, unknown> = {}): { backends: any; publication: any } {
  const backends = {
    version: 1,
    backends: BACKEND_PROTOCOLS.map((p) => protocolBackend(p, simUrl, caps)),
    pools: BACKEND_PROTOCOLS.map((p) => ({ name: `pool-${p}`, members: [{ backend: `sim-${p}`, model: "sim-small" }] })),
  };
  const publication = bundledConfig("publication");
  publication.models = BACKEND_PROTOCOLS.map((p) => ({ id: `m-${p}`, activeRevision: 1, revisions: [{ revision: 1, pool: `pool-${p}`, requires: ["chat"], price }] }));
  publication.entrypoints = BACKEND_PROTOCOLS.map((p) => ({ name: `via-${p}`, default: [[`m-${p}`]], ...entrypoint }));
  // The bundled signals and semantic cache name the bundled entrypoints (the embeddings one).
  publication.signals = [];
  publication.plugins = publication.plugins.filter((p: { model?: string }) => p.model === undefined);
  return { backends, publication };
}
