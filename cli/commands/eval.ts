import { readFileSync } from "node:fs";
import { z } from "zod";
import type { ExplainAnswer, ExplainedModel } from "../../src/kinds/model/explain-answer.ts";
import { PROTOCOL_IDS } from "../../src/protocol/codec.ts";
import { ADMIN_TOKEN_ENV } from "../admin-client.ts";
import { parseFlags, stringFlag } from "../args.ts";
import { failure, usageError } from "../cli-error.ts";
import { explainerOf, type ExplainResult } from "../explainer.ts";
import { pairs, table } from "../table.ts";

export const EVAL_HELP = `Usage: sluice eval --dataset FILE.jsonl [--config DIR | --gateway URL] (--key KEYID | --tenant T) [options]

Replays a labelled set of requests through the decide phase (each one explained: nothing is
sent, reserved or charged) and prints the accuracy overall and per expected decision, the
confusion matrix (expected x chosen), the unknown signals by reason, and the cost of the models
chosen against always using the entrypoint's default tier.

Each line of FILE.jsonl is one JSON object:
  {"request": {...a request body...}, "expect": "code"}
  optional: "protocol" (openai-chat, openai-responses, anthropic-messages), "headers" (trusted
  headers, name to value), "id" (a name for the line in the report)
"expect" is a decision name of the request's entrypoint, or "default" when none should hold.
A request refused before it is decided counts as "error:<code>"; one a fail-closed decision
refuses counts as "refused:<code>".

  --config DIR        offline (the default, ./config): model-backed signals are not computed
                      (unknown, offline) and their decisions are skipped; the report says so
  --gateway URL       a running gateway's admin API computes them (one unbilled embedding per
                      similarity request); the token is read from $${ADMIN_TOKEN_ENV}
  --key KEYID         explain as this API key
  --tenant T          explain as this tenant
  --output-tokens N   the output length assumed for every request's cost (default 256)
  --json              print the report as JSON
`;

const lineSchema = z.strictObject({
  request: z.record(z.string(), z.unknown()),
  expect: z.string().min(1),
  protocol: z.enum(PROTOCOL_IDS).default("openai-chat"),
  headers: z.record(z.string(), z.string()).default({}),
  id: z.string().optional(),
});
type Line = z.infer<typeof lineSchema> & { readonly line: number };

/** The dataset's lines, each checked; every bad line is reported at once. */
function readDataset(path: string): Line[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw failure(`cannot read dataset ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  const lines: Line[] = [];
  const problems: string[] = [];
  text.split("\n").forEach((raw, i) => {
    if (raw.trim() === "") return;
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch (err) {
      problems.push(`${path}:${i + 1}: not JSON: ${(err as Error).message}`);
      return;
    }
    const parsed = lineSchema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      problems.push(`${path}:${i + 1}: ${issue.path.length > 0 ? `${issue.path.join(".")}: ` : ""}${issue.message}`);
      return;
    }
    lines.push({ ...parsed.data, headers: Object.fromEntries(Object.entries(parsed.data.headers).map(([k, v]) => [k.toLowerCase(), v])), line: i + 1 });
  });
  if (problems.length > 0) throw failure(`invalid dataset:\n${problems.join("\n")}`);
  if (lines.length === 0) throw failure(`dataset ${path} has no lines`);
  return lines;
}

/** What one line came to. */
interface Outcome {
  readonly line: Line;
  readonly chosen: string;
  readonly answer: ExplainAnswer | undefined;
}

/** The label an explain result counts as. */
function chosenOf(r: ExplainResult): string {
  if (!r.ok) return `error:${r.code}`;
  const a = r.answer;
  if (a.decision === null) return a.outcome.kind === "refused" ? `refused:${a.outcome.code}` : "error:undecided";
  return a.decision;
}

/** One request's estimated cost on a model: the prompt-token estimate and the assumed output, at its price. */
const costOn = (m: ExplainedModel | null | undefined, promptTokens: number, outputTokens: number): number | undefined =>
  m?.price ? (promptTokens * m.price.inputPerMTok + outputTokens * m.price.outputPerMTok) / 1_000_000 : undefined;

/** The report of a run, as `--json` prints it. */
export interface EvalReport {
  readonly where: string;
  readonly dataset: string;
  readonly lines: number;
  readonly correct: number;
  readonly accuracy: number;
  readonly perDecision: readonly { readonly decision: string; readonly lines: number; readonly correct: number; readonly accuracy: number; readonly chosen: number }[];
  /** Rows: expected; columns: chosen; only the non-zero cells. */
  readonly confusion: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /** Lines on which a signal was unknown, by signal and reason. */
  readonly unknowns: readonly { readonly signal: string; readonly reason: string; readonly lines: number }[];
  readonly mistakes: readonly { readonly line: number; readonly id: string | undefined; readonly expected: string; readonly chosen: string }[];
  readonly cost: {
    readonly currency: string | undefined;
    readonly outputTokens: number;
    /** The lines priced (a line refused before decide, or on an unpriced model, is not). */
    readonly lines: number;
    /** The first model of the chosen plan's first tier; a request that would be refused costs nothing. */
    readonly chosen: number;
    /** The first model of the entrypoint's default tiers, for every line. */
    readonly baseline: number;
  };
  /** Offline, the model-backed signals that were not computed. */
  readonly offlineSignals: readonly string[];
}

/** The figures of a run. */
export function evalReport(where: string, dataset: string, outcomes: readonly Outcome[], outputTokens: number): EvalReport {
  const correct = outcomes.filter((o) => o.chosen === o.line.expect).length;
  const expectedLabels = [...new Set(outcomes.map((o) => o.line.expect))].sort();
  const perDecision = expectedLabels.map((decision) => {
    const mine = outcomes.filter((o) => o.line.expect === decision);
    const ok = mine.filter((o) => o.chosen === decision).length;
    return { decision, lines: mine.length, correct: ok, accuracy: ok / mine.length, chosen: outcomes.filter((o) => o.chosen === decision).length };
  });
  const confusion: Record<string, Record<string, number>> = {};
  for (const o of outcomes) {
    const row = (confusion[o.line.expect] ??= {});
    row[o.chosen] = (row[o.chosen] ?? 0) + 1;
  }
  const unknown = new Map<string, { signal: string; reason: string; lines: number }>();
  for (const o of outcomes) {
    for (const u of o.answer?.unknown ?? []) {
      const k = `${u.signal}\u0000${u.reason}`;
      const e = unknown.get(k) ?? { signal: u.signal, reason: u.reason, lines: 0 };
      e.lines++;
      unknown.set(k, e);
    }
  }
  let currency: string | undefined;
  let priced = 0;
  let chosenCost = 0;
  let baselineCost = 0;
  for (const o of outcomes) {
    const a = o.answer;
    if (!a || a.promptTokens === null) continue;
    const base = costOn(a.baseline, a.promptTokens, outputTokens);
    const first = a.plan?.[0]?.[0];
    const chosen = a.outcome.kind === "refused" ? 0 : costOn(first, a.promptTokens, outputTokens);
    if (base === undefined || chosen === undefined) continue;
    currency ??= a.baseline?.price?.currency;
    priced++;
    chosenCost += chosen;
    baselineCost += base;
  }
  return {
    where,
    dataset,
    lines: outcomes.length,
    correct,
    accuracy: correct / outcomes.length,
    perDecision,
    confusion,
    unknowns: [...unknown.values()].sort((a, b) => b.lines - a.lines || a.signal.localeCompare(b.signal)),
    mistakes: outcomes.filter((o) => o.chosen !== o.line.expect).map((o) => ({ line: o.line.line, id: o.line.id, expected: o.line.expect, chosen: o.chosen })),
    cost: { currency, outputTokens, lines: priced, chosen: chosenCost, baseline: baselineCost },
    offlineSignals: [...new Set(outcomes.flatMap((o) => (o.answer?.unknown ?? []).filter((u) => u.reason === "offline").map((u) => u.signal)))].sort(),
  };
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const money = (x: number, currency: string | undefined) => `${x.toFixed(6)}${currency ? ` ${currency}` : ""}`;

/** The report for a person. */
export function evalText(r: EvalReport): string {
  const out: string[] = [];
  out.push(pairs([["source", r.where], ["dataset", r.dataset], ["accuracy", `${pct(r.accuracy)} (${r.correct} of ${r.lines})`]]));
  out.push("", "per expected decision:", table(["DECISION", "LINES", "CORRECT", "ACCURACY", "CHOSEN"], r.perDecision.map((d) => [d.decision, d.lines, d.correct, pct(d.accuracy), d.chosen])));
  const columns = [...new Set(Object.values(r.confusion).flatMap((row) => Object.keys(row)))].sort();
  out.push(
    "",
    "confusion (rows: expected, columns: chosen):",
    table(["EXPECTED", ...columns], Object.keys(r.confusion).sort().map((e) => [e, ...columns.map((c) => r.confusion[e]![c] ?? 0)])),
  );
  out.push("", "unknown signals:", r.unknowns.length === 0 ? "  none" : table(["SIGNAL", "REASON", "LINES"], r.unknowns.map((u) => [u.signal, u.reason, u.lines])));
  if (r.mistakes.length > 0) out.push("", "mistakes:", table(["LINE", "ID", "EXPECTED", "CHOSEN"], r.mistakes.map((m) => [m.line, m.id, m.expected, m.chosen])));
  const c = r.cost;
  out.push(
    "",
    `cost (${c.lines} lines priced, prompt-token estimate + ${c.outputTokens} output tokens each, first model of the first tier):`,
    pairs([
      ["chosen", money(c.chosen, c.currency)],
      ["default tier always", money(c.baseline, c.currency)],
      ["chosen / default", c.baseline > 0 ? `${(c.chosen / c.baseline).toFixed(2)}x` : "-"],
    ]),
  );
  if (r.offlineSignals.length > 0) {
    out.push("", `offline: ${r.offlineSignals.join(", ")} ${r.offlineSignals.length === 1 ? "needs" : "need"} the gateway's models and were not computed: their decisions were skipped as if their backend had failed. Pass --gateway URL for the gateway's answer.`);
  }
  return out.join("\n");
}

/** `sluice eval --dataset FILE.jsonl`. */
export async function evalCommand(argv: readonly string[]): Promise<number> {
  const args = parseFlags(
    argv,
    { config: { type: "string" }, gateway: { type: "string" }, dataset: { type: "string" }, key: { type: "string" }, tenant: { type: "string" }, "output-tokens": { type: "string" }, json: { type: "boolean" } },
    { min: 0, max: 0, names: "" },
  );
  if (args.help) {
    process.stdout.write(EVAL_HELP);
    return 0;
  }
  const dataset = stringFlag(args, "dataset");
  if (dataset === undefined) throw usageError("--dataset FILE.jsonl is required");
  const outputFlag = stringFlag(args, "output-tokens") ?? "256";
  if (!/^\d+$/.test(outputFlag) || Number(outputFlag) > 1_000_000) throw usageError(`--output-tokens must be a whole number up to 1000000, got '${outputFlag}'`);
  const lines = readDataset(dataset);
  const explainer = await explainerOf({ gateway: stringFlag(args, "gateway"), config: stringFlag(args, "config") }, { key: stringFlag(args, "key"), tenant: stringFlag(args, "tenant") });
  const outcomes: Outcome[] = [];
  for (const line of lines) {
    const r = await explainer.explain({ request: line.request, protocol: line.protocol, headers: line.headers });
    outcomes.push({ line, chosen: chosenOf(r), answer: r.ok ? r.answer : undefined });
  }
  const report = evalReport(explainer.where, dataset, outcomes, Number(outputFlag));
  process.stdout.write(`${args.values.json === true ? JSON.stringify(report, null, 2) : evalText(report)}\n`);
  return 0;
}
