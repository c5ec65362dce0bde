import type { Attribution } from "../attribution/attribution.ts";
import type { Workload } from "../attribution/workload.ts";
import type { AuditEvent } from "../audit/audit-event.ts";
import type { ErrorCode } from "../errors/gateway-error.ts";
import type { ProtocolId } from "../protocol/codec.ts";
import type { SignalValue } from "../signals/signal-set.ts";
import type { McpCharge } from "./debt.ts";
import type { RequestTrace } from "./trace-context.ts";

/** The request runtime's phases, in order (docs/architecture.md has the table). */
export type Phase = "authenticate" | "decode" | "authorize" | "decide" | "reserve" | "admit" | "invoke" | "respond";

/** What the terminal hands the logging phase, once per request. */
export interface RequestRecord {
  readonly requestId: string;
  readonly parentRequestId: string | undefined;
  readonly receivedAt: number;
  endedAt: number | undefined;
  tenant: string | undefined;
  key: string | undefined;
  /** The team or `team/project` the caller is charged to (a key's configured one, a token's claim). */
  chargeTo: string | undefined;
  entrypoint: string | undefined;
  /** The decision that chose the plan (`default` when none held): the same as `decision.name`. */
  route: string | undefined;
  /** How the decision was made: the signals read, their values or why they are unknown. */
  decision: DecisionRecord | undefined;
  /** What the request's plugins did (redactions counted per detector, blocks, failures and how they were handled). */
  plugins: PluginReport[];
  stream: boolean | undefined;
  /** The last phase the request entered: where it ended, whichever way. */
  phase: Phase | undefined;
  /** When the request entered each phase, in order (the trace's phase spans are cut from these). */
  readonly phases: { readonly phase: Phase; readonly at: number }[];
  outcome: "success" | "error" | "cancelled" | undefined;
  errorCode: ErrorCode | undefined;
  /** Ids of the attempts the request made, in order. */
  attempts: readonly string[];
  /** The wire protocol the client spoke (a sub-call has none). */
  protocol: ProtocolId | undefined;
  /** The publication revision the request was decided under. */
  publicationRevision: string | undefined;
  /** The caller's cross-layer call id, when it sent one. */
  callId: string | undefined;
  /** The trace the request's spans belong to. */
  readonly trace: RequestTrace;
  /** For an MCP request: what was asked, what the policy decided and how the call ended. */
  mcp: McpRecord | undefined;
  /** The A2A part: one call of an agent through `POST /a2a/<agent>`; undefined for other traffic. */
  a2a?: A2aRecord | undefined;
  /** The caller's task, session, turn and parent task, as sent (src/attribution/); undefined: unattributed. */
  attribution: Attribution | undefined;
  /** The agent instance and end user behind the call, from trusted headers (metadata, never identity). */
  workload: Workload | undefined;
  /** Audit events the request caused beyond what its record says (approvals), in order (src/audit/). */
  events: AuditEvent[];
  /**
   * An explain (`POST /admin/explain`: decided, never dispatched), or a sub-request made for one
   * (a similarity signal's embedding, sent unbilled). Not the tenant's traffic: the call ledger
   * and the audit trail skip it, and the access line says so.
   */
  explain?: boolean | undefined;
  /**
   * Content kept for the content log, only when the entrypoint's policy sampled this request:
   * the prompt's text, and the completion's text as it is produced, each up to `maxChars`.
   */
  content: RequestContent | undefined;
  /** For a token count (`POST /v1/messages/count_tokens`): the figure answered and where it came from. */
  tokenCount?: TokenCountRecord | undefined;
  /** For a request its decision answered with a Looper algorithm: the run, step by step. */
  looper?: LooperRecord | undefined;
  /**
   * Milliseconds the request spent waiting for upstreams (providers, MCP servers, agents; its
   * sub-requests' waits included), overlapping waits counted once; undefined when it made no
   * upstream call. The rest of its duration is the gateway's own time.
   */
  upstreamMs?: number | undefined;
}

/**
 * A Looper run as the access line and the call ledger show it: the algorithm, the sub-calls it
 * made (each its own request, recorded under this one), and which answer it accepted.
 */
export interface LooperRecord {
  readonly algorithm: "cascade" | "panel";
  /** Sub-calls made (verifier calls included). */
  steps: number;
  /** The tier (its models, `+`-joined) whose answer was accepted (a panel's: its arbiter); undefined when none was. */
  accepted: string | undefined;
  /** The bound that ended the run, when one did. */
  bound?: string | undefined;
  readonly calls: LooperCall[];
}

/** One sub-call of a Looper run. */
export interface LooperCall {
  requestId: string;
  /** The step's tier (its models, `+`-joined), or the verifier's model. */
  readonly model: string;
  /** A cascade's `candidate` and `verifier`; a panel's `member` and `arbiter`. */
  readonly role: "candidate" | "verifier" | "member" | "arbiter";
  /** The step's confidence score; undefined when it had none (no log-probabilities, a failed verifier). */
  score?: number | undefined;
  accepted: boolean;
  /** The step's error; undefined while it runs and when it answered. */
  errorCode?: ErrorCode | undefined;
}

/**
 * A token count's outcome: `reported` by a backend of the chosen model, or `estimated` by the
 * gateway (the estimate the reserve phase records for a prompt) — because no backend of the
 * model counts tokens (`no_counter`), or because asking one failed (`failed`, with its error code).
 */
export interface TokenCountRecord {
  readonly source: "reported" | "estimated";
  readonly inputTokens: number;
  readonly fallback?: { readonly reason: "no_counter" | "failed"; readonly errorCode: ErrorCode } | undefined;
}

/**
 * The decide phase's evidence: the decision that won (or `default`), every signal it read with
 * its value or the reason it is unknown, and the decisions passed by because a signal they needed
 * was unknown. Values are counts, scores, categories and names, never the text they came from.
 */
export interface DecisionRecord {
  readonly name: string;
  readonly signals: Readonly<Record<string, SignalValue>>;
  readonly skipped: readonly string[];
}

/** One plugin's account of what it did to a request (never the content it saw). */
export interface PluginReport {
  readonly plugin: string;
  /**
   * - `redacted`: values replaced by placeholders before sending (`counts` per detector);
   * - `blocked`: the request refused (`detail` names the rule or detector);
   * - `allowed`: matches found and let through on purpose (`counts`);
   * - `changed`: the request changed otherwise (a system prompt, headers);
   * - `masked`: values masked in the answer (`counts`);
   * - `failed_open` / `failed_closed`: the check itself failed, and the request went on / was refused;
   * - `cache_hit`: answered from the response cache (`detail`: `exact` or `semantic`, with
   *   `similarity` and the entry's `ageMs`), no provider attempt; `cache_miss`: looked up, not
   *   found; `cache_skipped`: not looked up (`detail` says why: `bypass`, `temperature`, …).
   */
  readonly action: "redacted" | "blocked" | "allowed" | "changed" | "masked" | "failed_open" | "failed_closed" | "cache_hit" | "cache_miss" | "cache_skipped";
  readonly counts?: Readonly<Record<string, number>> | undefined;
  readonly detail?: string | undefined;
  /** A cache hit's cosine (1 for an exact match). */
  readonly similarity?: number | undefined;
  /** A cache hit's entry age (ms since it was stored). */
  readonly ageMs?: number | undefined;
}

/** The MCP part of a request's record: the audit of one MCP call. */
export interface McpRecord {
  readonly method: string;
  /** The JSON-RPC id the client sent. */
  readonly jsonrpcId: string | number | undefined;
  readonly protocolVersion: string | undefined;
  /** The upstream server the request reached, and the tool (or prompt) name as that server knows it. */
  server?: string | undefined;
  target?: string | undefined;
  /** The policy's decision on the call: rule, revision and reason (no argument values). */
  decision?: { readonly allowed: boolean; readonly rule: string | undefined; readonly policyRevision: string; readonly reason: string } | undefined;
  /** The tool reported failure (`isError`) in a result the gateway passed on. */
  toolError?: boolean | undefined;
  /** The tool call was sent to its server (a call refused or held before that was not executed). */
  toolSent?: boolean | undefined;
  /** The server answered `input_required`: the call goes on in the client's next request. */
  inputRequired?: boolean | undefined;
  /** The approval the call ran under, when its rule required one. */
  approvalId?: string | undefined;
  /** A priced or rate-limited `tools/call`: its reservation in the ledger and how it was settled. */
  charge?: McpCharge | undefined;
}

/**
 * The A2A part of a request's record: the audit of one agent call. The A2A task and context ids
 * are correlations with the agent's protocol state, never the business task (that is
 * `attribution.taskId`, from `x-sluice-task-id`).
 */
export interface A2aRecord {
  /** The JSON-RPC method, as the caller's generation names it. */
  readonly method: string;
  readonly jsonrpcId: string | number;
  /** The generation the caller spoke (`1.0`, `0.3`). */
  readonly generation: string;
  /** The agent (its name in gateway.yaml); for the virtual agent `/a2a`, the one routed to (empty until routed). */
  agent: string;
  /** Sent to the virtual agent `/a2a`: the route rule that chose the agent (undefined: a pin did), and what pinned it. */
  routed?: { readonly rule: string | undefined; readonly pinnedBy: "context" | "session" | undefined } | undefined;
  /** The skill the message named (`message.metadata.skill`), or the one the virtual agent's route matched; undefined: none. */
  skill: string | undefined;
  /** The A2A task the request refers to, or the one the agent's answer made. */
  a2aTaskId?: string | undefined;
  /** The A2A context of the message or its answer. */
  contextId?: string | undefined;
  /** The policy's decision on the call: rule, revision and reason. */
  decision?: { readonly allowed: boolean; readonly rule: string | undefined; readonly policyRevision: string; readonly reason: string } | undefined;
  /** The call was sent to the agent (one refused before that was not executed). */
  sent?: boolean | undefined;
  /** The JSON-RPC error code the agent answered with (passed on to the caller as it sent it). */
  agentError?: number | undefined;
  /** The approval the message waits for or ran under, when its rule required one. */
  approvalId?: string | undefined;
  /** A priced or rate-limited call: its reservation in the ledger and how it was settled. */
  charge?: McpCharge | undefined;
}

/**
 * Characters kept beyond a content policy's `maxChars`: redaction runs before the cut, and a
 * secret that starts just before the cut must still be whole to be recognised.
 */
export const CONTENT_MARGIN = 1024;

/** A sampled request's content (see `RequestRecord.content`). */
export interface RequestContent {
  readonly prompt: string;
  completion: string;
  readonly maxChars: number;
  readonly redact: readonly RegExp[];
}
