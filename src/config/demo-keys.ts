import type { ConfigIssue } from "./parse-file.ts";
import type { PublicationConfig } from "./publication-schema.ts";

/**
 * SHA-256 digests of the demo keys the bundled publication.yaml lists and `npm start` prints: public
 * knowledge, so a deployment that serves them is open to anyone who read the README.
 */
export const DEMO_KEY_DIGESTS: ReadonlyMap<string, string> = new Map([
  ["1c590839af894cf25f9a5fe06929af05b377f60efbe55508ef93d251887b9213", "sk-sluice-demo"],
  ["9c9de15ecd28d1140f89bbfdf085024797c70c399b658f682775ee8ba0bd50f7", "sk-sluice-limited"],
]);

/**
 * Where a publication lists a demo key (current or still in a rotation's grace): the issues an edge
 * environment refuses it with (`SLUICE_DEMO_KEYS = "refuse"`, set for staging and production).
 */
export function demoKeyIssues(pub: PublicationConfig, file: string): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  pub.tenants.forEach((t, ti) =>
    t.apiKeys.forEach((k, ki) => {
      for (const digest of [k.sha256, ...k.previous.map((p) => p.sha256)]) {
        const name = DEMO_KEY_DIGESTS.get(digest);
        if (name !== undefined && k.revokedAt === undefined) {
          issues.push({ file, path: `tenants[${ti}].apiKeys[${ki}]`, message: `is the demo key ${name}, which anyone can read in the README: this environment refuses it. Deploy your own publication (SLUICE_PUBLICATION_YAML or a config/ of your own) with keys of your own` });
        }
      }
    }),
  );
  return issues;
}
