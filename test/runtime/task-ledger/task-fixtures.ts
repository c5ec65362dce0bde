import type { AttemptRecord } from "../../../src/context/attempt-record.ts";
import type { RequestRecord } from "../../../src/context/request-record.ts";

/** A finished model request of task-1 (session s1, turn t1) by key k1 of tenant demo; `over` replaces fields. */
export function modelRecord(over: Partial<RequestRecord> & { requestId: string }): RequestRecord {
  return {
    parentRequestId: undefined,
    receivedAt: 1_000,
    endedAt: 1_500,
    tenant: "demo",
    key: "k1",
    entrypoint: "chat",
    route: "chat",
    decision: undefined,
    plugins: [],
    stream: false,
    phase: "respond",
    phases: [],
    outcome: "success",
    errorCode: undefined,
    attempts: [],
    protocol: "openai-chat",
    publicationRevision: "p1",
    callId: undefined,
    trace: { traceId: "t", spanId: "s", sampled: false },
    mcp: undefined,
    attribution: { taskId: "task-1", sessionId: "s1", turnId: "t1" },
    events: [],
    content: undefined,
    ...over,
  } as RequestRecord;
}

/** A successful attempt with known usage and the cost its settlement booked; `over` replaces fields. */
export function attempt(over: Partial<AttemptRecord> & { id: string; requestId: string }): AttemptRecord {
  return {
    snapshotRevision: 1,
    logicalModel: "gpt",
    modelRevision: 1,
    pool: "p",
    backendId: "b1",
    backendName: "sim",
    upstreamModel: "m",
    backendProtocol: "openai-chat",
    codecVersion: "1",
    startedAt: 1_000,
    endedAt: 1_400,
    outcome: "success",
    evidence: { class: "success", reason: "ok" },
    usage: { inputTokens: 10, outputTokens: 5, source: "provider" },
    charge: { usage: "known", costMicros: 300, currency: "USD" },
    ...over,
  } as AttemptRecord;
}

