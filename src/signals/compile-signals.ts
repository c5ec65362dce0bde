import { BUILT_IN_JAILBREAK_RULES, compileJailbreak } from "./jailbreak.ts";
import { detectLanguage } from "./language.ts";
import { countPii, PII_DETECTORS, type PiiDetector } from "./pii.ts";
import type { SignalConfig, SignalKind } from "./signal-schema.ts";
import type { SignalDatum, SignalDefinition, SignalField } from "./signal-set.ts";
import { SimilarityIndex } from "./similarity.ts";
import { subjectModalities, subjectText, subjectTokens } from "./subject-text.ts";

/** The type of a value a condition compares. */
export type FieldType = "boolean" | "number" | "string" | "list";

/**
 * What a signal's value looks like, for checking conditions when the publication loads: a plain
 * field, or a record read by key (a condition without `key` reads the primary key). `anyKey`: a
 * record whose keys are not known before it is computed (a classifier's categories).
 */
export type SignalShape =
  | { readonly type: FieldType }
  | { readonly primary: string; readonly keys: Readonly<Record<string, FieldType>>; readonly anyKey?: FieldType | undefined };

/** A signal compiled once per publication: its definition, its kind, its value's shape, and what it calls. */
export interface CompiledSignal {
  readonly kind: SignalKind;
  readonly definition: SignalDefinition;
  readonly shape: SignalShape;
  /** The entrypoint a model-backed signal calls. */
  readonly model?: string | undefined;
}

const escapeRegex = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * Compiles the publication's signals (validated at load: unique names, known entrypoints).
 * @throws Error for a jailbreak rule set that does not compile (the load check reports it first).
 */
export function compileSignals(configs: readonly SignalConfig[]): ReadonlyMap<string, CompiledSignal> {
  return new Map(configs.map((c) => [c.name, compileSignal(c)]));
}

/** One signal, compiled (also what an entrypoint's routes stand for). */
export function compileSignal(c: SignalConfig): CompiledSignal {
  const name = c.name;
  switch (c.kind) {
    case "keywords": {
      const words = c.words.map(escapeRegex).join("|");
      // Unicode-aware word edges: `\b` knows only ASCII letters.
      const re = c.match === "word" ? new RegExp(`(?<![\\p{L}\\p{N}_])(?:${words})(?![\\p{L}\\p{N}_])`, "iu") : new RegExp(words, "iu");
      return local(c, { type: "boolean" }, ({ subject }) => (subject ? re.test(subjectText(subject, c.in)) : undefined));
    }
    case "regex": {
      const re = new RegExp(c.pattern, c.flags);
      return local(c, { type: "boolean" }, ({ subject }) => (subject ? re.test(subjectText(subject, c.in)) : undefined));
    }
    case "context":
      return local(c, { type: "number" }, ({ subject }) => (subject ? subjectTokens(subject) : undefined));
    case "modality":
      return local(c, { type: "list" }, ({ subject }) => (subject ? subjectModalities(subject) : undefined));
    case "language":
      return local(c, { type: "string" }, ({ subject }) => (subject ? detectLanguage(subjectText(subject, c.in))?.language : undefined));
    case "principal":
      return local(c, { primary: "tenant", keys: { tenant: "string", key: "string", team: "string", project: "string" } }, ({ principal }) => {
        if (!principal) return undefined;
        const out: Record<string, SignalField> = { tenant: principal.tenantId, key: principal.keyId };
        if (principal.chargeTo !== undefined) {
          // `team` or `team/project` (config/publication-schema.ts chargeTo).
          const slash = principal.chargeTo.indexOf("/");
          out.team = slash < 0 ? principal.chargeTo : principal.chargeTo.slice(0, slash);
          if (slash >= 0) out.project = principal.chargeTo.slice(slash + 1);
        }
        return out;
      });
    case "header":
      return local(c, { type: "string" }, ({ trustedHeaders }) => trustedHeaders.get(c.header));
    case "pii": {
      const detectors = new Set<PiiDetector>(c.detectors);
      const keys: Record<string, FieldType> = { total: "number" };
      for (const d of PII_DETECTORS) if (detectors.has(d)) keys[d] = "number";
      return local(c, { primary: "total", keys }, ({ subject }) => {
        if (!subject) return undefined;
        const counts = countPii(subjectText(subject, c.in), detectors);
        let total = 0;
        for (const n of Object.values(counts)) total += n ?? 0;
        return { total, ...counts } as Readonly<Record<string, SignalField>>;
      });
    }
    case "jailbreak": {
      const set = compileJailbreak([...(c.builtIn ? BUILT_IN_JAILBREAK_RULES : []), ...c.rules]);
      return local(c, { primary: "matched", keys: { matched: "boolean", rules: "list" } }, ({ subject }) => {
        if (!subject) return undefined;
        const { rules } = set.match(subjectText(subject, c.in));
        return { matched: rules.length > 0, rules };
      });
    }
    case "similarity": {
      const index = new SimilarityIndex(c);
      const keys: Record<string, FieldType> = { category: "string", score: "number", margin: "number" };
      for (const cat of c.categories) keys[`scores.${cat.name}`] = "number";
      return {
        kind: c.kind,
        model: c.model,
        shape: { primary: "category", keys },
        definition: {
          name,
          cost: "model",
          async compute({ subject, models, signal }) {
            if (!subject || subject.kind !== "model") return undefined;
            // A request that makes no model calls on its behalf (a token count, which is free) has nothing to say here.
            if (!models) return undefined;
            const text = subjectText(subject, c.in).slice(0, c.maxChars);
            if (text.trim() === "") return undefined;
            return index.classify(text, models, signal);
          },
        },
      };
    }
    case "moderation":
      return {
        kind: c.kind,
        model: c.model,
        shape: { primary: "flagged", keys: { flagged: "boolean" }, anyKey: "number" },
        definition: {
          name,
          cost: "model",
          async compute({ subject, models, signal }) {
            if (!subject || !models) return undefined;
            if (!models.moderate) throw new Error("no moderation model is reachable from this kind of request");
            const text = subjectText(subject, c.in).slice(0, c.maxChars);
            if (text.trim() === "") return undefined;
            const [verdict] = await models.moderate(c.model, [text], signal);
            if (!verdict) throw new Error("the moderation model answered no verdict");
            return { ...verdict.scores, flagged: verdict.flagged };
          },
        },
      };
  }
}

function local(c: SignalConfig, shape: SignalShape, compute: (input: Parameters<Extract<SignalDefinition, { cost: "local" }>["compute"]>[0]) => SignalDatum | undefined): CompiledSignal {
  return { kind: c.kind, shape, definition: { name: c.name, cost: "local", compute } };
}
