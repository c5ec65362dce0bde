import { demoKeyIssues } from "../config/demo-keys.ts";
import type { GatewayConfig } from "../config/gateway-schema.ts";
import { publicationIssues } from "../config/load-config.ts";
import { CONFIG_FILES, zodIssues, type ConfigIssue } from "../config/parse-file.ts";
import { publicationSchema, type PublicationConfig } from "../config/publication-schema.ts";
import { canonicalDigest } from "../digest/canonical-digest.ts";
import { compileBudgetPolicy } from "../publication/budgets.ts";
import { compilePublication } from "../publication/compile-publication.ts";
import type { PinnedSnapshot } from "../snapshot/pinned-snapshot.ts";
import { unmetRequirements } from "../snapshot/requirements.ts";

/** What a publication candidate is checked against besides itself. */
export interface PublicationContext {
  /** The bootstrap the gateway runs with (trusted headers, MCP servers, OAuth issuers). */
  readonly gateway: GatewayConfig;
  /** The active BackendSnapshot, whose pools must serve every active model revision; undefined: not checked. */
  readonly snapshot: PinnedSnapshot | undefined;
  /**
   * Stripe counts of every ledger root any activated revision used. A root's books are split over
   * that many objects, so a revision that split them differently would start a second set of books.
   */
  readonly ledgerRoots: ReadonlyMap<string, number>;
  /** The environment refuses the demo keys (the edge's staging and production). */
  readonly refuseDemoKeys?: boolean | undefined;
}

/** A candidate that passed every check: its validated form, canonical digest and ledger roots. */
export interface ValidPublication {
  readonly ok: true;
  readonly publication: PublicationConfig;
  readonly digest: string;
  /** Root → stripes of the tenants that use the ledger. */
  readonly ledgerRoots: ReadonlyMap<string, number>;
}

export type CandidateVerdict = ValidPublication | { readonly ok: false; readonly issues: readonly ConfigIssue[] };

const FILE = CONFIG_FILES.publication;

/**
 * Checks a publication candidate (the parsed YAML or JSON document) as `sluice config validate`
 * checks publication.yaml: the schema, every reference inside it and into the bootstrap, routing,
 * budgets and MCP policy; then that the active snapshot serves its active model revisions and
 * that no tenant's ledger stripes change. Every issue is returned, not just the first.
 */
export async function validateCandidate(candidate: unknown, ctx: PublicationContext): Promise<CandidateVerdict> {
  const parsed = publicationSchema.safeParse(candidate);
  if (!parsed.success) return { ok: false, issues: zodIssues(FILE, parsed.error) };
  const publication = parsed.data;
  // Every check runs, so one answer names every issue: references, the snapshot's pools, stripes.
  const issues: ConfigIssue[] = publicationIssues(ctx.gateway, publication);
  if (ctx.refuseDemoKeys === true) issues.push(...demoKeyIssues(publication, FILE));
  if (ctx.snapshot) {
    const snapshot = ctx.snapshot;
    publication.models.forEach((m, i) => {
      const active = m.revisions.find((r) => r.revision === m.activeRevision);
      if (!active) return;
      const requirement = { pool: active.pool, requires: active.requires, neededBy: `model ${m.id} revision ${active.revision}` };
      for (const message of unmetRequirements(snapshot, [requirement])) issues.push({ file: FILE, path: `models[${i}]`, message: `${message} in the active backend snapshot (revision ${snapshot.revision})` });
    });
  }
  const ledgerRoots = new Map<string, number>();
  for (const t of ledgerTenants(publication, issues)) {
    ledgerRoots.set(t.root, t.stripes);
    const before = ctx.ledgerRoots.get(t.root);
    if (before !== undefined && before !== t.stripes) {
      const i = publication.tenants.findIndex((x) => x.id === t.id);
      issues.push({ file: FILE, path: `tenants[${i}].ledger.stripes`, message: `ledger root "${t.root}" is split over ${before} stripes; a running gateway cannot change that (it would start a second set of books)` });
    }
  }
  if (issues.length > 0) return { ok: false, issues };
  try {
    // What every isolate will do with it: a candidate that passed the checks compiles, or says why not.
    compilePublication(publication);
  } catch (err) {
    return { ok: false, issues: [{ file: FILE, path: "", message: `does not compile: ${err instanceof Error ? err.message : String(err)}` }] };
  }
  return { ok: true, publication, digest: await canonicalDigest(publication), ledgerRoots };
}

/** The tenants that use the ledger; none while references are broken (the issues already say which). */
function ledgerTenants(publication: PublicationConfig, issues: readonly ConfigIssue[]): ReturnType<ReturnType<typeof compileBudgetPolicy>["tenants"]> {
  try {
    return compileBudgetPolicy(publication).tenants();
  } catch (err) {
    if (issues.length > 0) return [];
    throw err;
  }
}
