import { noSettle } from "./executor-harness.ts";
import type { AttemptRecord } from "../../../src/context/attempt-record.ts";
import { RequestContext, type AttemptScope } from "../../../src/context/request-context.ts";
import type { RequestRecord } from "../../../src/context/request-record.ts";
import type { Clock } from "../../../src/deps/clock.ts";
import type { Scheduler } from "../../../src/deps/scheduler.ts";
import { headerLatency } from "../../../src/invoker/upstream-attempt.ts";

/**
 * A started attempt inside a request context, as the invoke phase hands a stream to the respond
 * phase: the load lease registered the way the executor registers it, and every record collected.
 */
export function startedAttempt(clock: Clock, record: AttemptRecord, opts: { deadlineAt?: number; scheduler?: Scheduler } = {}) {
  const finished: AttemptRecord[] = [];
  const requests: RequestRecord[] = [];
  const releases: (number | undefined)[] = [];
  const context = new RequestContext({
    requestId: record.requestId,
    receivedAt: record.startedAt,
    clock,
    scheduler: opts.scheduler ?? { schedule: () => () => {} },
    sink: { attemptFinished: (a) => finished.push(structuredClone(a) as AttemptRecord), requestFinished: (r) => requests.push({ ...r }) },
    waitUntil: () => {},
    settle: noSettle,
    onUndoError: (err) => {
      throw err;
    },
  });
  if (opts.deadlineAt !== undefined) context.setDeadline(opts.deadlineAt);
  const attempt: AttemptScope = context.openAttempt(record);
  attempt.start();
  attempt.own("load_lease", (a) => releases.push(headerLatency(a)));
  return { context, attempt, finished, requests, releases };
}

/** A stream's attempt record as the invoke phase opens it: sent at 1,000 ms, headers at 1,040 ms. */
export function streamAttemptRecord(): AttemptRecord {
  return {
    id: "att_test",
    requestId: "req_test",
    snapshotRevision: 3,
    logicalModel: "public-model",
    modelRevision: 1,
    pool: "default",
    backendId: "b1",
    backendName: "backend-one",
    upstreamModel: "provider-model",
    startedAt: 1_000,
    headersAt: 1_040,
    outcome: "in_progress",
  };
}
