import type { AttemptRecord } from "../../../src/context/attempt-record.ts";
import type { RequestRecord } from "../../../src/context/request-record.ts";
import { requestTrace, type TraceParent } from "../../../src/context/trace-context.ts";

/** A finished request record as the terminal hands it over, with overrides. */
export function requestRecord(over: Partial<RequestRecord> = {}, client?: TraceParent): RequestRecord {
  return {
    requestId: "req_1",
    parentRequestId: undefined,
    receivedAt: 1_000,
    endedAt: 1_900,
    tenant: "demo",
    key: "demo",
    chargeTo: "platform/playground",
    entrypoint: "sluice-chat",
    route: "default",
    decision: undefined,
    plugins: [],
    stream: true,
    phase: "respond",
    phases: [
      { phase: "authenticate", at: 1_000 },
      { phase: "decode", at: 1_001 },
      { phase: "authorize", at: 1_003 },
      { phase: "decide", at: 1_004 },
      { phase: "reserve", at: 1_005 },
      { phase: "admit", at: 1_006 },
      { phase: "invoke", at: 1_010 },
      { phase: "respond", at: 1_200 },
    ],
    outcome: "success",
    errorCode: undefined,
    attempts: ["att_1"],
    attribution: undefined,
    workload: undefined,
    events: [],
    protocol: "openai-chat",
    publicationRevision: "demo-1",
    callId: undefined,
    trace: requestTrace(client, client !== undefined, undefined, () => true),
    content: undefined,
    mcp: undefined,
    ...over,
  };
}

/** A finished attempt record, with overrides. */
export function attemptRecord(over: Partial<AttemptRecord> = {}): AttemptRecord {
  return {
    id: "att_1",
    requestId: "req_1",
    snapshotRevision: 3,
    logicalModel: "chat-small",
    modelRevision: 1,
    pool: "sim-small",
    backendId: "b1",
    backendName: "sim-local",
    upstreamModel: "sim-small",
    backendProtocol: "openai-chat",
    spanId: "00f067aa0ba902b7",
    startedAt: 1_010,
    headersAt: 1_100,
    firstContentAt: 1_250,
    endedAt: 1_890,
    status: 200,
    outcome: "success",
    usage: { inputTokens: 12, outputTokens: 33, cachedInputTokens: 4, reasoningTokens: 5, source: "provider" },
    evidence: { class: "success", reason: "ok" },
    ...over,
  } as AttemptRecord;
}
