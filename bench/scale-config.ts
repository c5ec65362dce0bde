/**
 * Writes a scale config directory (issue: 1,000 logical models, 10,000 keys, 100 tenants, 1,000
 * backends) next to the shipped gateway.yaml, for measuring `config validate`, the start and the
 * resting memory against the bundled config (docs/performance.md, "Scale").
 *
 *   node bench/scale-config.ts --out DIR [--models N] [--tenants N] [--keys-per-tenant N] [--backends N]
 *
 * Every backend points at the simulator's address in the shipped egress allowlist, so the
 * directory passes `sluice config validate` and `sluice serve` as it is. Each model has its own
 * entrypoint and pool; each tenant's first key may call every entrypoint (`*`), the others a
 * handful, so `/v1/models` answers differ per key. Keys are `sk-scale-<tenant>-<key>`.
 */
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { stringify } from "yaml";
import { ROOT } from "../local-stack/build.ts";

/** Sizes of a scale config. */
export interface ScaleSizes {
  readonly models: number;
  readonly tenants: number;
  readonly keysPerTenant: number;
  readonly backends: number;
}

/** The figures. */
export const SCALE_SIZES: ScaleSizes = { models: 1000, tenants: 100, keysPerTenant: 100, backends: 1000 };

/** Entrypoints a key that is not its tenant's first may call. */
const KEY_ENTRYPOINTS = 5;

/** The plaintext of tenant `t`'s key `k` (both from 0). */
export const scaleKey = (t: number, k: number): string => `sk-scale-${t}-${k}`;

/** The entrypoint of model `m` (from 0). */
export const scaleEntrypoint = (m: number): string => `scale-${m}`;

/** The entrypoints tenant `t`'s key `k` may call: every one (`*`) for a tenant's first key, a handful otherwise. */
export function scaleKeyEntrypoints(t: number, k: number, sizes: ScaleSizes = SCALE_SIZES): string[] {
  return k === 0 ? ["*"] : Array.from({ length: KEY_ENTRYPOINTS }, (_, i) => scaleEntrypoint((t * sizes.keysPerTenant + k * KEY_ENTRYPOINTS + i) % sizes.models));
}

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/** The three config texts of a scale config. */
export function scaleConfigTexts(sizes: ScaleSizes = SCALE_SIZES): { gateway: string; publication: string; backends: string } {
  const tenants = Array.from({ length: sizes.tenants }, (_, t) => ({
    id: `tenant-${t}`,
    limits: { money: { limit: 1000, currency: "USD", period: "30d" } },
    teams: [{ id: "team", projects: [{ id: "project" }] }],
    apiKeys: Array.from({ length: sizes.keysPerTenant }, (_, k) => ({
      id: `key-${k}`,
      sha256: sha256(scaleKey(t, k)),
      entrypoints: scaleKeyEntrypoints(t, k, sizes),
      chargeTo: "team/project",
    })),
  }));
  const publication = {
    version: 1,
    revision: "scale-1",
    tenants,
    entrypoints: Array.from({ length: sizes.models }, (_, m) => ({ name: scaleEntrypoint(m), default: [[`model-${m}`]] })),
    models: Array.from({ length: sizes.models }, (_, m) => ({
      id: `model-${m}`,
      activeRevision: 1,
      revisions: [{ revision: 1, pool: `pool-${m}`, requires: ["chat", "streaming"], price: { version: "scale", currency: "USD", inputPerMTok: 0.15, outputPerMTok: 0.6 } }],
    })),
  };
  const backends = {
    version: 1,
    backends: Array.from({ length: sizes.backends }, (_, b) => ({
      name: `backend-${b}`,
      protocol: "openai-chat",
      baseUrl: "http://127.0.0.1:9901/v1",
      credential: { secret: "SIMULATOR_API_KEY", scheme: "bearer" },
      capabilities: ["chat", "streaming", "stream-usage"],
    })),
    pools: Array.from({ length: sizes.models }, (_, m) => ({ name: `pool-${m}`, selector: "p2c", members: [{ backend: `backend-${m % sizes.backends}`, model: "sim-small" }] })),
  };
  return { gateway: readFileSync(join(ROOT, "config", "gateway.yaml"), "utf8"), publication: stringify(publication), backends: stringify(backends) };
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { out: { type: "string" }, models: { type: "string" }, tenants: { type: "string" }, "keys-per-tenant": { type: "string" }, backends: { type: "string" } } });
  if (values.out === undefined) {
    process.stderr.write("usage: node bench/scale-config.ts --out DIR [--models N] [--tenants N] [--keys-per-tenant N] [--backends N]\n");
    process.exit(2);
  }
  const n = (v: string | undefined, d: number) => (v === undefined ? d : Number(v));
  const sizes = { models: n(values.models, SCALE_SIZES.models), tenants: n(values.tenants, SCALE_SIZES.tenants), keysPerTenant: n(values["keys-per-tenant"], SCALE_SIZES.keysPerTenant), backends: n(values.backends, SCALE_SIZES.backends) };
  const texts = scaleConfigTexts(sizes);
  mkdirSync(values.out, { recursive: true });
  for (const [name, text] of Object.entries(texts)) writeFileSync(join(values.out, `${name}.yaml`), text);
  process.stdout.write(`${values.out}: ${sizes.models} models and entrypoints, ${sizes.tenants * sizes.keysPerTenant} keys in ${sizes.tenants} tenants, ${sizes.backends} backends; keys are ${scaleKey(0, 0)} … ${scaleKey(sizes.tenants - 1, sizes.keysPerTenant - 1)}\n`);
}
