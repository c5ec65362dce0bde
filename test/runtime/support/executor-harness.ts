import { loadConfig, poolRequirements } from "../../../src/config/load-config.ts";
import { createEngine, type DispatchAction } from "../../../src/engine/engine.ts";
import type { AttemptRecord } from "../../../src/invoker/attempt.ts";
import { ExecutionError, GatewayExecutor } from "../../../src/invoker/executor.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { normalizeSnapshot } from "../../../src/snapshot/normalize.ts";
import { pinSnapshot, type PinnedSnapshot } from "../../../src/snapshot/pinned-snapshot.ts";
import { LoadTracker } from "../../../src/traffic/load-tracker.ts";
import { bundledTexts, FakeClock } from "./fixtures.ts";

/*
 * An executor over a fake fetch, plans from the bundled publication and snapshots of local
 * backends: shared by the executor's tests and the billing tests that run attempts through it.
 */
export const config = loadConfig(bundledTexts);
export const clock = new FakeClock();
export const engine = createEngine(config.gateway, config.publication, { clock, codecs: builtinCodecs });

export async function snapshot(backends: { name: string; port: number; caps?: string[]; weight?: number }[], selector = "weighted-round-robin", revision = 1): Promise<PinnedSnapshot> {
  const src = {
    version: 1,
    backends: backends.map((b) => ({
      name: b.name,
      protocol: "openai-chat",
      baseUrl: `http://127.0.0.1:${b.port}/v1`,
      credential: { secret: "SIM_KEY" },
      capabilities: b.caps ?? ["chat", "streaming", "stream-usage", "tools"],
    })),
    pools: ["sim-small", "sim-large"].map((name) => ({
      name,
      selector,
      members: backends.map((b) => ({ backend: b.name, model: `${name}-upstream`, weight: b.weight ?? 1 })),
    })),
  };
  const r = await normalizeSnapshot(src, { supportedProtocols: builtinCodecs.ids(), requirements: poolRequirements(config.publication) });
  if (!r.ok) throw new Error(JSON.stringify(r.reasons));
  return pinSnapshot({ revision, digest: r.digest, snapshot: r.snapshot });
}

export interface Seen {
  url: string;
  headers: Headers;
  body: any;
}

export function harness(
  respond: (seen: Seen) => Response | Promise<Response>,
  secrets: Record<string, string> = { SIM_KEY: "provider-secret" },
  extra: Partial<ConstructorParameters<typeof GatewayExecutor>[0]> = {},
) {
  const seen: Seen[] = [];
  const attempts: AttemptRecord[] = [];
  const executor = new GatewayExecutor({
    codecs: builtinCodecs,
    credentials: { get: (n) => secrets[n] },
    load: new LoadTracker(clock),
    clock,
    rng: { next: () => 0.5 },
    sink: { attemptFinished: (a) => attempts.push({ ...a }) },
    fetch: async (input, init) => {
      const s = { url: String(input), headers: new Headers(init?.headers), body: JSON.parse(String(init?.body)) };
      seen.push(s);
      if ((init?.signal as AbortSignal | undefined)?.aborted) throw new DOMException("aborted", "AbortError");
      return respond(s);
    },
    ...extra,
  });
  return { executor, seen, attempts };
}

export const okBody = (model = "x") =>
  Response.json({
    id: "chatcmpl-provider",
    model,
    choices: [{ index: 0, message: { role: "assistant", content: "Hi!" }, finish_reason: "stop" }],
    usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
  });

export function plan(body: Record<string, unknown> = {}, headers = new Map<string, string>()): DispatchAction {
  const a = engine
    .begin({
      principal: { tenantId: "demo", keyId: "demo" },
      protocol: "openai-chat",
      body: { model: "sluice-chat", messages: [{ role: "user", content: "hello" }], ...body },
      requestId: "req_1",
      receivedAt: clock.now(),
      trustedHeaders: headers,
    })
    .prepare();
  if (a.kind !== "dispatch") throw new Error(a.error.message);
  // One attempt unless a test asks for more: these tests are about a single attempt's handling.
  return { ...a, plan: { ...a.plan, retry: { maxAttempts: 1 } } };
}
export const live = () => new AbortController().signal;
/** The client-facing error of a failed execution. */
export const unwrap = (e: unknown) => (e instanceof ExecutionError ? e.error : e);

