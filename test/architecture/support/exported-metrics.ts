import { GatewayMetrics, type GaugeSources } from "../../../src/telemetry/gateway-metrics.ts";
import { prometheusText } from "../../../src/telemetry/metric-registry.ts";

/** Every gauge source present, so the registry holds every instrument the gateway can register. */
const SOURCES: Required<GaugeSources> = {
  inFlight: () => 0,
  draining: () => false,
  admission: () => ({ inFlight: 0, queued: 0, admitted: 0, waited: 0, refused: {} }),
  snapshotRevision: () => 1,
  ledger: () => ({ leases: 0, attemptsOpen: 0, settlementsQueued: 0 }),
  breakers: () => [],
  health: () => [],
  credentialMints: () => ({ minted: 0, failed: 0 }),
  publicationRevisions: () => ({ stable: 1, canary: undefined }),
  canaryRevision: () => undefined,
};

/** One exported family: its Prometheus type, and the label names of each sample name it exports. */
export interface ExportedFamily {
  readonly type: string;
  /** Sample name (`x_total`, `x_bucket`, …) → its label names (`le` on buckets). */
  readonly samples: ReadonlyMap<string, ReadonlySet<string>>;
}

/**
 * The families a gateway exports, read from the Prometheus text of a registry with every
 * instrument, the tenant label on or off. Family and label names come from the exposition itself
 * (the `# TYPE` lines and the instruments' label keys as the text spells them), so what is checked
 * is what a scraper sees.
 */
export function exportedFamilies(tenantLabel = true): ReadonlyMap<string, ExportedFamily> {
  const m = new GatewayMetrics(
    { entrypoints: ["e"], models: ["m"], routes: ["default"], tenants: ["t"], tenantLabel: { enabled: tenantLabel, maxTenants: 5 }, maxSnapshotNames: 5 },
    SOURCES,
  );
  const text = prometheusText(m.registry);
  const out = new Map<string, ExportedFamily>();
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) out.set(name!, { type: type!, samples: new Map() });
  for (const inst of m.registry.read()) {
    const family = out.get(inst.promName);
    if (!family) throw new Error(`${inst.promName} has no # TYPE line`);
    const labels = inst.labels.map((l) => l.key.replace(/[^a-zA-Z0-9_]/g, "_"));
    const samples = family.samples as Map<string, ReadonlySet<string>>;
    if (inst.kind === "histogram") {
      samples.set(`${inst.promName}_bucket`, new Set([...labels, "le"]));
      samples.set(`${inst.promName}_sum`, new Set(labels));
      samples.set(`${inst.promName}_count`, new Set(labels));
    } else {
      samples.set(inst.promName, new Set(labels));
    }
  }
  return out;
}

/** Every sample name a scraper can query, with its label names. */
export function exportedSamples(tenantLabel = true): ReadonlyMap<string, ReadonlySet<string>> {
  const out = new Map<string, ReadonlySet<string>>();
  for (const f of exportedFamilies(tenantLabel).values()) for (const [name, labels] of f.samples) out.set(name, labels);
  return out;
}
