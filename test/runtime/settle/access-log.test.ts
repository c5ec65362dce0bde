import { describe, expect, it } from "vitest";
import type { AttemptRecord } from "../../../src/context/attempt-record.ts";
import type { RequestRecord } from "../../../src/context/request-context.ts";
import { accessLogSink } from "../../../src/settle/access-log.ts";

const attempt = (requestId: string, id: string): AttemptRecord => ({
  id,
  requestId,
  snapshotRevision: 3,
  logicalModel: "m",
  modelRevision: 1,
  pool: "p",
  backendId: "be_1",
  backendName: "primary",
  upstreamModel: "u",
  startedAt: 1_000,
  endedAt: 1_040,
  headersAt: 1_010,
  status: 200,
  outcome: "success",
});

const request = (requestId: string, attempts: string[]): RequestRecord => ({
  requestId,
  parentRequestId: undefined,
  receivedAt: 990,
  endedAt: 1_050,
  tenant: "t",
  key: "k",
  entrypoint: "e",
  route: "default",
  stream: false,
  phase: "respond",
  outcome: "success",
  errorCode: undefined,
  attempts,
});

function sink() {
  const writes: string[] = [];
  return { writes, sink: accessLogSink(true, (lines) => writes.push(lines)), lines: () => writes.flatMap((w) => w.split("\n")).map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe("access log", () => {
  it("writes a request's attempt lines with its own line, attempts first, in one write", () => {
    const s = sink();
    s.sink.attemptFinished(attempt("req_a", "att_1"));
    s.sink.attemptFinished(attempt("req_a", "att_2"));
    expect(s.writes).toEqual([]);
    s.sink.requestFinished(request("req_a", ["att_1", "att_2"]));
    expect(s.writes).toHaveLength(1);
    expect(s.lines().map((l) => [l.kind, l.attemptId ?? l.requestId])).toEqual([
      ["attempt", "att_1"],
      ["attempt", "att_2"],
      ["request", "req_a"],
    ]);
    expect(s.lines()[0]).toMatchObject({ requestId: "req_a", backend: "primary", status: 200, outcome: "success", headersMs: 10, durationMs: 40, usage: "unknown" });
    expect(s.lines()[2]).toMatchObject({ tenant: "t", attempts: ["att_1", "att_2"], durationMs: 60, outcome: "success" });
  });

  it("keeps concurrent requests' lines apart", () => {
    const s = sink();
    s.sink.attemptFinished(attempt("req_a", "att_a"));
    s.sink.attemptFinished(attempt("req_b", "att_b"));
    s.sink.requestFinished(request("req_b", ["att_b"]));
    s.sink.requestFinished(request("req_a", ["att_a"]));
    expect(s.writes.map((w) => w.split("\n").map((l) => (JSON.parse(l) as { attemptId?: string; requestId: string }).attemptId ?? (JSON.parse(l) as { requestId: string }).requestId))).toEqual([
      ["att_b", "req_b"],
      ["att_a", "req_a"],
    ]);
  });

  it("writes a request without attempts as its line alone", () => {
    const s = sink();
    s.sink.requestFinished(request("req_c", []));
    expect(s.writes).toHaveLength(1);
    expect(s.lines()).toEqual([expect.objectContaining({ kind: "request", requestId: "req_c", attempts: [] })]);
  });

  it("bounds what waits: past the bound the oldest request's attempt lines are written", () => {
    const s = sink();
    for (let i = 0; i <= 4_096; i++) s.sink.attemptFinished(attempt(`req_${i}`, `att_${i}`));
    expect(s.writes).toHaveLength(1);
    expect(s.lines()).toEqual([expect.objectContaining({ kind: "attempt", attemptId: "att_0" })]);
    s.sink.requestFinished(request("req_4096", ["att_4096"]));
    expect(s.writes).toHaveLength(2);
  });

  it("writes nothing when disabled", () => {
    const writes: string[] = [];
    const off = accessLogSink(false, (l) => writes.push(l));
    off.attemptFinished(attempt("req", "att"));
    off.requestFinished(request("req", ["att"]));
    expect(writes).toEqual([]);
  });
});
