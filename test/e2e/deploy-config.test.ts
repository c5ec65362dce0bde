/**
 * The deployment files: wrangler.toml's edge environments and compose.yaml (docs/deploy.md).
 *
 * The Compose schema, support/compose-spec.schema.json, is vendored unmodified from the GitHub
 * repository compose-spec/compose-spec, path schema/compose-spec.json, at commit
 * 170098ba07d9f53c383a41bfd4c5166b0a4529a6 (the file last changed in commit
 * a08f8d51631b7127ddac3d2c65537db429d0f1d0, 2025-10-21). The Compose specification is licensed
 * under the Apache License 2.0. The test checks its SHA-256 below, so an edit shows; to update
 * it, replace the file with a newer upstream version and record the new commit and digest here.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Ajv, type ValidateFunction } from "ajv";
import { describe, expect, it } from "vitest";
import { experimental_readRawConfig, unstable_readConfig } from "wrangler";
import { parse } from "yaml";
import { OFFLINE_ENV, ROOT } from "../../local-stack/build.ts";

const WRANGLER_TOML = join(ROOT, "wrangler.toml");
const WRANGLER = join(ROOT, "node_modules", ".bin", "wrangler");
const SCHEMA_FILE = join(ROOT, "test", "e2e", "support", "compose-spec.schema.json");
const SCHEMA_SHA256 = "1f91e091f16b2dd50ab8860e02bb391d22df553d91c145eacedb1b6eff9c3f0e";
/** Vars the top level has on purpose and the edge environments leave out (local test values). */
const LOCAL_ONLY_VARS = ["SIMULATOR_API_KEY"];
/** How long `sluice serve` gives workerd to exit after the drain before killing it (cli/commands/serve.ts). */
const WORKERD_EXIT_GRACE_MS = 10_000;

// ── wrangler.toml ───────────────────────────────────────────────────────────────────────────────

/** The environments as written in the file (`[env.NAME]`), read by wrangler's own parser. */
const envNames = Object.keys(experimental_readRawConfig({ config: WRANGLER_TOML }).rawConfig.env ?? {});
const readEnv = (env?: string) => unstable_readConfig({ config: WRANGLER_TOML, ...(env === undefined ? {} : { env }) }, { hideWarnings: true });

/** `wrangler deploy --dry-run` into a fresh directory; its output and whether the bundle was written. */
function dryRun(env: string | undefined): { status: number | null; output: string; bundled: boolean } {
  const outDir = mkdtempSync(join(tmpdir(), "sluice-dry-run-"));
  try {
    const res = spawnSync(WRANGLER, ["deploy", "--dry-run", ...(env === undefined ? [] : ["--env", env]), "--outdir", outDir], {
      cwd: ROOT,
      env: { ...process.env, ...OFFLINE_ENV },
      encoding: "utf8",
      timeout: 120_000,
    });
    // eslint-disable-next-line no-control-regex
    const output = `${res.stdout}\n${res.stderr}`.replace(/\x1b\[[0-9;]*m/g, "");
    return { status: res.status, output, bundled: existsSync(join(outDir, "index.js")) };
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
}

describe("wrangler.toml: edge environments", () => {
  it("declares staging and production", () => {
    expect(envNames).toEqual(expect.arrayContaining(["staging", "production"]));
  });

  it("keeps compatibility settings top-level, first in the file, where the workerd launcher reads them", () => {
    const toml = readFileSync(WRANGLER_TOML, "utf8");
    const top = readEnv();
    // The same regexes as the launcher's compatibilitySettings(): the first such line wins.
    const date = /^compatibility_date\s*=\s*"([^"]+)"/m.exec(toml)?.[1];
    const flags = [.../^compatibility_flags\s*=\s*\[([^\]]*)\]/m.exec(toml)![1]!.matchAll(/"([^"]+)"/g)].map((m) => m[1]);
    expect(date).toBe(top.compatibility_date);
    expect(flags).toEqual(top.compatibility_flags);
    const raw = experimental_readRawConfig({ config: WRANGLER_TOML }).rawConfig;
    for (const name of envNames) {
      expect(raw.env![name]!.compatibility_date, name).toBeUndefined();
      expect(raw.env![name]!.compatibility_flags, name).toBeUndefined();
    }
  });

  it("gives every environment its own Worker name", () => {
    const names = [readEnv().name, ...envNames.map((e) => readEnv(e).name)];
    expect(new Set(names).size).toBe(names.length);
  });

  for (const env of envNames) {
    it(`${env}: no workers.dev or preview URL; the top level's Durable Object bindings and migrations`, () => {
      const top = readEnv();
      const cfg = readEnv(env);
      expect(cfg.workers_dev).toBe(false);
      expect(cfg.preview_urls).toBe(false);
      expect(top.durable_objects.bindings.length).toBeGreaterThan(0);
      expect(cfg.durable_objects.bindings).toEqual(top.durable_objects.bindings);
      expect(cfg.migrations).toEqual(top.migrations);
      expect(cfg.main).toBe(top.main);
      // The edge has no simulator: its test key stays out of every environment.
      for (const name of LOCAL_ONLY_VARS) expect(cfg.vars, env).not.toHaveProperty(name);
      // The demo keys are public: the edge refuses a publication that lists them.
      expect(cfg.vars.SLUICE_DEMO_KEYS, env).toBe("refuse");
    });

    it(`${env}: wrangler deploy --dry-run --env ${env} bundles, and nothing else is left uninherited`, { timeout: 150_000 }, () => {
      const run = dryRun(env);
      expect(run.status, run.output).toBe(0);
      expect(run.bundled, run.output).toBe(true);
      // A binding type added at the top level but not here would deploy without it: wrangler
      // only warns. The one warning expected is about the local-only vars.
      expect(run.output).not.toMatch(/exists at the top level, but not on "env\./);
      const vars = new RegExp(`Please add these vars to "env\\.${env}\\.vars":\\n((?:[ \\t]*- \\S+\\n?)+)`).exec(run.output);
      const missing = vars ? [...vars[1]!.matchAll(/- (\S+)/g)].map((m) => m[1]) : [];
      expect(missing.sort()).toEqual([...LOCAL_ONLY_VARS].sort());
    });
  }

  it("still bundles without --env, as the workerd launcher does (a warning, exit 0)", { timeout: 150_000 }, () => {
    const run = dryRun(undefined);
    expect(run.status, run.output).toBe(0);
    expect(run.bundled, run.output).toBe(true);
  });
});

// ── compose.yaml ────────────────────────────────────────────────────────────────────────────────

const compose = () => parse(readFileSync(join(ROOT, "compose.yaml"), "utf8")) as any;

function composeValidator(): ValidateFunction {
  const schema = JSON.parse(readFileSync(SCHEMA_FILE, "utf8"));
  // The schema names its meta-schema as https://json-schema.org/draft-07/schema, an alias ajv
  // does not know; register draft-07 under it so the schema itself is checked too. strict off:
  // the schema uses union types, which ajv's strict mode rejects.
  const draft7 = JSON.parse(readFileSync(join(ROOT, "node_modules", "ajv", "dist", "refs", "json-schema-draft-07.json"), "utf8"));
  const ajv = new Ajv({ allErrors: true, strict: false });
  ajv.addMetaSchema({ ...draft7, $id: schema.$schema });
  return ajv.compile(schema);
}

/** A Compose duration ("30s", "1m30s", "1500ms") in milliseconds. */
function durationMs(text: string): number {
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)];
  expect(parts.map((p) => p[0]).join(""), `duration ${text}`).toBe(text);
  return parts.reduce((sum, p) => sum + Number(p[1]) * units[p[2]!]!, 0);
}

interface Port {
  hostIp: string | undefined;
  published: string | undefined;
  target: string;
}

/** Both port syntaxes: "[HOST_IP:][PUBLISHED:]TARGET[/PROTO]" and the long form. */
function ports(service: any): Port[] {
  return (service.ports ?? []).map((p: any): Port => {
    if (typeof p === "object") return { hostIp: p.host_ip, published: p.published === undefined ? undefined : String(p.published), target: String(p.target) };
    const parts = String(p).replace(/\/\w+$/, "").split(":");
    const target = parts.pop()!;
    const published = parts.pop();
    return { hostIp: parts.length > 0 ? parts.join(":") : undefined, published, target };
  });
}

/** The environment as a map (Compose allows a list of NAME=VALUE too); a bare NAME maps to null. */
function environment(service: any): Record<string, string | null> {
  const env = service.environment ?? {};
  if (!Array.isArray(env)) return env;
  return Object.fromEntries(env.map((e: string) => (e.includes("=") ? [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)] : [e, null])));
}

/** The value of `--flag` in a command given as a list. */
function flag(command: readonly string[], name: string): string | undefined {
  const i = command.indexOf(name);
  return i < 0 ? undefined : command[i + 1];
}

describe("compose.yaml", () => {
  it("uses the vendored Compose schema unmodified", () => {
    expect(createHash("sha256").update(readFileSync(SCHEMA_FILE)).digest("hex")).toBe(SCHEMA_SHA256);
  });

  it("is valid against the Compose specification's schema", () => {
    const validate = composeValidator();
    const ok = validate(compose());
    expect(validate.errors ?? [], JSON.stringify(validate.errors, null, 2)).toEqual([]);
    expect(ok).toBe(true);
  });

  it("the validation is real: broken copies are refused", () => {
    const validate = composeValidator();
    const unknownKey = { ...compose(), deploy_to: "production" };
    expect(validate(unknownKey)).toBe(false);
    expect(validate.errors!.some((e) => e.keyword === "additionalProperties" && e.params.additionalProperty === "deploy_to")).toBe(true);
    const badPorts = compose();
    badPorts.services.sluice.ports = 5;
    expect(validate(badPorts)).toBe(false);
    expect(validate.errors!.some((e) => e.instancePath === "/services/sluice/ports")).toBe(true);
    const misspelt = compose();
    misspelt.services.sluice.stop_grace_periode = "60s";
    expect(validate(misspelt)).toBe(false);
  });

  it("builds the gateway from the repository's Dockerfile and starts it in every profile", () => {
    const sluice = compose().services.sluice;
    expect(sluice.build).toMatchObject({ context: ".", dockerfile: "Dockerfile" });
    expect(sluice.profiles).toBeUndefined();
    // The image's HEALTHCHECK applies; the file does not replace or disable it.
    expect(sluice.healthcheck).toBeUndefined();
  });

  it("publishes the public port and keeps the admin port on the host's loopback", () => {
    const doc = compose();
    const published = ports(doc.services.sluice);
    expect(published).toContainEqual(expect.objectContaining({ target: "8080", published: "8080" }));
    const publicPort = published.find((p) => p.target === "8080")!;
    expect([undefined, "0.0.0.0", ""]).toContain(publicPort.hostIp);
    const admin = published.filter((p) => p.target === "8081");
    expect(admin.length).toBeGreaterThan(0);
    for (const p of admin) expect(p.hostIp).toBe("127.0.0.1");
    // The image binds the admin listener to the container's loopback; the publish reaches it
    // only because the file asks for the container's interface.
    expect(environment(doc.services.sluice).SLUICE_ADMIN).toBe("0.0.0.0:8081");
    for (const [name, service] of Object.entries<any>(doc.services)) {
      expect(service.network_mode, name).not.toBe("host");
      if (name !== "sluice") for (const p of ports(service)) expect(p.hostIp, `${name} publishes ${p.target}`).toBe("127.0.0.1");
    }
  });

  it("mounts the config read-only and keeps state on a named volume", () => {
    const doc = compose();
    const volumes: any[] = doc.services.sluice.volumes;
    const config = volumes.find((v) => v.target === "/etc/sluice");
    expect(config).toMatchObject({ type: "bind", source: "./config", read_only: true });
    const state = volumes.find((v) => v.target === "/var/lib/sluice");
    expect(state).toMatchObject({ type: "volume" });
    expect(Object.keys(doc.volumes ?? {})).toContain(state.source);
  });

  it("takes secrets from the environment, each secret the bundled config names among them", () => {
    const env = environment(compose().services.sluice);
    expect(env.SLUICE_ADMIN_TOKEN).toMatch(/^\$\{SLUICE_ADMIN_TOKEN:\?[^}]+\}$/);
    // No literal secret: every token or key is interpolated from the shell or passed through.
    for (const [name, value] of Object.entries(env)) {
      if (/(TOKEN|KEY|SECRET)$/.test(name) && value !== null) expect(value, name).toMatch(new RegExp(`^\\$\\{${name}(:[?-][^}]*)?\\}$`));
    }
    // `sluice serve` refuses to start while a secret its config names is unset.
    const gateway = parse(readFileSync(join(ROOT, "config", "gateway.yaml"), "utf8"));
    const backends = parse(readFileSync(join(ROOT, "config", "backends.yaml"), "utf8"));
    const named = [gateway.security?.adminTokenSecret ?? "SLUICE_ADMIN_TOKEN", ...backends.backends.flatMap((b: any) => (b.credential ? [b.credential.secret] : []))];
    for (const name of named) expect(Object.keys(env), name).toContain(name);
  });

  it("gives the drain time to finish before Docker kills the container", () => {
    const sluice = compose().services.sluice;
    const drain = durationMs(environment(sluice).SLUICE_DRAIN_TIMEOUT ?? "30s");
    expect(durationMs(sluice.stop_grace_period)).toBeGreaterThan(drain + WORKERD_EXIT_GRACE_MS);
  });

  it("has the demo and observability profiles", () => {
    const services = compose().services as Record<string, any>;
    const inProfile = (p: string) => Object.keys(services).filter((n) => (services[n].profiles ?? []).includes(p));
    expect(inProfile("demo")).toEqual(["simulator"]);
    expect(inProfile("observability").sort()).toEqual(["grafana", "otel-collector", "prometheus"]);
  });

  it("observability: Prometheus scrapes the gateway's admin listener with the admin token, and Grafana has it and the dashboard", () => {
    const doc = compose();
    // The token reaches Prometheus as a secret file made from the variable the gateway reads.
    expect(doc.secrets.sluice_admin_token).toEqual({ environment: "SLUICE_ADMIN_TOKEN" });
    const prometheus = doc.services.prometheus;
    expect(prometheus.secrets).toContain("sluice_admin_token");
    const configMount = prometheus.volumes.find((v: any) => v.target === "/etc/prometheus/prometheus.yaml");
    expect(configMount).toMatchObject({ type: "bind", read_only: true });
    expect(prometheus.command).toContain("--config.file=/etc/prometheus/prometheus.yaml");
    const scrape = parse(readFileSync(join(ROOT, configMount.source), "utf8"));
    const job = scrape.scrape_configs.find((j: any) => j.job_name === "sluice");
    expect(job).toMatchObject({ metrics_path: "/admin/metrics", authorization: { type: "Bearer", credentials_file: "/run/secrets/sluice_admin_token" } });
    // The target is the gateway's admin listener as the container binds it.
    const admin = environment(doc.services.sluice).SLUICE_ADMIN!;
    expect(job.static_configs[0].targets).toEqual([`sluice:${admin.split(":").at(-1)}`]);
    const grafana = doc.services.grafana;
    const mounts = Object.fromEntries(grafana.volumes.map((v: any) => [v.target, v]));
    expect(mounts["/etc/grafana/provisioning"]).toMatchObject({ type: "bind", source: "./container/grafana/provisioning", read_only: true });
    expect(mounts["/var/lib/grafana/dashboards"]).toMatchObject({ type: "bind", source: "./container/grafana/dashboards", read_only: true });
    const provider = parse(readFileSync(join(ROOT, "container/grafana/provisioning/dashboards/sluice.yaml"), "utf8"));
    expect(provider.providers[0].options.path).toBe("/var/lib/grafana/dashboards");
    expect(readdirSync(join(ROOT, "container/grafana/dashboards"))).toContain("sluice.json");
    const source = parse(readFileSync(join(ROOT, "container/grafana/provisioning/datasources/prometheus.yaml"), "utf8"));
    expect(source.datasources[0]).toMatchObject({ type: "prometheus", url: `http://prometheus:${ports(prometheus)[0]!.target}` });
  });

  it("demo: the simulator answers where the bundled config's backends point, with the key the gateway holds", () => {
    const doc = compose();
    const sim = doc.services.simulator;
    // Sharing the gateway's network namespace, the simulator is its 127.0.0.1.
    expect(sim.network_mode).toBe("service:sluice");
    expect(sim.image).toBe(`node:${JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).devDependencies.node}-slim`);
    expect(sim.volumes).toContainEqual(expect.objectContaining({ source: "./simulator", read_only: true }));
    const command: string[] = sim.command;
    expect(command.slice(0, 2)).toEqual(["node", "simulator/main.ts"]);
    const backends = parse(readFileSync(join(ROOT, "config", "backends.yaml"), "utf8"));
    const local = backends.backends.map((b: any) => new URL(b.baseUrl)).filter((u: URL) => u.hostname === "127.0.0.1");
    expect(local.length).toBeGreaterThan(0);
    for (const url of local) expect(flag(command, "--port")).toBe(url.port);
    expect(flag(command, "--host")).toBe("127.0.0.1");
    expect(flag(command, "--api-key")).toBe(environment(doc.services.sluice).SIMULATOR_API_KEY);
  });
});
