import { describe, expect, it } from "vitest";
import { parseDocument } from "yaml";
import { loadConfig, loadConfigWithSeed } from "../../../src/config/load-config.ts";
import { ConfigValidationError } from "../../../src/config/parse-file.ts";
import { compilePublication } from "../../../src/publication/compile-publication.ts";
import { readValidatedConfig, renderValidatedConfig, VALIDATED_CONFIG_FORMAT } from "../../../src/config/validated-config.ts";
import { canonicalJson } from "../../../src/digest/canonical-digest.ts";
import { issuesOf } from "../support/config-issues.ts";
import { bundled, bundledTexts, textsWith } from "../support/fixtures.ts";

/** Every value that JSON cannot carry as it is (it would come back changed or gone). */
function unJsonable(value: unknown, path = "$"): string[] {
  if (value === null || typeof value === "string" || typeof value === "boolean") return [];
  if (typeof value === "number") return Number.isFinite(value) ? [] : [`${path}: ${value}`];
  if (Array.isArray(value)) return value.flatMap((v, i) => (v === undefined ? [`${path}[${i}]: undefined`] : unJsonable(v, `${path}[${i}]`)));
  if (typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) return Object.entries(value).flatMap(([k, v]) => (v === undefined ? [] : unJsonable(v, `${path}.${k}`)));
  return [`${path}: ${Object.prototype.toString.call(value)}`];
}

describe("the validated config artifact", () => {
  it("carries the validated config as JSON can: what the Worker reads is what the CLI validated", () => {
    const { config, publicationDocument } = loadConfigWithSeed(bundledTexts);
    // The schemas' outputs must stay plain data, or the artifact would hand the Worker something else.
    expect(unJsonable(config)).toEqual([]);
    const read = readValidatedConfig(renderValidatedConfig({ config, publicationDocument }));
    expect(canonicalJson(read.config)).toBe(canonicalJson(config));
    expect(canonicalJson(compilePublication(read.config.publication).poolRequirements)).toBe(canonicalJson(compilePublication(config.publication).poolRequirements));
    // The seed document is publication.yaml as written, not its defaulted form.
    expect(read.publicationDocument).toEqual(parseDocument(bundledTexts.publication).toJS());
  });

  it("gives the same config as loadConfig, with the seed document beside it", () => {
    const { config } = loadConfigWithSeed(bundledTexts);
    expect(canonicalJson(config)).toBe(canonicalJson(loadConfig(bundledTexts)));
  });

  it("still reports an empty publication.yaml by the schema", () => {
    const issues = issuesOf(() => loadConfigWithSeed({ ...bundledTexts, publication: "" }));
    expect(issues.some((i) => i.file === "publication.yaml")).toBe(true);
  });

  it("keeps every file's issues when publication.yaml has a syntax error", () => {
    const g = bundled("gateway");
    g.limits.maxBodyBytes = -1;
    const issues = issuesOf(() => loadConfigWithSeed({ ...textsWith({ gateway: g }), publication: "tenants: [\n" }));
    expect(issues.map((i) => i.file).sort()).toEqual(["gateway.yaml", "publication.yaml"]);
  });

  it("refuses an artifact of another format, naming both", () => {
    const text = JSON.stringify({ format: "sluice-validated-config/0", config: {} });
    let err: unknown;
    try {
      readValidatedConfig(text);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigValidationError);
    expect((err as ConfigValidationError).issues[0]!.message).toContain("sluice-validated-config/0");
    expect((err as ConfigValidationError).issues[0]!.message).toContain(VALIDATED_CONFIG_FORMAT);
    expect(() => readValidatedConfig("{not json")).toThrow(ConfigValidationError);
  });
});
