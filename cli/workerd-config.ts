import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { parse } from "yaml";
import { ROOT } from "../local-stack/build.ts";
import { gatewayConfigSchema } from "../src/config/gateway-schema.ts";
import { networkAllowFor } from "../src/egress/egress-guard.ts";
import { VALIDATED_CONFIG_BINDING, VALIDATED_CONFIG_FORMAT } from "../src/config/validated-config.ts";
import { TLS_BINDINGS_VAR } from "../src/snapshot/tls-bindings.ts";
import type { TlsBackendService, TlsKeypairFiles } from "./tls-material.ts";

/** What one `workerd serve` of the gateway needs. */
export interface WorkerdConfigOptions {
  /** Directory the config file is written to: workerd resolves `embed` paths relative to it. */
  readonly configDir: string;
  /** Directory with the bundle (`index.js`) and its text modules. */
  readonly bundleDir: string;
  readonly publicAddress: string;
  readonly adminAddress: string;
  /** Where the unauthenticated metrics listener binds (`observability.metrics.listener`); none when unset. */
  readonly metricsAddress?: string | undefined;
  /** Writable directory for Durable Object storage. */
  readonly stateDir: string;
  readonly compatibilityDate: string;
  readonly compatibilityFlags: readonly string[];
  /** Plain-text bindings (non-secret values, e.g. wrangler vars). */
  readonly vars: Readonly<Record<string, string>>;
  /** Bindings read from the workerd process environment (secrets; values never enter the file). */
  readonly secretsFromEnv: readonly string[];
  /**
   * workerd's outbound allow list, instead of the one derived from gateway.yaml's egress
   * allowlist: for a bundle of another revision, whose gateway.yaml this one cannot read.
   */
  readonly networkAllow?: readonly string[] | undefined;
  /**
   * The validated config's artifact (src/config/validated-config.ts), bound as
   * `SLUICE_VALIDATED_CONFIG`: the Worker then reads it instead of validating the YAML again.
   */
  readonly validatedConfig?: string | undefined;
  /** Config override files (absolute paths), bound as SLUICE_*_YAML text. */
  readonly configFiles?: { readonly gateway?: string; readonly publication?: string; readonly backends?: string } | undefined;
  /**
   * Workers AI bindings by name, each the runtime's own binding code (`cloudflare-internal:ai-api`,
   * what wrangler binds for `[ai]`) whose requests go to the service at this address (host:port)
   * instead of Cloudflare's. Only the edge has the real service: this is for a stand-in, in tests.
   */
  readonly workersAiBindings?: Readonly<Record<string, string>> | undefined;
  /** The public listener serves HTTPS (TLS 1.2 or newer) with this certificate chain and key. */
  readonly publicTls?: TlsKeypairFiles | undefined;
  /** The admin listener serves HTTPS with its own certificate chain and key. */
  readonly adminTls?: TlsKeypairFiles | undefined;
  /** Backends with `tls`: each an external HTTPS service bound to the Worker by its binding name. */
  readonly tlsBackends?: readonly TlsBackendService[] | undefined;
}

const str = (s: string) => JSON.stringify(s);

/**
 * Renders a workerd Cap'n Proto config: public socket → default entrypoint, admin socket → the
 * `Admin` entrypoint (the admin API exists on no other socket), SQLite Durable Objects on local
 * disk, and an outbound network limited to public addresses and the private ones gateway.yaml's
 * egress allowlist names (the simulator). A listener given a keypair serves HTTPS (TLS 1.2 or
 * newer); each backend `tls` binding is an external HTTPS service with its CA, server name and
 * client certificate, all embedded from files, so no PEM text enters this config.
 */
export function renderWorkerdConfig(o: WorkerdConfigOptions): string {
  const embed = (file: string) => `embed ${str(relative(o.configDir, file))}`;
  const modules = readdirSync(o.bundleDir)
    .filter((f) => f === "index.js" || f.endsWith(".yaml"))
    .sort((a, b) => (a === "index.js" ? -1 : b === "index.js" ? 1 : a.localeCompare(b)))
    .map((f) => (f.endsWith(".js") ? `(name = ${str(f)}, esModule = ${embed(join(o.bundleDir, f))})` : `(name = ${str(f)}, text = ${embed(join(o.bundleDir, f))})`));
  const bindings = [
    ...Object.entries(o.vars).map(([k, v]) => `(name = ${str(k)}, text = ${str(v)})`),
    ...o.secretsFromEnv.map((k) => `(name = ${str(k)}, fromEnvironment = ${str(k)})`),
    `(name = "SNAPSHOT_CONTROLLER", durableObjectNamespace = "BackendSnapshotController")`,
    `(name = "PUBLICATION_CONTROLLER", durableObjectNamespace = "PublicationController")`,
    `(name = "CIRCUIT_BREAKER", durableObjectNamespace = "CircuitBreaker")`,
    `(name = "ATTEMPT_BUDGET", durableObjectNamespace = "AttemptBudget")`,
    `(name = "HEALTH_MONITOR", durableObjectNamespace = "HealthMonitor")`,
    `(name = "AGENT_CARD_REGISTRY", durableObjectNamespace = "AgentCardRegistry")`,
    `(name = "BUDGET_LEDGER", durableObjectNamespace = "BudgetLedger")`,
    `(name = "APPROVAL_DESK", durableObjectNamespace = "ApprovalDesk")`,
    `(name = "TASK_BINDING", durableObjectNamespace = "TaskBinding")`,
    `(name = "TASK_LEDGER", durableObjectNamespace = "TaskLedger")`,
    `(name = "RESPONSE_CACHE", durableObjectNamespace = "ResponseCache")`,
    `(name = "TELEMETRY_CLOCK", durableObjectNamespace = "TelemetryClock")`,
  ];
  const files = o.configFiles ?? {};
  if (files.gateway) bindings.push(`(name = "SLUICE_GATEWAY_YAML", text = ${embed(files.gateway)})`);
  if (files.publication) bindings.push(`(name = "SLUICE_PUBLICATION_YAML", text = ${embed(files.publication)})`);
  if (files.backends) bindings.push(`(name = "SLUICE_BACKENDS_YAML", text = ${embed(files.backends)})`);
  if (o.validatedConfig) bindings.push(`(name = ${str(VALIDATED_CONFIG_BINDING)}, text = ${embed(o.validatedConfig)})`);
  const tlsBackends = o.tlsBackends ?? [];
  // Always rendered (`{}` without TLS backends): a snapshot naming a binding the process lacks is refused at validation.
  bindings.push(`(name = ${str(TLS_BINDINGS_VAR)}, text = ${str(JSON.stringify(Object.fromEntries(tlsBackends.map((t) => [t.binding, t.fingerprint]))))})`);
  const tlsServices = tlsBackends.map((t, i) => {
    bindings.push(`(name = ${str(t.binding)}, service = "backend-tls-${i}")`);
    const options = [
      // Only the listed CA is trusted when one is given; else the system store, as fetch does.
      t.caFile === undefined ? "trustBrowserCas = true" : `trustBrowserCas = false, trustedCertificates = [${embed(t.caFile)}]`,
      ...(t.client === undefined ? [] : [`keypair = (privateKey = ${embed(t.client.keyFile)}, certificateChain = ${embed(t.client.certFile)})`]),
      "minVersion = tls1Dot2",
    ];
    return `\n    (name = "backend-tls-${i}", external = (address = ${str(t.address)}, https = (options = (), tlsOptions = (${options.join(", ")}), certificateHost = ${str(t.certificateHost)}))),`;
  });
  const listener = (tls: TlsKeypairFiles | undefined) =>
    tls === undefined ? "http = ()" : `https = (options = (), tlsOptions = (keypair = (privateKey = ${embed(tls.keyFile)}, certificateChain = ${embed(tls.certFile)}), minVersion = tls1Dot2))`;
  const aiServices = Object.entries(o.workersAiBindings ?? {}).map(([name, address], i) => {
    bindings.push(`(name = ${str(name)}, wrapped = (moduleName = "cloudflare-internal:ai-api", innerBindings = [(name = "fetcher", service = "workers-ai-${i}")]))`);
    return `\n    (name = "workers-ai-${i}", external = (address = ${str(address)}, http = ())),`;
  });
  return `using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "sluice", worker = .sluice),
    (name = "internet", network = (allow = [${(o.networkAllow ?? networkAllow(o)).map(str).join(", ")}])),
    (name = "state", disk = (path = ${str(o.stateDir)}, writable = true)),${aiServices.join("")}${tlsServices.join("")}
  ],
  sockets = [
    (name = "public", address = ${str(o.publicAddress)}, ${listener(o.publicTls)}, service = "sluice"),
    (name = "admin", address = ${str(o.adminAddress)}, ${listener(o.adminTls)}, service = (name = "sluice", entrypoint = "Admin")),${
      o.metricsAddress === undefined ? "" : `\n    (name = "metrics", address = ${str(o.metricsAddress)}, http = (), service = (name = "sluice", entrypoint = "Metrics")),`
    }
  ],
);

const sluice :Workerd.Worker = (
  modules = [
    ${modules.join(",\n    ")}
  ],
  compatibilityDate = ${str(o.compatibilityDate)},
  compatibilityFlags = [${o.compatibilityFlags.map(str).join(", ")}],
  bindings = [
    ${bindings.join(",\n    ")}
  ],
  durableObjectNamespaces = [
    (className = "BackendSnapshotController", uniqueKey = "sluice-backend-snapshot-controller", enableSql = true),
    (className = "PublicationController", uniqueKey = "sluice-publication-controller", enableSql = true),
    (className = "CircuitBreaker", uniqueKey = "sluice-circuit-breaker", enableSql = true),
    (className = "AttemptBudget", uniqueKey = "sluice-attempt-budget", enableSql = true),
    (className = "HealthMonitor", uniqueKey = "sluice-health-monitor", enableSql = true),
    (className = "AgentCardRegistry", uniqueKey = "sluice-agent-card-registry", enableSql = true),
    (className = "BudgetLedger", uniqueKey = "sluice-budget-ledger", enableSql = true),
    (className = "ApprovalDesk", uniqueKey = "sluice-approval-desk", enableSql = true),
    (className = "TaskBinding", uniqueKey = "sluice-task-binding", enableSql = true),
    (className = "TaskLedger", uniqueKey = "sluice-task-ledger", enableSql = true),
    (className = "ResponseCache", uniqueKey = "sluice-response-cache", enableSql = true),
    (className = "TelemetryClock", uniqueKey = "sluice-telemetry-clock", enableSql = true),
  ],
  durableObjectStorage = (localDisk = "state"),
  globalOutbound = "internet",
);
`;
}

/**
 * workerd's outbound network: public addresses, plus exactly the private ones gateway.yaml's
 * egress allowlist names (one-address CIDRs; a name there opens `local` or `private`). workerd
 * applies the list to DNS answers too, which the gateway's own egress guard never sees, so a
 * public name resolving to a private address is refused here. A gateway.yaml that does not
 * parse opens nothing private: the gateway refuses to start with it anyway.
 */
function networkAllow(o: WorkerdConfigOptions): string[] {
  try {
    // Without an override, the copy the bundle imports (an out directory may hold older ones).
    const bundled = /from "\.\/([^"]*gateway\.yaml)"/.exec(readFileSync(join(o.bundleDir, "index.js"), "utf8"))?.[1];
    const file = o.configFiles?.gateway ?? (bundled === undefined ? undefined : join(o.bundleDir, bundled));
    if (file === undefined) return ["public"];
    const parsed = gatewayConfigSchema.safeParse(parse(readFileSync(file, "utf8")));
    return parsed.success ? networkAllowFor(parsed.data.security.egress) : ["public"];
  } catch {
    return ["public"];
  }
}

/**
 * Whether the bundle reads the validated config artifact of this CLI's format: a bundle of another
 * revision may not, and then validates the YAML bindings itself.
 */
export function bundleReadsValidatedConfig(bundleDir: string): boolean {
  try {
    return readFileSync(join(bundleDir, "index.js"), "utf8").includes(VALIDATED_CONFIG_FORMAT);
  } catch {
    return false;
  }
}

/** Reads the compatibility settings from wrangler.toml (of `root`, this checkout by default), so workerd runs what wrangler deploys. */
export function compatibilitySettings(root: string = ROOT): { date: string; flags: string[] } {
  const toml = readFileSync(join(root, "wrangler.toml"), "utf8");
  const date = /^compatibility_date\s*=\s*"([^"]+)"/m.exec(toml)?.[1];
  const flags = /^compatibility_flags\s*=\s*\[([^\]]*)\]/m.exec(toml)?.[1];
  if (!date) throw new Error("wrangler.toml has no compatibility_date");
  return { date, flags: [...(flags ?? "").matchAll(/"([^"]+)"/g)].map((m) => m[1]!) };
}

