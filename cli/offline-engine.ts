import { AdmissionController } from "../src/admit/admission.ts";
import { DrainController } from "../src/admit/drain.ts";
import { attemptBudgetClient } from "../src/call-budget/attempt-budget-client.ts";
import { systemClock } from "../src/deps/clock.ts";
import { systemRng } from "../src/deps/rng.ts";
import { systemScheduler } from "../src/deps/scheduler.ts";
import { createEngine, type Engine } from "../src/engine/engine.ts";
import { GatewayExecutor } from "../src/invoker/executor.ts";
import { budgetLedgerClient } from "../src/ledger/ledger-client.ts";
import { builtinCodecs } from "../src/protocol/registry.ts";
import { compilePublication } from "../src/publication/compile-publication.ts";
import { settleStep } from "../src/settle/settle-step.ts";
import { normalizeSnapshot } from "../src/snapshot/normalize.ts";
import { pinSnapshot } from "../src/snapshot/pinned-snapshot.ts";
import { LoadTracker } from "../src/traffic/load-tracker.ts";
import type { ValidConfigDir } from "./config-dir.ts";

/** Reached only if an offline explain tried to send something: it never does (the runner refuses to dispatch an explain). */
const nowhere = (what: string) => () => {
  throw new Error(`an offline explain reaches no ${what}`);
};

/**
 * The gateway's engine in this process, over a config directory, for offline explains: the same
 * runner, phases and decide code as the gateway, with the seed BackendSnapshot and nothing behind
 * it. Explains never reserve, admit or send, so the ledgers, call budgets and backends here only
 * refuse; model-backed signals are left unknown (`offline`) by the explain's own mode.
 */
export async function offlineEngine(valid: ValidConfigDir): Promise<Engine> {
  const { config } = valid;
  const publication = compilePublication(config.publication);
  const seed = await normalizeSnapshot(config.backendsSeed, { supportedProtocols: builtinCodecs.ids(), logprobsProtocols: builtinCodecs.logprobsIds(), requirements: publication.poolRequirements, egress: config.gateway.security.egress });
  if (!seed.ok) throw new Error("the seed snapshot was validated already");
  const snapshot = pinSnapshot({ revision: 0, digest: seed.digest, snapshot: seed.snapshot });
  const clock = systemClock;
  const ledger = budgetLedgerClient(nowhere("budget ledger"));
  const quiet = () => {};
  return createEngine({
    publication,
    codecs: builtinCodecs,
    clock,
    scheduler: systemScheduler,
    newRequestId: () => `req_${crypto.randomUUID().replaceAll("-", "")}`,
    requestDeadlineMs: config.gateway.traffic.requestDeadlineMs,
    streamTimeouts: { firstTokenMs: config.gateway.traffic.firstTokenTimeoutMs, idleMs: config.gateway.traffic.streamIdleTimeoutMs },
    drain: new DrainController(clock),
    admission: new AdmissionController(clock, systemScheduler),
    snapshot: async () => snapshot,
    invoker: new GatewayExecutor({ codecs: builtinCodecs, credentials: { get: () => undefined }, load: new LoadTracker(clock), clock, rng: systemRng, fetch: nowhere("backend") }),
    reserve: { ledger, callBudgets: attemptBudgetClient(nowhere("call budget")), log: quiet },
    settle: settleStep({ ledger, log: quiet }),
    breakers: undefined,
    health: undefined,
    sink: { attemptFinished: quiet, requestFinished: quiet },
    onUndoError: quiet,
    log: quiet,
  });
}
