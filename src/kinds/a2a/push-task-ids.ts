/**
 * The one place the push relay turns an agent's A2A task id into the one a caller is shown: in the
 * notifications relayed to a caller's webhook and in the push configs answered to it. Today the
 * caller is shown the agent's id; when task ids are bound to their caller, the binding goes here.
 */

/** Whose task an id names: the caller (tenant and key) and the agent that holds the task. */
export interface TaskIdOwner {
  readonly tenant: string;
  readonly key: string;
  readonly agent: string;
}

/** The task id `owner` is shown for the agent's `agentTaskId`. */
export function callerTaskId(_owner: TaskIdOwner, agentTaskId: string): string {
  return agentTaskId;
}
