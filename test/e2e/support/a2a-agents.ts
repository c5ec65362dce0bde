/**
 * Loopback A2A agents for end-to-end tests, built with the official SDK: one speaking A2A 1.0
 * (`@a2a-js/sdk` 1.x, JSON-RPC binding, no v0.3 compatibility), one speaking A2A 0.3.
 *
 * The 0.3 agent runs the SDK's own 0.3 line (`@a2a-js/sdk` 0.3.14, installed under the npm alias
 * `a2a-sdk-v0-3`), not the 1.x compatibility layer: that layer is a translator that teaches a 1.0
 * server to tolerate 0.3 callers (its card answers both shapes, keyed by `A2A-Version`), and its
 * guide says it is not for building 0.3 servers. An agent that has never heard of 1.0 is what a
 * 0.3 peer in the wild looks like, so that is what the gateway is tested against.
 *
 * Each agent's executor:
 * - answers a message with one agent message: `[<agent name>] echo: <text>`;
 * - for a text that starts with `task`, makes a task instead: `submitted` → `working` (a streamed
 *   status update) → an artifact (`[<agent name>] done: <text>`) → `completed`. When the text also
 *   contains `hold`, the task stays `working` until the test calls `release(taskId)` or a client
 *   cancels it (then it ends `canceled`), so get, cancel and resubscribe can be driven.
 *
 * With `bearer` set, every JSON-RPC call needs `Authorization: Bearer <bearer>` (401 without); the
 * card stays public unless `cardNeedsCredential` is set too. Every request's method, path and
 * headers are recorded in `received`, so a test can prove which credentials reached the agent.
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { vi } from "vitest";
import express, { type NextFunction, type Request, type Response } from "express";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore, type AgentExecutor, type ExecutionEventBus, type RequestContext } from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";
import { Role, TaskState, type AgentCard, type Message, type Part } from "@a2a-js/sdk";
import {
  DefaultRequestHandler as DefaultRequestHandler03,
  InMemoryTaskStore as InMemoryTaskStore03,
  type AgentExecutor as AgentExecutor03,
  type ExecutionEventBus as ExecutionEventBus03,
  type RequestContext as RequestContext03,
} from "a2a-sdk-v0-3/server";
import { agentCardHandler as agentCardHandler03, jsonRpcHandler as jsonRpcHandler03, UserBuilder as UserBuilder03 } from "a2a-sdk-v0-3/server/express";
import type { AgentCard as AgentCard03, Message as Message03 } from "a2a-sdk-v0-3";

/** One request an agent received. */
export interface ReceivedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
}

/** A running test agent. */
export interface A2aTestAgent {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  /** Where its card is served: `<origin>/.well-known/agent-card.json`. */
  readonly cardUrl: string;
  /** Its JSON-RPC endpoint (the interface URL its card names). */
  readonly rpcUrl: string;
  /** The card as the agent serves it. */
  readonly card: Readonly<Record<string, unknown>>;
  /** Every request received, oldest first. */
  readonly received: readonly ReceivedRequest[];
  /**
   * Serves `body` (JSON) as the card from now on instead of the SDK's, e.g. an invalid one, so a
   * test can make a refresh fail; undefined serves the SDK's card again.
   */
  serveCard(body: unknown): void;
  /** Ends a held task (`completed`); false when no task by that id is held. */
  release(taskId: string): boolean;
  /** Ids of the tasks held now. */
  held(): string[];
  close(): Promise<void>;
}

/** How a test agent is set up. */
export interface A2aTestAgentOptions {
  /** The card's `name`, also the marker in its answers. Default `echo-v1` / `echo-v03`. */
  readonly name?: string;
  /** Bearer token every JSON-RPC call must carry; none: no authentication. */
  readonly bearer?: string;
  /** The card needs the bearer token too (only with `bearer`). */
  readonly cardNeedsCredential?: boolean;
  /** The skills its card declares; default {@link TEST_AGENT_SKILLS}. */
  readonly skills?: readonly TestAgentSkill[];
}

/** A skill a test agent's card declares. */
export interface TestAgentSkill {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  readonly tags: readonly string[];
  readonly examples: readonly string[];
}

/** The skills both agents declare (ids, tags and examples the capability tests match on). */
export const TEST_AGENT_SKILLS = [
  { id: "summarize", name: "Summarize", description: "Summarizes a text.", tags: ["text", "summary"], examples: ["summarize this article"] },
  { id: "translate", name: "Translate", description: "Translates a text between languages.", tags: ["text", "language", "translation"], examples: ["translate 'hello' to French"] },
] as const;

/** A fake upstream signature: the gateway must drop it (it would not verify over a rewritten card anyway). */
export const TEST_AGENT_SIGNATURE = { protected: "eyJhbGciOiJFUzI1NiIsImtpZCI6InRlc3QifQ", signature: "bm90LWEtcmVhbC1zaWduYXR1cmU" } as const;

const CARD_PATH = "/.well-known/agent-card.json";

/** Held tasks: each resolves to `true` when released, `false` when cancelled. */
class Holds {
  readonly #waiting = new Map<string, (released: boolean) => void>();
  wait(taskId: string): Promise<boolean> {
    return new Promise((resolve) => this.#waiting.set(taskId, resolve));
  }
  end(taskId: string, released: boolean): boolean {
    const resolve = this.#waiting.get(taskId);
    if (resolve === undefined) return false;
    this.#waiting.delete(taskId);
    resolve(released);
    return true;
  }
  ids(): string[] {
    return [...this.#waiting.keys()];
  }
  endAll(): void {
    for (const id of this.ids()) this.end(id, false);
  }
}

/** What the card path serves instead of the SDK's card, while set. */
interface CardOverride {
  body: unknown;
}

/** Express middleware: the card override, when one is set. */
function overridden(override: CardOverride) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (override.body !== undefined && req.method === "GET" && req.path === CARD_PATH) res.status(200).json(override.body);
    else next();
  };
}

/** Express middleware: records the request, then enforces the bearer token where it applies. */
function guard(received: ReceivedRequest[], options: A2aTestAgentOptions) {
  return (req: Request, res: Response, next: NextFunction): void => {
    received.push({ method: req.method, path: req.path, headers: { ...req.headers } });
    const isCard = req.method === "GET" && req.path === CARD_PATH;
    const needs = options.bearer !== undefined && (!isCard || options.cardNeedsCredential === true);
    if (needs && req.headers.authorization !== `Bearer ${options.bearer}`) {
      res.status(401).set("www-authenticate", "Bearer").json({ error: "missing or wrong bearer token" });
      return;
    }
    next();
  };
}

async function listen(): Promise<{ server: Server; origin: string; setApp: (app: express.Express) => void }> {
  let handler: express.Express | undefined;
  const server = createServer((req, res) => {
    if (handler === undefined) res.writeHead(503).end();
    else handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const addr = server.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;
  return { server, origin: `http://127.0.0.1:${port}`, setApp: (app) => (handler = app) };
}

function closer(server: Server, holds: Holds): () => Promise<void> {
  return () => {
    holds.endAll();
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  };
}

// ---------------------------------------------------------------------------------------------
// A2A 1.0

const textPart = (value: string): Part => ({ content: { $case: "text", value }, metadata: undefined, filename: "", mediaType: "text/plain" });

function textOf1(message: Message): string {
  const part = message.parts.find((p) => p.content?.$case === "text");
  return part?.content?.$case === "text" ? part.content.value : "";
}

class EchoExecutorV1 implements AgentExecutor {
  readonly #name: string;
  readonly #holds: Holds;
  constructor(name: string, holds: Holds) {
    this.#name = name;
    this.#holds = holds;
  }

  cancelTask = async (taskId: string, _bus: ExecutionEventBus): Promise<void> => {
    this.#holds.end(taskId, false);
  };

  async execute(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const text = textOf1(ctx.userMessage);
    const { taskId, contextId } = ctx;
    if (!text.startsWith("task")) {
      bus.publish(
        AgentEvent.message({
          messageId: crypto.randomUUID(),
          role: Role.ROLE_AGENT,
          parts: [textPart(`[${this.#name}] echo: ${text}`)],
          contextId,
          taskId: "",
          extensions: [],
          metadata: {},
          referenceTaskIds: [],
        }),
      );
      return;
    }
    const now = () => new Date().toISOString();
    bus.publish(
      AgentEvent.task(
        ctx.task ?? { id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: now(), message: undefined }, artifacts: [], history: [ctx.userMessage], metadata: undefined },
      ),
    );
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: { state: TaskState.TASK_STATE_WORKING, timestamp: now(), message: undefined }, metadata: undefined }));
    const released = text.includes("hold") ? await this.#holds.wait(taskId) : true;
    if (!released) {
      bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: { state: TaskState.TASK_STATE_CANCELED, timestamp: now(), message: undefined }, metadata: undefined }));
      return;
    }
    bus.publish(
      AgentEvent.artifactUpdate({
        taskId,
        contextId,
        artifact: { artifactId: crypto.randomUUID(), name: "result", description: "", parts: [textPart(`[${this.#name}] done: ${text}`)], metadata: undefined, extensions: [] },
        append: false,
        lastChunk: true,
        metadata: undefined,
      }),
    );
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: { state: TaskState.TASK_STATE_COMPLETED, timestamp: now(), message: undefined }, metadata: undefined }));
  }
}

/** Starts an A2A 1.0 agent (JSON-RPC binding) on a free loopback port. */
export async function startA2aV1Agent(options: A2aTestAgentOptions = {}): Promise<A2aTestAgent> {
  const name = options.name ?? "echo-v1";
  const { server, origin, setApp } = await listen();
  const rpcUrl = `${origin}/`;
  const holds = new Holds();
  const received: ReceivedRequest[] = [];
  const card: AgentCard = {
    name,
    description: `Test agent ${name} (A2A 1.0).`,
    supportedInterfaces: [{ url: rpcUrl, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" }],
    provider: { organization: "Sluice tests", url: "https://example.com/sluice-tests" },
    version: "1.0.0",
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: options.bearer === undefined ? {} : { agentBearer: { scheme: { $case: "httpAuthSecurityScheme", value: { description: "the agent's own token", scheme: "Bearer", bearerFormat: "" } } } },
    securityRequirements: options.bearer === undefined ? [] : [{ schemes: { agentBearer: { list: [] } } }],
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: (options.skills ?? TEST_AGENT_SKILLS).map((s) => ({ ...s, tags: [...s.tags], examples: [...s.examples], inputModes: ["text/plain"], outputModes: ["text/plain"], securityRequirements: [] })),
    signatures: [{ ...TEST_AGENT_SIGNATURE, header: undefined }],
  };
  const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new EchoExecutorV1(name, holds));
  const app = express();
  const override: CardOverride = { body: undefined };
  app.use(guard(received, options));
  app.use(overridden(override));
  app.use(CARD_PATH, agentCardHandler({ agentCardProvider: requestHandler }));
  app.use(jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
  setApp(app);
  const served = (await (await fetch(`${origin}${CARD_PATH}`, { headers: options.bearer ? { authorization: `Bearer ${options.bearer}` } : {} })).json()) as Record<string, unknown>;
  received.length = 0;
  return { origin, cardUrl: `${origin}${CARD_PATH}`, rpcUrl, card: served, received, serveCard: (body) => (override.body = body), release: (id) => holds.end(id, true), held: () => holds.ids(), close: closer(server, holds) };
}

// ---------------------------------------------------------------------------------------------
// A2A 0.3

function textOf03(message: Message03): string {
  const part = message.parts.find((p) => p.kind === "text");
  return part?.kind === "text" ? part.text : "";
}

class EchoExecutorV03 implements AgentExecutor03 {
  readonly #name: string;
  readonly #holds: Holds;
  constructor(name: string, holds: Holds) {
    this.#name = name;
    this.#holds = holds;
  }

  cancelTask = async (taskId: string, _bus: ExecutionEventBus03): Promise<void> => {
    this.#holds.end(taskId, false);
  };

  async execute(ctx: RequestContext03, bus: ExecutionEventBus03): Promise<void> {
    const text = textOf03(ctx.userMessage);
    const { taskId, contextId } = ctx;
    if (!text.startsWith("task")) {
      bus.publish({ kind: "message", messageId: crypto.randomUUID(), role: "agent", parts: [{ kind: "text", text: `[${this.#name}] echo: ${text}` }], contextId });
      bus.finished();
      return;
    }
    const now = () => new Date().toISOString();
    bus.publish(ctx.task ?? { kind: "task", id: taskId, contextId, status: { state: "submitted", timestamp: now() }, history: [ctx.userMessage], artifacts: [] });
    bus.publish({ kind: "status-update", taskId, contextId, status: { state: "working", timestamp: now() }, final: false });
    const released = text.includes("hold") ? await this.#holds.wait(taskId) : true;
    if (!released) {
      bus.publish({ kind: "status-update", taskId, contextId, status: { state: "canceled", timestamp: now() }, final: true });
      bus.finished();
      return;
    }
    bus.publish({ kind: "artifact-update", taskId, contextId, artifact: { artifactId: crypto.randomUUID(), name: "result", parts: [{ kind: "text", text: `[${this.#name}] done: ${text}` }] }, append: false, lastChunk: true });
    bus.publish({ kind: "status-update", taskId, contextId, status: { state: "completed", timestamp: now() }, final: true });
    bus.finished();
  }
}

/** Starts an A2A 0.3 agent (JSON-RPC, `preferredTransport: JSONRPC`) on a free loopback port. */
export async function startA2aV03Agent(options: A2aTestAgentOptions = {}): Promise<A2aTestAgent> {
  const name = options.name ?? "echo-v03";
  const { server, origin, setApp } = await listen();
  const rpcUrl = `${origin}/`;
  const holds = new Holds();
  const received: ReceivedRequest[] = [];
  const card: AgentCard03 = {
    name,
    description: `Test agent ${name} (A2A 0.3).`,
    url: rpcUrl,
    preferredTransport: "JSONRPC",
    additionalInterfaces: [{ url: rpcUrl, transport: "JSONRPC" }],
    protocolVersion: "0.3.0",
    provider: { organization: "Sluice tests", url: "https://example.com/sluice-tests" },
    version: "0.3.0",
    capabilities: { streaming: true, pushNotifications: false },
    ...(options.bearer === undefined ? {} : { securitySchemes: { agentBearer: { type: "http" as const, scheme: "bearer", description: "the agent's own token" } }, security: [{ agentBearer: [] }] }),
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: TEST_AGENT_SKILLS.map((s) => ({ ...s, tags: [...s.tags], examples: [...s.examples] })),
    signatures: [{ ...TEST_AGENT_SIGNATURE }],
  };
  const requestHandler = new DefaultRequestHandler03(card, new InMemoryTaskStore03(), new EchoExecutorV03(name, holds));
  const app = express();
  const override: CardOverride = { body: undefined };
  app.use(guard(received, options));
  app.use(overridden(override));
  app.use(CARD_PATH, agentCardHandler03({ agentCardProvider: requestHandler }));
  app.use(jsonRpcHandler03({ requestHandler, userBuilder: UserBuilder03.noAuthentication }));
  setApp(app);
  const served = (await (await fetch(`${origin}${CARD_PATH}`, { headers: options.bearer ? { authorization: `Bearer ${options.bearer}` } : {} })).json()) as Record<string, unknown>;
  received.length = 0;
  return { origin, cardUrl: `${origin}${CARD_PATH}`, rpcUrl, card: served, received, serveCard: (body) => (override.body = body), release: (id) => holds.end(id, true), held: () => holds.ids(), close: closer(server, holds) };
}

/**
 * Waits until the gateway at `publicUrl` serves each agent's card to `key`: cards are fetched off
 * the request path, so an isolate's first reads may answer 503 until its registry has one.
 */
export async function cardsServed(publicUrl: string, key: string, agents: readonly string[]): Promise<void> {
  for (const agent of agents) {
    await vi.waitFor(
      async () => {
        const res = await fetch(`${publicUrl}/a2a/${agent}/.well-known/agent-card.json`, { headers: { authorization: `Bearer ${key}` } });
        await res.body?.cancel();
        if (res.status !== 200) throw new Error(`card of ${agent}: ${res.status}`);
      },
      { timeout: 15_000, interval: 100 },
    );
  }
}

/** The A2A state secret (gateway.yaml `a2a.stateSecret`) of the e2e gateways: its name, and the value they are started with. */
export const A2A_STATE_SECRET = { name: "A2A_STATE_SECRET", value: "a2a-state-secret-for-the-e2e-tests-0123456789" } as const;

/** The agent's own task or context id inside the id the gateway gave a caller (`at1.`/`ac1.` + the agent's id in base64url + `.` + tag). */
export const agentIdOf = (bound: string): string => Buffer.from(bound.split(".")[1] ?? "", "base64url").toString("utf8");
