import type { PublicationConfig } from "../config/publication-schema.ts";

/**
 * Who is calling, as established by the transport adapter. Opaque to the engine beyond these ids:
 * the engine looks grants up in the publication, it never sees a raw key.
 *
 * The financial attribution is the tenant and, inside it, `chargeTo`: for an API key its
 * configured `chargeTo`, for an OAuth access token its issuer's fixed one or its claim. Budgets
 * (src/publication/budgets.ts) and task rules (src/publication/task-policy.ts) read it from here,
 * so a key and a token charged to the same project are held to the same scopes and caps.
 */
export interface Principal {
  readonly tenantId: string;
  readonly keyId: string;
  /** `team` or `team/project` of the tenant the caller is charged to; undefined: the tenant alone. */
  readonly chargeTo?: string | undefined;
  /**
   * The entrypoints the credential itself grants (`*`: all): an access token's, from its scopes
   * (`auth.oauth.scopeEntrypoints`). Undefined for an API key, whose grants the publication holds
   * by its id, so a revision that changes them applies to the key at once.
   */
  readonly entrypoints?: readonly string[] | undefined;
}

/**
 * Each tenant of a publication with the charge targets it has (`team` and `team/project`): what a
 * claimed `chargeTo` is checked against before it becomes a principal's.
 */
export function chargeTargetsOf(pub: PublicationConfig): ReadonlyMap<string, ReadonlySet<string>> {
  return new Map(pub.tenants.map((t) => [t.id, new Set(t.teams.flatMap((team) => [team.id, ...team.projects.map((p) => `${team.id}/${p.id}`)]))]));
}
