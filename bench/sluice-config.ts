/**
 * The Sluice config every bench driver runs: the shipped config files, the backend pointed at the
 * simulator's actual port, and one extra tenant without budgets (its key never reaches the ledger),
 * so a budgeted and an open key can be compared on the same process. For the MCP workload, the
 * simulator's MCP endpoint as a server, a policy letting both keys call its echo tool, and a price
 * for it, which only the budgeted key's tenant is charged.
 */
import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { ROOT } from "../local-stack/build.ts";
import { SIMULATOR_API_KEY, startGateway, startSimulatorProcess, type GatewayOptions } from "../local-stack/stack.ts";
import { starting } from "./children.ts";
import { BenchError } from "./entry.ts";
import { ECHO_TOOL, MCP_PATH } from "../simulator/mcp.ts";
import { MCP_SERVER, MCP_WORKLOAD, type Workload } from "./workload.ts";

/** The shipped demo key: charged to the demo tenant's strict budgets. */
export const DEMO_KEY = "sk-sluice-demo";
/** The demo key's tenant, the root of its budgets' ledger. */
export const DEMO_TENANT = "demo";
/** A key of a tenant without budgets, added to the shipped publication. */
export const OPEN_KEY = "sk-bench-open";
const OPEN_TENANT = "bench-open";
/** The public model both keys call. */
export const PUBLIC_MODEL = "sluice-chat";
/** The simulator model behind it (what the null gateway asks for). */
export const BACKEND_MODEL = "sim-small";
/** The simulator model behind the shipped embeddings entrypoint (what the null gateway asks for embeddings). */
export const EMBED_BACKEND_MODEL = "sim-embed";

/**
 * The gateway.yaml a bundle ships: its own bundled copy when `bundleDir` is another revision's
 * bundle (bench:compare), so that revision is given a file its own schema accepts; this
 * checkout's otherwise.
 */
function shippedGatewayYaml(bundleDir: string | undefined): string {
  // The copy the bundle imports: an out directory may hold older ones.
  const bundled = bundleDir === undefined ? undefined : /from "\.\/([^"]*gateway\.yaml)"/.exec(readFileSync(join(bundleDir, "index.js"), "utf8"))?.[1];
  return readFileSync(bundled === undefined ? join(ROOT, "config", "gateway.yaml") : join(bundleDir!, bundled), "utf8");
}

/**
 * A gateway.yaml text with the simulator's address (host and port) added to its egress allowlist,
 * so the guard lets plain http to that loopback port through. A text without an allowlist comes
 * from a revision before the egress guard, which needs none: it is returned unchanged.
 */
export function allowingSimulator(gatewayYaml: string, simUrl: string): string {
  const g = parseYaml(gatewayYaml) as { security?: { egress?: { allow?: string[] } } };
  const egress = g.security?.egress;
  if (!egress) return gatewayYaml;
  egress.allow = [...(egress.allow ?? []), new URL(simUrl).host];
  return stringifyYaml(g);
}

/**
 * The AWS access key the simulator verifies SigV4 signatures with when the Bedrock entrypoints are
 * configured, and the gateway signs with (read from the secrets {@link BEDROCK_SECRETS} names).
 * Bench-only values: nothing here reaches AWS.
 */
export const BENCH_AWS = { accessKeyId: "AKIABENCHBEDROCK0001", secretAccessKey: "bench/bedrock+secret0000000000000000000" } as const;

/** The secret names the Bedrock backend's `awsCredential` points at, with their values. */
const BEDROCK_SECRETS: Readonly<Record<string, string>> = { BENCH_AWS_KEY_ID: BENCH_AWS.accessKeyId, BENCH_AWS_SECRET: BENCH_AWS.secretAccessKey };

/** Simulator flags that make it verify every Bedrock request's signature against {@link BENCH_AWS}. */
export const SIMULATOR_AWS_ARGS: readonly string[] = ["--aws-key", `${BENCH_AWS.accessKeyId}:${BENCH_AWS.secretAccessKey}`];

/** An entrypoint whose one model the simulator serves over OpenAI Chat (SSE streams). */
export const SSE_MODEL = "bench-sse";
/** The same entrypoint, its model served over Bedrock ConverseStream (binary event stream, SigV4-signed). */
export const BEDROCK_MODEL = "bench-bedrock";
/** The same entrypoint again, its model served over Anthropic Messages (SSE, the Anthropic decoder on the full path for an OpenAI client). */
export const ANTHROPIC_MODEL = "bench-anthropic";
/** The Bedrock model id the gateway asks the simulator for (one encoded path segment, as real ids are). */
export const BEDROCK_MODEL_ID = "anthropic.claude-3-5-haiku-20241022-v1:0";
/** The model the Anthropic backend asks the simulator for. */
const BENCH_ANTHROPIC_MODEL_ID = "claude-bench";
/** The region the Bedrock backend signs for. */
export const BEDROCK_REGION = "us-east-1";

/**
 * Adds a `bedrock-converse` backend on the simulator (signed for {@link BEDROCK_REGION} with the
 * key of {@link BEDROCK_SECRETS}) and an `anthropic-messages` one, their pools and models, and the
 * entrypoints {@link SSE_MODEL}, {@link BEDROCK_MODEL} and {@link ANTHROPIC_MODEL}: alike but for
 * the model (one tier, no routes, the same capabilities and price), so that what differs between
 * them is the backend protocol alone. Returns the backends text.
 */
function withBedrock(backendsYaml: string, pub: BenchPublication, simUrl: string): string {
  const b = parseYaml(backendsYaml) as { backends: unknown[]; pools: unknown[] };
  b.backends.push({
    name: "sim-bedrock",
    protocol: "bedrock-converse",
    baseUrl: simUrl,
    region: BEDROCK_REGION,
    awsCredential: { accessKeyId: "BENCH_AWS_KEY_ID", secretAccessKey: "BENCH_AWS_SECRET" },
    capabilities: ["chat", "streaming", "stream-usage", "tools"],
  });
  b.pools.push({ name: "sim-bedrock", selector: "p2c", members: [{ backend: "sim-bedrock", model: BEDROCK_MODEL_ID }] });
  b.backends.push({
    name: "sim-anthropic",
    protocol: "anthropic-messages",
    baseUrl: `${simUrl}/v1`,
    credential: { secret: SIMULATOR_SECRET, scheme: "x-api-key" },
    capabilities: ["chat", "streaming", "stream-usage", "tools"],
  });
  b.pools.push({ name: "sim-anthropic", selector: "p2c", members: [{ backend: "sim-anthropic", model: BENCH_ANTHROPIC_MODEL_ID }] });
  const small = pub.models.find((m) => m.id === "chat-small");
  if (small === undefined) throw new BenchError("the shipped publication has no model chat-small to mirror for the Bedrock entrypoint");
  pub.models.push({ ...small, id: "chat-bedrock", revisions: small.revisions.map((r) => ({ ...r, pool: "sim-bedrock" })) });
  pub.models.push({ ...small, id: "chat-anthropic", revisions: small.revisions.map((r) => ({ ...r, pool: "sim-anthropic" })) });
  pub.entrypoints.push(
    { name: SSE_MODEL, description: "Bench: chat-small over OpenAI Chat, one tier.", default: [["chat-small"]] },
    { name: BEDROCK_MODEL, description: "Bench: the same model over Bedrock ConverseStream, one tier.", default: [["chat-bedrock"]] },
    { name: ANTHROPIC_MODEL, description: "Bench: the same model over Anthropic Messages, one tier.", default: [["chat-anthropic"]] },
  );
  return stringifyYaml(b);
}

/** An entrypoint whose one decision (it always holds) has an exact-mode `cache` plugin over chat-small. */
export const CACHE_MODEL = "bench-cache";
/** An entrypoint whose one decision (it always holds) runs a two-step `avg_logprob` cascade. */
export const CASCADE_MODEL = "bench-cascade";
/** The cascade's tiers, cheapest first: chat-small's and chat-large's pools and prices, requiring `logprobs`. */
export const CASCADE_TIERS = ["cascade-small", "cascade-large"] as const;
/** The cascade's acceptance threshold: a mean log-probability of ln 0.6 or better. */
export const CASCADE_THRESHOLD = -0.5;

/**
 * Adds the cache and cascade stages' entrypoints to a trimmed publication: {@link CACHE_MODEL}
 * (chat-small behind an exact-mode cache, the shipped defaults otherwise) and {@link CASCADE_MODEL}
 * (a cascade over {@link CASCADE_TIERS} scored by `avg_logprob`), each as one decision on a local
 * `context` signal that always holds, so no embedding is made. The simulator backend gains the
 * `logprobs` capability the cascade's models require. Returns the backends text.
 */
function withCacheAndCascade(backendsYaml: string, pub: BenchPublication): string {
  const b = parseYaml(backendsYaml) as { backends: { name: string; capabilities: string[] }[] };
  for (const backend of b.backends) if (backend.name === "sim-local" && !backend.capabilities.includes("logprobs")) backend.capabilities.push("logprobs");
  const mirror = (from: string, id: string) => {
    const m = pub.models.find((x) => x.id === from);
    if (m === undefined) throw new BenchError(`the shipped publication has no model ${from} to mirror for the cascade`);
    pub.models.push({ ...m, id, revisions: m.revisions.map((r) => ({ ...r, requires: ["chat", "logprobs"] })) });
  };
  mirror("chat-small", CASCADE_TIERS[0]);
  mirror("chat-large", CASCADE_TIERS[1]);
  pub.signals = [...((pub.signals as unknown[] | undefined) ?? []), { name: "bench-context", kind: "context" }];
  pub.plugins = [{ name: "bench-cache", kind: "cache", mode: "exact" }];
  const always = { signal: "bench-context", above: 0 };
  // Room for both steps of the bench's short answers; the open key's requests carry no output cap, so the step's is what maxTokens leaves.
  const bounds = { maxCalls: 2, maxParallel: 1, maxDepth: 1, maxTokens: 4096, maxCostMicros: 1_000_000, maxTimeMs: 30_000 };
  pub.entrypoints.push(
    { name: CACHE_MODEL, description: "Bench: chat-small behind an exact-mode response cache.", decisions: [{ name: "cached", when: always, models: [["chat-small"]], plugins: ["bench-cache"] }], default: [["chat-small"]] },
    {
      name: CASCADE_MODEL,
      description: "Bench: a two-step cascade scored by the mean log-probability.",
      decisions: [{ name: "cascade", when: always, models: CASCADE_TIERS.map((t) => [t]), algorithm: { kind: "cascade", score: "avg_logprob", threshold: CASCADE_THRESHOLD, bounds } }],
      default: [[CASCADE_TIERS[1]]],
    },
  );
  return stringifyYaml(b);
}

/** The secret `startGateway` binds the simulator's API key under: the MCP server's credential too. */
const SIMULATOR_SECRET = "SIMULATOR_API_KEY";

/** A gateway.yaml text with the simulator's MCP endpoint added as the stateless server {@link MCP_SERVER}. */
function withMcpServer(gatewayYaml: string, simUrl: string): string {
  const g = parseYaml(gatewayYaml) as { mcp?: { servers?: unknown[] } };
  const server = { name: MCP_SERVER, url: `${simUrl}${MCP_PATH}`, era: "stateless", credential: { secret: SIMULATOR_SECRET, scheme: "bearer" } };
  g.mcp = { ...g.mcp, servers: [...(g.mcp?.servers ?? []), server] };
  return stringifyYaml(g);
}

/** What one call of the echo tool costs the budgeted key, micro-USD: little enough that no bench exhausts the demo tenant's budgets. */
export const ECHO_PRICE_MICROS = 100;

interface McpPublication {
  policy: { revision: string; rules: unknown[] };
  prices?: unknown[];
}

/** The publication's MCP section with the echo tool allowed to both bench tenants, and priced. */
function withEchoTool(mcp: McpPublication | undefined): McpPublication {
  const allow = { id: "bench-echo", effect: "allow", principals: { tenants: [DEMO_TENANT, OPEN_TENANT] }, servers: [MCP_SERVER], names: [ECHO_TOOL] };
  const price = { id: "bench-echo", servers: [MCP_SERVER], names: [ECHO_TOOL], price: { version: "bench-1", currency: "USD", perCall: ECHO_PRICE_MICROS / 1_000_000 } };
  // First matching price wins: the bench's goes first.
  return { policy: { revision: mcp?.policy.revision ?? "bench-mcp", rules: [allow, ...(mcp?.policy.rules ?? [])] }, prices: [price, ...(mcp?.prices ?? [])] };
}

/**
 * Config texts for `startGateway`: backends at `simUrl`, the open tenant added, the access log as
 * asked, and the simulator's address added to the egress allowlist (a revision from before the
 * egress guard has no allowlist and needs none). With `mcp`, the simulator's MCP server and the
 * echo tool's policy and price: only then, since a revision from before the MCP gateway refuses
 * the keys. With `decisions` (this tree's publication only; `mcp` is then ignored), nothing is
 * trimmed, and the entrypoints {@link LOCAL_DECISIONS_MODEL} and {@link SIMILARITY_DECISIONS_MODEL}
 * and their signals are added. With `bedrock` (this tree only), a Bedrock backend and the
 * entrypoints {@link SSE_MODEL} and {@link BEDROCK_MODEL} (see {@link withBedrock}). With `looper`
 * (this tree only), the entrypoints {@link CACHE_MODEL} and {@link CASCADE_MODEL} (see
 * {@link withCacheAndCascade}). With `embeddings` (this tree only), the shipped embeddings
 * entrypoint is kept, and {@link LOCAL_DECISIONS_MODEL} and {@link SIMILARITY_DECISIONS_MODEL} are
 * added beside the other stages' entrypoints.
 */
export function benchGatewayConfig(simUrl: string, accessLog: boolean, bundleDir?: string, mcp = false, decisions = false, bedrock = false, looper = false, embeddings = false): { backends: string; publication: string; gateway: string } {
  const backends = readFileSync(join(ROOT, "config", "backends.yaml"), "utf8");
  const pointed = backends.replace(/^(\s*baseUrl:\s*)http:\/\/127\.0\.0\.1:\d+\/v1\s*$/m, `$1${simUrl}/v1`);
  if (pointed === backends) throw new BenchError("config/backends.yaml has no `baseUrl: http://127.0.0.1:<port>/v1` line to point at the simulator");
  let gateway = benchGatewayYaml(simUrl, accessLog, bundleDir);
  const pub = parseYaml(readFileSync(join(ROOT, "config", "publication.yaml"), "utf8")) as BenchPublication;
  if (decisions) {
    // This tree only: everything shipped is kept, and the two decision entrypoints are added.
    withDecisionEntrypoints(pub);
    pub.tenants.push(openTenant());
    return { backends: pointed, publication: stringifyYaml(pub), gateway };
  }
  // The stages measure chat and MCP; a revision from before embeddings and moderations would
  // refuse the entrypoints serving them, their models, pools and capabilities, and one from
  // before decisions would refuse signals, plugins and the entrypoints that use them; one from
  // before the Looper the `logprobs` capability and the cascade's models, which require it.
  const inputOnly = pub.entrypoints.filter((e) => e.operation !== undefined && e.operation !== "chat" && !(embeddings && e.operation === "embeddings"));
  const scoredModels = pub.models.filter((m) => m.revisions.some((r) => r.requires?.includes("logprobs"))).map((m) => m.id);
  const inputModels = new Set([...inputOnly.flatMap((e) => e.default.flat()), ...scoredModels]);
  const inputPools = new Set(pub.models.filter((m) => inputModels.has(m.id)).flatMap((m) => m.revisions.map((r) => r.pool)));
  const backendsForSim = withoutInputOperations(pointed, new Set([...inputOnly.map((e) => e.operation!), "logprobs"]), inputPools);
  pub.entrypoints = pub.entrypoints.filter((e) => !inputOnly.includes(e) && e.decisions === undefined && e.plugins === undefined);
  delete pub.signals;
  delete pub.plugins;
  delete pub.signalDeadlineMs;
  pub.models = pub.models.filter((m) => !inputModels.has(m.id));
  pub.tenants.push(openTenant());
  if (mcp) {
    gateway = withMcpServer(gateway, simUrl);
    pub.mcp = withEchoTool(pub.mcp);
  }
  const withProtocols = bedrock ? withBedrock(backendsForSim, pub, simUrl) : backendsForSim;
  const backendsOut = looper ? withCacheAndCascade(withProtocols, pub) : withProtocols;
  if (embeddings) withDecisionEntrypoints(pub);
  return { backends: backendsOut, publication: stringifyYaml(pub), gateway };
}

/** The shipped gateway.yaml (the bundle's own for another revision's bundle), its access log as asked, the simulator's address allowed. */
export function benchGatewayYaml(simUrl: string, accessLog: boolean, bundleDir?: string): string {
  const shipped = shippedGatewayYaml(bundleDir);
  let gateway = shipped;
  if (!accessLog) {
    gateway = shipped.replace(/^(\s*accessLog:\s*)true\s*$/m, "$1false");
    if (gateway === shipped) throw new BenchError("the shipped gateway.yaml has no `accessLog: true` line to turn off");
  }
  return allowingSimulator(gateway, simUrl);
}

/** The tenant without budgets whose key is {@link OPEN_KEY}. */
function openTenant(): unknown {
  return { id: OPEN_TENANT, apiKeys: [{ id: OPEN_TENANT, sha256: createHash("sha256").update(OPEN_KEY).digest("hex"), entrypoints: ["*"] }] };
}

/** An entrypoint whose decisions read only local signals (a jailbreak check, the prompt's size); the bench prompt meets none. */
export const LOCAL_DECISIONS_MODEL = "bench-local";
/** The same decisions, and two more on a similarity signal over the embeddings entrypoint: one embedding of the prompt per request. */
export const SIMILARITY_DECISIONS_MODEL = "bench-similarity";

/** The name of the similarity signal {@link SIMILARITY_DECISIONS_MODEL} decides on. */
export const SIMILARITY_SIGNAL = "bench-topic";

/**
 * The similarity signal of {@link SIMILARITY_DECISIONS_MODEL}, as publication.yaml declares it,
 * embedding with `model`: the shipped demo's kind of categories (code, support), which the bench
 * prompt resembles little.
 */
export function similaritySignal(model: string): { name: string; kind: "similarity"; model: string; threshold: number; margin: number; categories: { name: string; utterances: string[] }[] } {
  return {
    name: SIMILARITY_SIGNAL,
    kind: "similarity",
    model,
    threshold: 0.3,
    margin: 0.05,
    categories: [
      { name: "code", utterances: ["fix this bug in my function", "why does my code throw an exception", "write a python script to parse a csv file", "review this pull request diff"] },
      { name: "support", utterances: ["I was charged twice, I want a refund", "how do I change my payment method or invoice address", "cancel my subscription", "my account is locked and I cannot log in"] },
    ],
  };
}

/**
 * Adds {@link LOCAL_DECISIONS_MODEL} and {@link SIMILARITY_DECISIONS_MODEL} and the bench's own
 * signals to a publication that has decisions. Every decision picks the public model's default
 * tiers, so whichever holds, both send the same upstream call: what differs is how they decide.
 * The similarity signal embeds with the publication's first embeddings entrypoint.
 */
function withDecisionEntrypoints(pub: BenchPublication): void {
  const embed = firstEmbeddings(pub);
  const chat = pub.entrypoints.find((e) => e.name === PUBLIC_MODEL);
  if (chat === undefined) throw new BenchError(`the shipped publication has no entrypoint ${PUBLIC_MODEL}`);
  const models = chat.default;
  const signals = (pub.signals as { name: string }[] | undefined) ?? [];
  // The cache and cascade entrypoints may have declared the same context signal already.
  const added = [{ name: "bench-jailbreak", kind: "jailbreak" }, { name: "bench-context", kind: "context" }, similaritySignal(embed.name)];
  pub.signals = [...signals, ...added.filter((a) => !signals.some((s) => s.name === a.name))];
  const local = [
    { name: "jailbreak", priority: 100, when: { signal: "bench-jailbreak" }, models },
    { name: "long-prompt", priority: 10, when: { signal: "bench-context", above: 4000 }, models },
  ];
  pub.entrypoints.push(
    { name: LOCAL_DECISIONS_MODEL, description: "Bench: decisions over local signals only.", decisions: local, default: models },
    {
      name: SIMILARITY_DECISIONS_MODEL,
      description: "Bench: the same, and decisions over a similarity signal.",
      decisions: [...local, { name: "code", when: { signal: "bench-topic", is: "code" }, models }, { name: "support", when: { signal: "bench-topic", is: "support" }, models }],
      default: models,
    },
  );
}

function firstEmbeddings(pub: BenchPublication): BenchPublication["entrypoints"][number] {
  const embed = pub.entrypoints.find((e) => e.operation === "embeddings");
  if (embed === undefined) throw new BenchError("the shipped publication has no embeddings entrypoint for a similarity signal");
  return embed;
}

/** The embeddings entrypoint the bench's similarity signal embeds with (the shipped publication's first). */
export function embeddingsEntrypoint(): string {
  return firstEmbeddings(parseYaml(readFileSync(join(ROOT, "config", "publication.yaml"), "utf8")) as BenchPublication).name;
}

/** The parts of the bundled publication the bench reads or trims. */
interface BenchPublication {
  tenants: unknown[];
  entrypoints: { name: string; description?: string; operation?: string; default: string[][]; decisions?: unknown[]; plugins?: unknown[] }[];
  models: { id: string; revisions: { pool: string; requires?: string[] }[] }[];
  mcp?: McpPublication;
  signals?: unknown;
  plugins?: unknown;
  signalDeadlineMs?: unknown;
}

/**
 * The backends without the input-only operations' capabilities (embeddings, moderations) and the
 * pools only their models use: the chat and MCP stages need neither, and a revision from before
 * those operations refuses them.
 */
function withoutInputOperations(backendsYaml: string, capabilities: ReadonlySet<string>, pools: ReadonlySet<string>): string {
  const b = parseYaml(backendsYaml) as { backends: { capabilities: string[] }[]; pools: { name: string }[] };
  for (const backend of b.backends) backend.capabilities = backend.capabilities.filter((c) => !capabilities.has(c));
  b.pools = b.pools.filter((p) => !pools.has(p.name));
  return stringifyYaml(b);
}

/** `--key open|budgeted` (default open): the bearer key it names. */
export function keyFlag(value: string | undefined, usage: string): { readonly name: "open" | "budgeted"; readonly key: string } {
  const name = value ?? "open";
  if (name !== "open" && name !== "budgeted") throw new BenchError(`--key must be open or budgeted\n${usage}`);
  return { name, key: name === "open" ? OPEN_KEY : DEMO_KEY };
}

/**
 * `--workload buffered|streaming|mcp` (default buffered), sized as `npm run bench` sizes them by
 * default unless `tokens` says (an MCP call has no tokens).
 */
export function workloadFlag(value: string | undefined, usage: string, tokens?: number): Workload {
  const name = value ?? "buffered";
  if (name === "mcp") {
    if (tokens !== undefined) throw new BenchError(`--tokens sizes chat answers; the mcp workload has none\n${usage}`);
    return MCP_WORKLOAD;
  }
  if (name !== "buffered" && name !== "streaming") throw new BenchError(`--workload must be buffered, streaming or mcp\n${usage}`);
  return name === "streaming" ? { name: "streaming", stream: true, tokens: tokens ?? 32 } : { name: "buffered", stream: false, tokens: tokens ?? 16 };
}

/** The provider simulator for a bench, registered for shutdown; no request history kept. */
export function startBenchSimulator(args: readonly string[] = ["--history", "0"]) {
  return starting(() => startSimulatorProcess({ apiKey: SIMULATOR_API_KEY, args }).then((c) => ({ ...c, name: "simulator" })));
}

/**
 * Sluice on workerd with {@link benchGatewayConfig} (the simulator's MCP server configured when
 * `mcp`, the Bedrock entrypoints and their secrets when `bedrock`, the cache and cascade
 * entrypoints when `looper`, the embeddings and decision entrypoints when `embeddings`), a random admin token (returned,
 * for reading the books), registered for shutdown as `name`.
 */
export function startBenchGateway(
  simUrl: string,
  o: { readonly name: string; readonly accessLog: boolean; readonly mcp?: boolean; readonly decisions?: boolean; readonly bedrock?: boolean; readonly looper?: boolean; readonly embeddings?: boolean } & Omit<GatewayOptions, "adminToken" | "config">,
) {
  const { name, accessLog, mcp, decisions, bedrock, looper, embeddings, ...options } = o;
  const adminToken = `bench-${randomBytes(12).toString("hex")}`;
  const secrets = bedrock ? { ...options.secrets, ...BEDROCK_SECRETS } : options.secrets;
  return starting(() => startGateway({ ...options, secrets, adminToken, config: benchGatewayConfig(simUrl, accessLog, options.bundleDir, mcp, decisions, bedrock, looper, embeddings) }).then((g) => ({ ...g, name, adminToken })));
}
