import { GatewayError } from "../errors/gateway-error.ts";
import type { Approval } from "./approval-desk.ts";

/** Why an approval no longer covers a call, in the caller's words (`fromTask`: the call came from a task's handle). */
export function refusal(a: Approval, fromTask = false): GatewayError {
  const why =
    a.state === "executed"
      ? fromTask
        ? "was already used: the task's call ran once, and its result went to the tasks/result that ran it (the gateway keeps no results)"
        : "was already used: an approved call runs once (call again to ask for a new approval)"
      : a.state === "denied"
        ? `was denied${a.reason ? ` (${a.reason})` : ""}`
        : a.state === "revoked"
          ? `was revoked${a.reason ? ` (${a.reason})` : ""}`
          : "expired before the call was made";
  return new GatewayError("approval_refused", `The approval ${a.id} of this call ${why}.`, { param: "params.name", details: [{ approvalId: a.id, state: a.state }] });
}

/** A requestState presented a second time: single use. */
export function refusedReplay(): GatewayError {
  return new GatewayError("invalid_request", "This requestState was already used: call the tool again without it.", { param: "params.requestState" });
}
