import type { DecisionConfig } from "./decision-schema.ts";
import type { PublicationConfig } from "./publication-schema.ts";

type LogicalModelConfig = PublicationConfig["models"][number];

/**
 * Load-time checks of a decision's algorithm: what the engine cannot run is refused when the
 * publication loads, never at request time. A cascade needs its tiers; one scored by log-probabilities
 * needs every model of it to require `logprobs` (else no backend could give a score); `verify`
 * needs a verifier that serves chat. A panel needs a quorum its members can reach, room in
 * `maxCalls` for the quorum and the arbiter, and an arbiter prompt with a place for the answers.
 */
export function checkAlgorithm(d: DecisionConfig, models: ReadonlyMap<string, LogicalModelConfig>, path: string): { readonly path: string; readonly message: string }[] {
  const a = d.algorithm;
  if (a === undefined) return [];
  const issues: { path: string; message: string }[] = [];
  if (d.models === undefined) issues.push({ path: `${path}.algorithm`, message: "an algorithm runs over the decision's own models: give the decision models: (its steps, cheapest first)" });
  const activeRequires = (id: string) => {
    const m = models.get(id);
    return m?.revisions.find((r) => r.revision === m.activeRevision)?.requires;
  };
  switch (a.kind) {
    case "cascade": {
      if (a.score === "avg_logprob" || a.score === "margin") {
        if (a.verifier !== undefined) issues.push({ path: `${path}.algorithm.verifier`, message: `a verifier is used only with score: verify, not ${a.score}` });
        d.models?.forEach((tier, ti) =>
          tier.forEach((id, mi) => {
            const requires = activeRequires(id);
            if (requires && !requires.includes("logprobs")) issues.push({ path: `${path}.models[${ti}][${mi}]`, message: `model "${id}" does not require "logprobs", which a cascade scored by ${a.score} reads` });
          }),
        );
        if (a.score === "avg_logprob" && a.threshold > 0) issues.push({ path: `${path}.algorithm.threshold`, message: "an average log-probability is at most 0: a threshold above 0 never accepts" });
        if (a.score === "margin" && a.threshold < 0) issues.push({ path: `${path}.algorithm.threshold`, message: "a margin is at least 0: a threshold below 0 always accepts" });
      } else {
        if (a.verifier === undefined) issues.push({ path: `${path}.algorithm.verifier`, message: "score: verify needs a verifier: { model, prompt }" });
        else {
          const requires = activeRequires(a.verifier.model);
          if (requires === undefined) issues.push({ path: `${path}.algorithm.verifier.model`, message: `unknown model "${a.verifier.model}"` });
          else if (!requires.includes("chat")) issues.push({ path: `${path}.algorithm.verifier.model`, message: `model "${a.verifier.model}" does not require "chat"` });
        }
        if (a.threshold < 0 || a.threshold > 1) issues.push({ path: `${path}.algorithm.threshold`, message: "a verifier's score is between 0 and 1: give a threshold in that range" });
      }
      const steps = d.models?.length ?? 0;
      if (a.bounds.maxParallel !== 1) issues.push({ path: `${path}.algorithm.bounds.maxParallel`, message: "a cascade runs one step at a time: maxParallel must be 1" });
      if (steps > 0 && a.bounds.maxCalls < 1) issues.push({ path: `${path}.algorithm.bounds.maxCalls`, message: "a cascade needs at least one call" });
      break;
    }
    case "panel": {
      const members = d.models?.length ?? 0;
      if (members > 0 && a.quorum > members) issues.push({ path: `${path}.algorithm.quorum`, message: `a quorum of ${a.quorum} from ${members} members (the decision's tiers) is never reached` });
      if (a.bounds.maxCalls < a.quorum + 1) issues.push({ path: `${path}.algorithm.bounds.maxCalls`, message: `a panel makes at least quorum + 1 calls (its members and the arbiter): maxCalls must be at least ${a.quorum + 1}` });
      if (!a.arbiter.prompt.includes("{{answers}}")) issues.push({ path: `${path}.algorithm.arbiter.prompt`, message: "the arbiter's prompt must hold {{answers}}, where the members' answers go" });
      const requires = activeRequires(a.arbiter.model);
      if (requires === undefined) issues.push({ path: `${path}.algorithm.arbiter.model`, message: `unknown model "${a.arbiter.model}"` });
      else if (!requires.includes("chat")) issues.push({ path: `${path}.algorithm.arbiter.model`, message: `model "${a.arbiter.model}" does not require "chat"` });
      break;
    }
  }
  return issues;
}
