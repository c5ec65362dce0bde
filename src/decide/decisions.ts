import { GatewayError } from "../errors/gateway-error.ts";
import type { SignalSet, SignalValue } from "../signals/signal-set.ts";
import { evaluate, pendingSignals, type SignalReader } from "../signals/conditions.ts";
import type { CompiledDecision } from "../publication/compile-publication.ts";

/** What became of the request's decisions: the one chosen, and the evidence for it. */
export interface DecisionOutcome {
  /** The decision that holds, or undefined: none did and the entrypoint's default serves. */
  readonly decision: CompiledDecision | undefined;
  /** Decisions passed by because a signal they needed was unknown (`onUnknown: skip`), in order. */
  readonly skipped: readonly string[];
}

/** The signal deadline's clock: when model-backed signals must have answered by. */
export interface SignalDeadline {
  readonly at: number;
  readonly now: () => number;
}

/**
 * Tries the decisions in order (highest priority first); the first that holds wins.
 *
 * Signals are computed lazily. Local ones are read when a condition reaches them; a condition that
 * local signals settle (an `all` with a false part) never starts a model call. When a decision
 * that can still win turns on model-backed signals, those of that decision and of every later
 * decision that can still win before a sure local winner are started together — one round of
 * parallel calls, bounded by the signal deadline — and the decisions are read again. A decision
 * whose truth is unknown (a signal failed or was late) is skipped (fail open) or refuses the
 * request (fail closed), as it says.
 *
 * Synchronous when local signals decide (no model-backed signal was needed): the common path
 * costs no promise.
 *
 * @throws GatewayError signal_unavailable when a fail-closed decision could not be told; the
 *   request's abort reason when it ended meanwhile.
 */
export function chooseDecision(decisions: readonly CompiledDecision[], signals: SignalSet, deadline: SignalDeadline): DecisionOutcome | Promise<DecisionOutcome> {
  const read: SignalReader = (name) => (signals.costOf(name) === "local" ? signals.local(name) : (signals.peek(name) ?? "pending"));
  const skipped: string[] = [];
  const from = (i: number, started: number): DecisionOutcome | Promise<DecisionOutcome> => {
    for (; i < decisions.length; i++) {
      const d = decisions[i]!;
      let truth = evaluate(d.when, read);
      if (truth === true) return { decision: d, skipped };
      if (truth === "pending") {
        // Started once per decision: every signal it needs has settled after one round.
        if (started !== i) {
          const at = i;
          return signals.startModels(neededFrom(decisions, i, read), deadline.at, deadline.now()).then(() => from(at, at));
        }
        truth = "unknown";
      }
      if (truth === "unknown") {
        if (d.onUnknown === "refuse") throw new GatewayError("signal_unavailable", `The gateway could not evaluate decision "${d.name}" and does not pass it by.`, { cause: unknownsOf(signals) });
        skipped.push(d.name);
      }
    }
    return { decision: undefined, skipped };
  };
  return from(0, -1);
}

/** The model-backed signals decision `from` and the later ones that can still win need now. */
function neededFrom(decisions: readonly CompiledDecision[], from: number, read: SignalReader): Set<string> {
  const needed = new Set<string>();
  for (let j = from; j < decisions.length; j++) {
    const t = evaluate(decisions[j]!.when, read);
    // A later decision that holds on local signals alone ends the look-ahead: nothing after it can win.
    if (t === true) break;
    if (t === "pending") pendingSignals(decisions[j]!.when, read, needed);
  }
  return needed;
}

function unknownsOf(signals: SignalSet): string {
  const out: string[] = [];
  for (const [name, v] of signals.evaluated()) if (v.state === "unknown" && v.reason !== "not_applicable") out.push(`${name}: ${v.reason}`);
  return out.join(", ");
}

/** A signal's value as the decision record shows it. */
export type SignalEvidence = SignalValue;
