import type { ExplainAnswer } from "../../src/kinds/model/explain-answer.ts";
import type { SignalValue } from "../../src/signals/signal-set.ts";
import { parseFlags, stringFlag } from "../args.ts";
import { failure } from "../cli-error.ts";
import { explainerOf, headersOf, protocolOf, readJsonFile } from "../explainer.ts";
import { pairs, table } from "../table.ts";
import { ADMIN_TOKEN_ENV } from "../admin-client.ts";

export const EXPLAIN_HELP = `Usage: sluice explain [--config DIR | --gateway URL] (--key KEYID | --tenant T) [options] FILE

How the gateway would decide the request in FILE (a JSON request body, as a client would send
it): every signal read with its value or why it is unknown, the decisions skipped, the winning
decision, the plan (tiers, logical models, candidate backends, prices) and what the plugins would
do. Nothing is sent, reserved or charged, and no content is stored.

  --config DIR     offline (the default, ./config): the config is loaded and compiled here and
                   the request runs on the gateway's own runner; model-backed signals (similarity,
                   moderation) are not computed and show as unknown (offline), so their decisions
                   are skipped as if their backend had failed
  --gateway URL    ask a running gateway's admin API (POST /admin/explain), which computes
                   model-backed signals with its own models; the token is read from
                   $${ADMIN_TOKEN_ENV}
  --key KEYID      explain as this API key (its tenant, charge target and grants)
  --tenant T       explain as this tenant (with --key: that tenant's key)
  --protocol P     the body's protocol: openai-chat (default), openai-responses, anthropic-messages
  --header N=V     a trusted header the request would carry (repeatable)
  --json           print the answer as JSON
`;

/** A signal's reading on one line: `known  category=code score=0.61` or `unknown (offline)`. */
export function signalText(v: SignalValue): string {
  if (v.state === "unknown") return `unknown (${v.reason})`;
  const value = v.value;
  if (typeof value !== "object" || Array.isArray(value)) return `${Array.isArray(value) ? value.join(",") : String(value)}`;
  return Object.entries(value)
    .map(([k, x]) => `${k}=${Array.isArray(x) ? `[${x.join(",")}]` : JSON.stringify(x)}`)
    .join(" ");
}

/** The answer for a person. */
export function explainText(a: ExplainAnswer): string {
  const out: string[] = [];
  const outcome = a.outcome.kind === "dispatch" ? "would be sent" : `would be refused: ${a.outcome.status} ${a.outcome.code} (${a.outcome.phase ?? "?"}): ${a.outcome.message}`;
  out.push(
    pairs([
      ["entrypoint", a.entrypoint],
      ["caller", `${a.caller.tenant}/${a.caller.key}${a.caller.chargeTo ? ` (charged to ${a.caller.chargeTo})` : ""}`],
      ["decision", a.decision],
      ["outcome", outcome],
      ["skipped", a.skipped.length > 0 ? a.skipped.join(", ") : "none"],
      ["prompt tokens", a.promptTokens === null ? null : `${a.promptTokens} (estimate)`],
      ["publication", a.publicationRevision],
      ["snapshot", a.offline ? "seed (offline)" : a.snapshotRevision],
    ]),
  );
  const signals = Object.entries(a.signals);
  out.push("", "signals:", signals.length === 0 ? "  none read" : table(["SIGNAL", "VALUE"], signals.map(([n, v]) => [n, signalText(v)])));
  if (a.plan) {
    const rows: unknown[][] = [];
    a.plan.forEach((tier, i) => {
      for (const m of tier) rows.push([i + 1, m.model, m.revision, m.pool, m.candidates.map((c) => `${c.backend}:${c.model}`), m.price ? `${m.price.inputPerMTok}/${m.price.outputPerMTok} ${m.price.currency}` : "unpriced"]);
    });
    out.push("", "plan (first tier first; candidates before health and breakers):", table(["TIER", "MODEL", "REV", "POOL", "CANDIDATES", "PRICE IN/OUT PER MTOK"], rows));
  }
  out.push("", "plugins:", a.plugins.length === 0 ? "  none would act" : table(["PLUGIN", "WOULD"], a.plugins.map((p) => [p.plugin, p.would])));
  if (a.offline && a.unknown.some((u) => u.reason === "offline")) {
    out.push("", `offline: ${a.unknown.filter((u) => u.reason === "offline").map((u) => u.signal).join(", ")} not computed; pass --gateway URL to have the gateway compute them`);
  }
  return out.join("\n");
}

/** `sluice explain FILE`. */
export async function explainCommand(argv: readonly string[]): Promise<number> {
  const args = parseFlags(
    argv,
    { config: { type: "string" }, gateway: { type: "string" }, key: { type: "string" }, tenant: { type: "string" }, protocol: { type: "string" }, header: { type: "string", multiple: true }, json: { type: "boolean" } },
    { min: 1, max: 1, names: "FILE (a JSON request body)" },
  );
  if (args.help) {
    process.stdout.write(EXPLAIN_HELP);
    return 0;
  }
  const protocol = protocolOf(stringFlag(args, "protocol"));
  const headers = headersOf((args.values.header as string[] | undefined) ?? []);
  const explainer = await explainerOf({ gateway: stringFlag(args, "gateway"), config: stringFlag(args, "config") }, { key: stringFlag(args, "key"), tenant: stringFlag(args, "tenant") });
  const request = readJsonFile(args.positionals[0]!, "request file");
  const r = await explainer.explain({ request, protocol, headers });
  if (!r.ok) throw failure(`the request would be refused before it is decided: ${r.status} ${r.code}: ${r.message}`);
  process.stdout.write(`${args.values.json === true ? JSON.stringify(r.answer, null, 2) : explainText(r.answer)}\n`);
  return 0;
}
