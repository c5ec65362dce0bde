import { ApprovalDeskCore, callKey, type Approval, type ApprovalStore } from "../../../src/approvals/approval-desk.ts";
import type { ApprovalDeps, ApprovalDeskRpc } from "../../../src/approvals/approval-desk-rpc.ts";
import { RequestStateSealer } from "../../../src/approvals/request-state.ts";
import { TaskHandleSealer } from "../../../src/approvals/task-handle.ts";
import { AgentTaskHandleSealer } from "../../../src/approvals/agent-task-handle.ts";
import { toolPricesSchema } from "../../../src/config/tool-price-schema.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import type { McpIngress, McpReply } from "../../../src/kinds/mcp/mcp-api.ts";
import type { McpDeps } from "../../../src/kinds/mcp/mcp-deps.ts";
import type { McpEra } from "../../../src/mcp/bridging.ts";
import { ClientRelays, InFlightRequests } from "../../../src/mcp/client-relays.ts";
import { SessionSealer } from "../../../src/mcp/sealed-session.ts";
import type { McpServerHandle } from "../../../src/mcp/server-handle.ts";
import { policySchema, ToolPolicy } from "../../../src/mcp/tool-policy.ts";
import type { UpstreamAnswer, UpstreamRequestOptions } from "../../../src/mcp/upstream-client.ts";
import { STATELESS_VERSION } from "../../../src/protocol/mcp/stateless-request.ts";
import { ToolPrices } from "../../../src/publication/tool-prices.ts";
import { DEMO_KEY, engineHarness, type EngineHarnessOptions } from "./engine-harness.ts";

/** A tool of a fake server: what a call of it answers (a result, a JSON-RPC error, a throw, or never). */
export interface FakeTool {
  readonly name: string;
  readonly run?: (args: Readonly<Record<string, unknown>>, opts: UpstreamRequestOptions) => UpstreamAnswer | Promise<UpstreamAnswer>;
}

/** An upstream MCP server in the test's own process, counting what reaches it. */
export interface FakeServer extends McpServerHandle {
  readonly calls: { readonly method: string; readonly params: Readonly<Record<string, unknown>> }[];
}

/**
 * A fake upstream that tells the gateway what the real client tells it: the request is handed
 * over (`onSent`), then what its answer proves (`onEvidence`) — `answered` for a result or an
 * error of the server's own; nothing when the tool never answers.
 */
export function fakeServer(name: string, tools: readonly FakeTool[], era: McpEra = "stateless"): FakeServer {
  const calls: FakeServer["calls"][number][] = [];
  return {
    name,
    era,
    listFailure: "open",
    calls,
    async request(method, params, opts) {
      // As the gateway's client: nothing leaves for a request that already ended.
      if (opts.signal?.aborted) throw new GatewayError("client_closed", "The request ended before it was sent.");
      calls.push({ method, params });
      opts.onSent?.();
      let answer: UpstreamAnswer;
      if (method === "tools/list") answer = { ok: true, result: { tools: tools.map((t) => ({ name: t.name, inputSchema: { type: "object" } })) } };
      else if (method === "tools/call") {
        const tool = tools.find((t) => t.name === params.name);
        answer = tool ? await (tool.run?.((params.arguments ?? {}) as Record<string, unknown>, opts) ?? { ok: true, result: { content: [{ type: "text", text: `${name}.${tool.name} ran` }] } }) : { ok: false, error: { code: -32602, message: "Unknown tool" } };
      } else answer = { ok: false, error: { code: -32601, message: `${method} is not served here` } };
      opts.onEvidence?.("answered");
      return answer;
    },
  };
}

/** The desk's logic behind the RPC shape, on the harness's clock (the Durable Object uses its own). */
export function memoryDesk(now: () => number): ApprovalDeskRpc {
  const rows = new Map<string, Approval>();
  const store: ApprovalStore = { get: (id) => rows.get(id), put: (a) => void rows.set(a.id, structuredClone(a)), all: () => [...rows.values()], ofCall: (key) => [...rows.values()].filter((a) => callKey(a) === key), delete: (id) => void rows.delete(id) };
  const core = new ApprovalDeskCore(store);
  return {
    request: async (facts, init) => core.request(facts, init, now()),
    claim: async (id, facts, key, nonce) => core.claim(id, facts, now(), key, nonce),
    spend: async (id, nonce) => core.spend(id, nonce),
    finish: async (id, execution) => core.finish(id, execution, now()),
    get: async (id) => core.get(id, now()),
    list: async (state) => core.list(now(), state),
    decide: async (id, action, actor, reason) => core.decide(id, action, actor, reason, now()),
    cancel: async (id, principal, reason) => core.cancel(id, principal, reason, now()),
    revokeKey: async (key, actor, reason) => core.revokeKey(key, actor, reason, now()),
  };
}

export interface McpHarnessOptions extends Omit<EngineHarnessOptions, "mcp"> {
  readonly servers: readonly FakeServer[];
  /** Policy rules (publication.yaml `mcp.policy.rules`). */
  readonly rules: readonly Record<string, unknown>[];
  /** `mcp.prices`. */
  readonly prices?: readonly Record<string, unknown>[];
  /** Approvals configured (a memory desk). */
  readonly approvals?: boolean;
  /** Stateful-era sessions served. */
  readonly sessions?: boolean;
}

const SECRET = "a-test-secret-of-enough-length-for-sealing";

/**
 * The real engine's MCP kind over fake servers: the runner, the phases and the MCP kind as they
 * run in production, with in-memory ledgers, a memory approval desk and manual timers (see
 * engine-harness.ts). `call` sends one 2026-07-28 request and returns the engine's reply.
 */
export async function mcpHarness(opts: McpHarnessOptions) {
  const desk = { current: undefined as ApprovalDeskRpc | undefined };
  const approvals: ApprovalDeps | undefined = opts.approvals
    ? { desk: () => desk.current!, sealer: await RequestStateSealer.fromSecret(SECRET), tasks: await TaskHandleSealer.fromSecret(SECRET), agentTasks: await AgentTaskHandleSealer.fromSecret(SECRET), ttlMs: 3_600_000, statusUrl: (id) => `http://127.0.0.1:9/approvals/${id}` }
    : undefined;
  const mcp: McpDeps = {
    servers: new Map(opts.servers.map((s) => [s.name, s])),
    policy: new ToolPolicy(policySchema.parse({ revision: "p-test", rules: opts.rules })),
    prices: new ToolPrices(toolPricesSchema.parse(opts.prices ?? [])),
    serverInfo: { name: "sluice", version: "test" },
    relays: new ClientRelays(),
    inFlight: new InFlightRequests(),
    sessions: opts.sessions ? { sealer: await SessionSealer.fromSecrets([SECRET]), ttlMs: 3_600_000 } : undefined,
    approvals,
  };
  const h = engineHarness({ ...opts, mcp });
  desk.current = memoryDesk(() => h.clock.now());
  const sent: Record<string, unknown>[] = [];
  let requestNo = 0;
  /** A 2026-07-28 request as an SDK client sends it: headers matching the body, the era's `_meta`. */
  const ingress = (method: string, params: Record<string, unknown> = {}, over: Partial<McpIngress> & { readonly id?: number | null; readonly capabilities?: Record<string, unknown> } = {}): McpIngress => {
    const id = over.id === undefined ? ++requestNo : over.id;
    const named = method === "tools/call" || method === "prompts/get" ? params.name : method === "resources/read" ? params.uri : undefined;
    const headers = new Headers({ "mcp-protocol-version": STATELESS_VERSION, "mcp-method": method, ...(typeof named === "string" ? { "mcp-name": named } : {}) });
    const body = {
      jsonrpc: "2.0",
      ...(id === null ? {} : { id }),
      method,
      params: { ...params, _meta: { "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION, "io.modelcontextprotocol/clientCapabilities": over.capabilities ?? { elicitation: { url: {} } } } },
    };
    return {
      requestId: `req_${String(++requestNo).padStart(32, "0")}`,
      receivedAt: h.clock.now(),
      apiKey: DEMO_KEY,
      headers,
      readBody: async () => body,
      server: undefined,
      waitUntil: (p) => void h.background.push(p),
      send: (m) => void sent.push({ ...m }),
      open: () => {},
      httpMethod: "POST",
      ...over,
    };
  };
  const call = async (method: string, params: Record<string, unknown> = {}, over: Parameters<typeof ingress>[2] = {}): Promise<McpReply> => {
    const session = h.engine.beginMcp(ingress(method, params, over));
    if (!session) throw new Error("no MCP servers configured");
    return await session.run();
  };
  return { ...h, mcp, desk: () => desk.current!, ingress, call, sent };
}

/** The result of a JSON-RPC answer (fails the test on an error). */
export function resultOf(reply: McpReply): Record<string, unknown> {
  if (reply.kind !== "result") throw new Error(`expected a result, got ${reply.error.code}: ${reply.error.message}`);
  return ((reply.body as { result: Record<string, unknown> }).result);
}
