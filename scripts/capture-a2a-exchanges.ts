/**
 * Records real A2A JSON-RPC exchanges for the bridge's unit tests: the official SDK's client of
 * each generation (`@a2a-js/sdk` 1.x and 0.3.14) against the SDK-built test agent of the same
 * generation, one exchange per method — the request body the client sends, and the response (a
 * JSON body, or the events of an SSE stream). Message ids are fixed so that the same call in both
 * generations differs only by what each generation says differently; task ids, context ids and
 * timestamps are the agents' own.
 *
 *   node scripts/capture-a2a-exchanges.ts <output directory>
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ClientFactory, JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import { Role, type Message, type SendMessageRequest } from "@a2a-js/sdk";
import { ClientFactory as ClientFactory03, JsonRpcTransportFactory as JsonRpcTransportFactory03 } from "a2a-sdk-v0-3/client";
import type { MessageSendParams } from "a2a-sdk-v0-3";
import { startA2aV03Agent, startA2aV1Agent, type A2aTestAgent } from "../test/e2e/support/a2a-agents.ts";

/** One recorded JSON-RPC exchange. */
interface Exchange {
  /** The request's `A2A-Version` header, when it sent one. */
  readonly version: string | null;
  readonly request: unknown;
  /** A JSON body, or the `data` of each SSE event in order. */
  readonly response: unknown;
  readonly stream: boolean;
}

class Recorder {
  readonly exchanges: Exchange[] = [];
  #pending: Promise<void> = Promise.resolve();
  readonly fetch: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    if (init?.method !== "POST" || typeof init.body !== "string" || res.body === null) return res;
    const request = JSON.parse(init.body) as unknown;
    const version = new Headers(init.headers).get("a2a-version");
    const stream = (res.headers.get("content-type") ?? "").startsWith("text/event-stream");
    // A stream is read on a branch of its own, so the client sees each event as it comes (a
    // subscription is ended by the test only after the client has read its first event).
    const [mine, theirs] = res.body.tee();
    this.#pending = this.#pending.then(async () => {
      const text = await new Response(mine).text();
      const response = stream
        ? text
            .split(/\r?\n\r?\n/)
            .map((block) => block.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n"))
            .filter((data) => data !== "")
            .map((data) => JSON.parse(data) as unknown)
        : (JSON.parse(text) as unknown);
      this.exchanges.push({ version, request, response, stream });
    });
    return new Response(theirs, { status: res.status, headers: res.headers });
  };
  /** The last exchange, once its response has been read whole. */
  async last(): Promise<Exchange> {
    await this.#pending;
    const e = this.exchanges.at(-1);
    if (e === undefined) throw new Error("nothing recorded");
    return e;
  }
}

async function settle<T>(p: Promise<T>): Promise<T | Error> {
  try {
    return await p;
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}

async function post(rec: Recorder, agent: A2aTestAgent, body: unknown, version?: string): Promise<Exchange> {
  const res = await rec.fetch(agent.rpcUrl, { method: "POST", headers: { "content-type": "application/json", ...(version !== undefined ? { "a2a-version": version } : {}) }, body: JSON.stringify(body) });
  await res.text();
  return rec.last();
}

async function drain(stream: AsyncIterable<unknown>): Promise<void> {
  try {
    for await (const _ of stream) void _;
  } catch {
    // the exchange is recorded either way
  }
}

/** Polls until the agent holds a task (the held task is created asynchronously). */
async function heldTask(agent: A2aTestAgent, before: readonly string[]): Promise<string> {
  for (let i = 0; i < 200; i++) {
    const id = agent.held().find((t) => !before.includes(t));
    if (id !== undefined) return id;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error("no held task");
}

const message1 = (messageId: string, text: string): Message => ({
  messageId,
  contextId: "",
  taskId: "",
  role: Role.ROLE_USER,
  parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" }],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});
const send1 = (messageId: string, text: string, returnImmediately = false): SendMessageRequest => ({
  tenant: "",
  message: message1(messageId, text),
  configuration: { acceptedOutputModes: ["text/plain"], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately },
  metadata: undefined,
});

async function captureV1(): Promise<Record<string, Exchange>> {
  const agent = await startA2aV1Agent();
  const rec = new Recorder();
  const out: Record<string, Exchange> = {};
  try {
    const client = await new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl: rec.fetch })] }).createFromUrl(agent.origin);
    await client.sendMessage(send1("m-hello", "hello"));
    out["send-message"] = await rec.last();
    const task = await client.sendMessage(send1("m-task", "task one"));
    out["send-task"] = await rec.last();
    await drain(client.sendMessageStream(send1("m-stream", "task two")));
    out["stream"] = await rec.last();
    const taskId = "id" in task ? String(task.id) : "";
    await client.getTask({ tenant: "", id: taskId, historyLength: undefined });
    out["get-task"] = await rec.last();
    await settle(client.getTask({ tenant: "", id: "no-such-task", historyLength: undefined }));
    out["get-task-unknown"] = await rec.last();
    const before = agent.held();
    await client.sendMessage(send1("m-hold-cancel", "task hold cancel", true));
    out["send-return-immediately"] = await rec.last();
    const toCancel = await heldTask(agent, before);
    await client.cancelTask({ tenant: "", id: toCancel, metadata: undefined });
    out["cancel-task"] = await rec.last();
    await settle(client.cancelTask({ tenant: "", id: toCancel, metadata: undefined }));
    out["cancel-task-not-cancelable"] = await rec.last();
    const before2 = agent.held();
    await client.sendMessage(send1("m-hold-sub", "task hold subscribe", true));
    const toSubscribe = await heldTask(agent, before2);
    const sub = client.resubscribeTask({ tenant: "", id: toSubscribe });
    const first = await sub.next();
    void first;
    agent.release(toSubscribe);
    await drain({ [Symbol.asyncIterator]: () => sub });
    out["subscribe"] = await rec.last();
    await client.listTasks({ tenant: "", contextId: "", status: 0, pageSize: 10, pageToken: "", historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: undefined } as never);
    out["list-tasks"] = await rec.last();
    // The SDK client refuses push-config calls itself when the card declares no push
    // notifications (the test agents do not), so these requests are written here and the agent's
    // own answer is recorded.
    out["push-set"] = await post(rec, agent, { jsonrpc: "2.0", id: 90, method: "CreateTaskPushNotificationConfig", params: { taskId, url: "https://hooks.example.com/a2a", token: "tok" } }, "1.0");
    out["push-get"] = await post(rec, agent, { jsonrpc: "2.0", id: 91, method: "GetTaskPushNotificationConfig", params: { taskId, id: "cfg-1" } }, "1.0");
    return out;
  } finally {
    await agent.close();
  }
}

const send03 = (messageId: string, text: string, blocking = true): MessageSendParams => ({
  message: { kind: "message", messageId, role: "user", parts: [{ kind: "text", text }] },
  configuration: { acceptedOutputModes: ["text/plain"], blocking },
});

async function captureV03(): Promise<Record<string, Exchange>> {
  const agent = await startA2aV03Agent();
  const rec = new Recorder();
  const out: Record<string, Exchange> = {};
  try {
    const client = await new ClientFactory03({ transports: [new JsonRpcTransportFactory03({ fetchImpl: rec.fetch })] }).createFromUrl(agent.origin);
    await client.sendMessage(send03("m-hello", "hello"));
    out["send-message"] = await rec.last();
    const task = await client.sendMessage(send03("m-task", "task one"));
    out["send-task"] = await rec.last();
    await drain(client.sendMessageStream(send03("m-stream", "task two")));
    out["stream"] = await rec.last();
    const taskId = task.kind === "task" ? task.id : "";
    await client.getTask({ id: taskId });
    out["get-task"] = await rec.last();
    await settle(client.getTask({ id: "no-such-task" }));
    out["get-task-unknown"] = await rec.last();
    const before = agent.held();
    await client.sendMessage(send03("m-hold-cancel", "task hold cancel", false));
    out["send-return-immediately"] = await rec.last();
    const toCancel = await heldTask(agent, before);
    await client.cancelTask({ id: toCancel });
    out["cancel-task"] = await rec.last();
    await settle(client.cancelTask({ id: toCancel }));
    out["cancel-task-not-cancelable"] = await rec.last();
    const before2 = agent.held();
    await client.sendMessage(send03("m-hold-sub", "task hold subscribe", false));
    const toSubscribe = await heldTask(agent, before2);
    const sub = client.resubscribeTask({ id: toSubscribe });
    const first = await sub.next();
    void first;
    agent.release(toSubscribe);
    await drain({ [Symbol.asyncIterator]: () => sub });
    out["subscribe"] = await rec.last();
    out["push-set"] = await post(rec, agent, { jsonrpc: "2.0", id: 90, method: "tasks/pushNotificationConfig/set", params: { taskId, pushNotificationConfig: { url: "https://hooks.example.com/a2a", token: "tok" } } });
    out["push-get"] = await post(rec, agent, { jsonrpc: "2.0", id: 91, method: "tasks/pushNotificationConfig/get", params: { id: taskId, pushNotificationConfigId: "cfg-1" } });
    return out;
  } finally {
    await agent.close();
  }
}

const dir = process.argv[2];
if (dir === undefined) throw new Error("usage: capture-a2a-exchanges.ts <output directory>");
await writeFile(join(dir, "exchanges-v1.json"), `${JSON.stringify(await captureV1(), null, 2)}\n`);
await writeFile(join(dir, "exchanges-v03.json"), `${JSON.stringify(await captureV03(), null, 2)}\n`);
