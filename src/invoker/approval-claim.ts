import type { ExecutionEnd } from "../approvals/approval-desk.ts";
import { refusal, refusedReplay } from "../approvals/approval-refusals.ts";
import type { RequestContext } from "../context/request-context.ts";
import type { ApprovedCall } from "../decide/approval-gate.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import { isRecord } from "../protocol/fast-guard.ts";

/** What running the call answered, as far as the claim reads it. */
export interface RunAnswer {
  readonly ok: boolean;
  readonly result?: unknown;
}

/**
 * The invoke phase of an approved tool call or agent message: claims the approval at the desk (atomically: of any
 * number of concurrent retries one is granted) right before the call is sent, then runs it.
 *
 * The claim is one of the request's holdings from the moment it is granted. The server's answer
 * tells the desk how the execution ended (`succeeded`, `failed`); an `input_required` hands the
 * claim back before the client is answered, so the round bringing the input finds the call still
 * approved. However else the request ends — a throw, an abort, the deadline, a drain — its
 * terminal tells the desk: `not_sent` (the claim goes back) when the call was never handed to its
 * server, else `unknown` — reconciliation, never a retry. The terminal runs even when an abort
 * never lets this code run again, which a continuation of `run` could not promise.
 *
 * `run` is told `sent` to call the moment the request is handed to `fetch` (after which it may
 * run). Without an approval (`approved` undefined) the call just runs.
 *
 * @throws GatewayError approval_refused (used, denied, revoked, expired, facts changed), invalid_request (a replayed requestState), the request's abort error.
 */
export async function runClaimed<T extends RunAnswer>(ctx: RequestContext, approved: ApprovedCall | undefined, run: (sent: () => void) => Promise<T>): Promise<T> {
  if (approved === undefined) return await run(() => {});
  const { desk, approvalId } = approved;
  // A request already stopped claims nothing: the approval stays for the caller's retry.
  ctx.checkpoint();
  const claimed = await desk.claim(approvalId, approved.facts, ctx.requestId, approved.nonce);
  if (!claimed.ok) {
    if (claimed.justExpired && claimed.approval) approved.expired(claimed.approval);
    if (claimed.why === "replayed") throw refusedReplay();
    if (approved.refuse) throw approved.refuse(claimed.why === "facts_differ" ? undefined : claimed.approval);
    if (claimed.why === "facts_differ" || claimed.why === "unknown" || !claimed.approval) throw new GatewayError("approval_refused", "The approval does not cover this call: call the tool again to ask for a new one.", { param: "params.name" });
    throw refusal(claimed.approval, approved.fromTask);
  }
  // The call's tool.executed or agent.executed event (from the request's record) names the approval it ran under.
  if (ctx.record.mcp) ctx.record.mcp.approvalId = approvalId;
  if (ctx.record.a2a) ctx.record.a2a.approvalId = approvalId;
  let finished = false;
  const finish = (execution: ExecutionEnd) => {
    finished = true;
    return desk.finish(approvalId, execution).then(
      () => undefined,
      () => undefined,
    );
  };
  let sent = false;
  let end: ExecutionEnd | undefined;
  // Registered even when the request ended during the claim: its undo then runs at once.
  const claim = ctx.own("approval_claim", () => {
    if (!finished) ctx.waitUntil(finish(end ?? (sent ? "unknown" : "not_sent")));
  });
  ctx.checkpoint();
  const answer = await run(() => {
    sent = true;
  });
  if (answer.ok && isRecord(answer.result) && answer.result.resultType === "input_required") await finish("input_required");
  else end = answer.ok ? "succeeded" : "failed";
  claim.release();
  return answer;
}
