import type { Phase, PluginReport, RequestRecord } from "../../context/request-record.ts";
import type { DispatchPlan } from "../../decide/dispatch-plan.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import { eligibleCandidates, type ModelCandidates } from "../../invoker/candidates.ts";
import type { CodecRegistry } from "../../protocol/codec.ts";
import { requestFeatures } from "../../protocol/features.ts";
import type { NeutralRequest } from "../../protocol/neutral.ts";
import { estimatePromptTokens } from "../../protocol/prompt-estimate.ts";
import type { CompiledEntrypoint, CompiledPublication } from "../../publication/compile-publication.ts";
import type { SignalValue, UnknownReason } from "../../signals/signal-set.ts";
import type { PinnedSnapshot } from "../../snapshot/pinned-snapshot.ts";
import type { Explained } from "../traffic-kind.ts";

/** A logical model of an explained plan: its active revision, its price, and the backends that could serve the request. */
export interface ExplainedModel {
  readonly model: string;
  readonly revision: number;
  readonly pool: string;
  /** Capabilities a backend needs for this request (the revision's and the request's). */
  readonly requires: readonly string[];
  /** In currency units per million tokens; null: the revision has no price. */
  readonly price: { readonly currency: string; readonly inputPerMTok: number; readonly outputPerMTok: number } | null;
  /**
   * The pool members able to serve this request (capabilities, protocol features), in the pinned
   * snapshot, in pool order; health, breakers and the pool's selector narrow and order them per
   * attempt. `drops`: request fields removed under the revision's declared downgrades.
   */
  readonly candidates: readonly { readonly backend: string; readonly protocol: string; readonly model: string; readonly drops: readonly string[] }[];
}

/** What a `request_safe` plugin would do to the request: counts and names, never the content. */
export interface ExplainedPlugin extends PluginReport {
  /** The same in words: "would redact email ×2". */
  readonly would: string;
}

/** How the request would end before anything is sent, or that it would be sent. */
export type ExplainedOutcome =
  | { readonly kind: "dispatch" }
  | { readonly kind: "refused"; readonly code: string; readonly status: number; readonly message: string; readonly phase: Phase | "plugins" | "invoke" | undefined };

type RefusedPhase = Extract<ExplainedOutcome, { kind: "refused" }>["phase"];

/**
 * The answer of an explain (`POST /admin/explain`, `sluice explain`): the request decided as the
 * gateway would decide it, with the evidence, and nothing dispatched. Names, figures and scores
 * only: no prompt text, no matched value.
 */
export interface ExplainAnswer {
  readonly requestId: string;
  readonly publicationRevision: string;
  /** The BackendSnapshot the candidates come from (offline: the seed's, revision 0). */
  readonly snapshotRevision: number | null;
  /** Offline (no gateway): model-backed signals were not computed (`offline`). */
  readonly offline: boolean;
  readonly caller: { readonly tenant: string | undefined; readonly key: string | undefined; readonly chargeTo: string | undefined };
  readonly entrypoint: string | undefined;
  /** The decision that won (`default` when none held); null when the request never got a plan. */
  readonly decision: string | null;
  /** Every signal read, with its value or why it is unknown, in the order it settled. */
  readonly signals: Readonly<Record<string, SignalValue>>;
  /** The signals read that are unknown, and why (`not_applicable` included). */
  readonly unknown: readonly { readonly signal: string; readonly reason: UnknownReason }[];
  /** Decisions passed by because a signal they needed was unknown. */
  readonly skipped: readonly string[];
  /** The plan's tiers in order: the first model of the first tier is tried first. */
  readonly plan: readonly (readonly ExplainedModel[])[] | null;
  /** The entrypoint's default tiers' first model: what serves when no decision holds (the cost baseline). */
  readonly baseline: ExplainedModel | null;
  readonly maxAttempts: number | null;
  /** The reservation's estimate of the prompt's tokens (about 4 characters a token). */
  readonly promptTokens: number | null;
  readonly plugins: readonly ExplainedPlugin[];
  readonly outcome: ExplainedOutcome;
}

/** What the session knows once its explain has run. */
export interface ExplainFacts {
  readonly publication: CompiledPublication;
  readonly codecs: CodecRegistry;
  readonly record: Readonly<RequestRecord>;
  readonly explained: Explained;
  readonly offline: boolean;
  readonly entrypoint: CompiledEntrypoint | undefined;
  /** The plan and request as decided, once decide made a plan. */
  readonly decided: { readonly plan: DispatchPlan; readonly request: NeutralRequest } | undefined;
  readonly snapshot: PinnedSnapshot | undefined;
}

const counted = (counts: Readonly<Record<string, number>> | undefined) =>
  Object.entries(counts ?? {})
    .map(([d, n]) => `${d} ×${n}`)
    .join(", ");

function would(r: PluginReport): string {
  const detail = r.detail === undefined ? "" : ` (${r.detail})`;
  switch (r.action) {
    case "redacted":
      return `would redact ${counted(r.counts)}`;
    case "blocked":
      return `would block${r.counts ? ` on ${counted(r.counts)}` : ""}${detail}`;
    case "allowed":
      return `would let through ${counted(r.counts)}`;
    case "changed":
      return `would change the request${detail}`;
    case "masked":
      return `would mask ${counted(r.counts)}`;
    case "failed_open":
      return "its check failed: would pass the request on unchecked";
    case "failed_closed":
      return "its check failed: would refuse the request (signal_unavailable)";
    case "cache_hit":
      return `would answer from the response cache${detail}`;
    case "cache_miss":
      return "would look the request up in the response cache and miss";
    case "cache_skipped":
      return `would not use the response cache${detail}`;
  }
}

/** The explain's answer from what the runner found and the kind decided. */
export function explainAnswer(f: ExplainFacts): ExplainAnswer {
  const { record, explained, publication } = f;
  const signals = Object.fromEntries(explained.signals);
  const unknown = [...explained.signals].flatMap(([signal, v]) => (v.state === "unknown" ? [{ signal, reason: v.reason }] : []));
  const model = (id: string, revision: number, pool: string, requires: readonly string[], candidates: ModelCandidates | undefined): ExplainedModel => {
    const price = publication.budgets.price(id, revision);
    return {
      model: id,
      revision,
      pool,
      requires,
      price: price ? { currency: price.currency, inputPerMTok: price.input / 1_000_000, outputPerMTok: price.output / 1_000_000 } : null,
      candidates: (candidates?.members ?? []).map((m) => ({ backend: m.backend.name, protocol: m.backend.protocol, model: m.model, drops: candidates?.drops.get(m.key) ?? [] })),
    };
  };
  let outcome: ExplainedOutcome = { kind: "dispatch" };
  const refused = (e: GatewayError, phase: RefusedPhase): ExplainedOutcome => ({ kind: "refused", code: e.code, status: e.status, message: e.message, phase });
  if (explained.refusal) outcome = refused(explained.refusal, explained.decided ? "plugins" : explained.phase);
  let plan: ExplainedModel[][] | null = null;
  let baseline: ExplainedModel | null = null;
  const decided = f.decided;
  if (decided && explained.decided) {
    let eligible: readonly ModelCandidates[] = [];
    if (f.snapshot) {
      try {
        eligible = eligibleCandidates(decided.plan, requestFeatures(decided.request), f.snapshot, f.codecs, () => true);
      } catch (err) {
        // No model of the plan has a backend for this request: the invoke phase would refuse it.
        if (!(err instanceof GatewayError)) throw err;
        if (outcome.kind === "dispatch") outcome = refused(err, "invoke");
      }
    }
    plan = decided.plan.tiers.map((tier, t) => tier.map((m, i) => model(m.logicalModel, m.revision, m.pool, m.requires, eligible.find((c) => c.tier === t && c.index === i))));
    const first = f.entrypoint?.defaultTiers[0]?.[0];
    const active = first === undefined ? undefined : publication.models.get(first);
    if (first !== undefined && active) baseline = model(first, active.revision, active.pool, active.requires, undefined);
  }
  return {
    requestId: record.requestId,
    publicationRevision: publication.revision,
    snapshotRevision: f.snapshot?.revision ?? null,
    offline: f.offline,
    caller: { tenant: record.tenant, key: record.key, chargeTo: record.chargeTo },
    entrypoint: record.entrypoint,
    decision: explained.decided ? (record.decision?.name ?? record.route ?? "default") : null,
    signals,
    unknown,
    skipped: record.decision?.skipped ?? [],
    plan,
    baseline,
    maxAttempts: decided && explained.decided ? decided.plan.retry.maxAttempts : null,
    promptTokens: decided && explained.decided ? estimatePromptTokens(decided.request) : null,
    plugins: explained.plugins.map((r) => ({ ...r, would: would(r) })),
    outcome,
  };
}
