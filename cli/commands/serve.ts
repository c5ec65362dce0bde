import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { constants as osConstants } from "node:os";
import { join, resolve } from "node:path";
import { buildBundle, ROOT } from "../../local-stack/build.ts";
import { spawnOwned } from "../../local-stack/owned-child.ts";
import { watchParent } from "../../local-stack/parent-watch.ts";
import { bindProblems, waitForHttp } from "../../local-stack/ports.ts";
import { localUrl, parseAddress } from "../address.ts";
import { parseDuration, parseFlags, stringFlag } from "../args.ts";
import { failure, usageError } from "../cli-error.ts";
import { checkCredentials, checkLine } from "../credential-check.ts";
import { readConfigDir, secretsNamed, secretsRequired, type ValidConfigDir } from "../config-dir.ts";
import { pinnedRequest } from "../pinned-https.ts";
import { checkPemFile, tlsBackendServices, type TlsKeypairFiles } from "../tls-material.ts";
import { bundleReadsValidatedConfig, compatibilitySettings, renderWorkerdConfig } from "../workerd-config.ts";
import { renderValidatedConfig } from "../../src/config/validated-config.ts";
import { watchPublication } from "../publication-watch.ts";

/** Where `serve` keeps Durable Object state when `--state` is not given (relative to the working directory). */
export const DEFAULT_STATE_DIR = ".sluice/state";
/** How long SIGTERM lets requests in flight finish before workerd is stopped. */
export const DEFAULT_DRAIN_MS = 30_000;
/** How long a started gateway may take to answer `/ready`. */
const READY_TIMEOUT_MS = 60_000;
/** After SIGTERM, how long workerd may take to exit before it is killed. */
const EXIT_GRACE_MS = 10_000;

export const SERVE_HELP = `Usage: sluice serve --config DIR [options]

Runs the gateway on plain workerd with the three YAML files of DIR (gateway.yaml,
publication.yaml, backends.yaml). Durable Object state (budget ledgers, snapshots, breakers,
attempt budgets, health) persists in the state directory, so a restart keeps it.

Options:
  --config DIR           config directory (required)
  --state DIR            state directory (default ${DEFAULT_STATE_DIR}, under the working directory)
  --public HOST:PORT     public listener (default: listeners.public of gateway.yaml)
  --admin HOST:PORT      admin listener (default: listeners.admin of gateway.yaml)
  --secret NAME          also bind this secret from the environment (repeatable; for backends
                         that snapshots pushed later will name)
  --tls-cert FILE        serve the public listener over HTTPS (TLS 1.2 or newer) with this PEM
                         certificate chain; needs --tls-key
  --tls-key FILE         the PEM private key of --tls-cert
  --admin-tls-cert FILE  serve the admin listener over HTTPS with its own PEM certificate chain;
                         needs --admin-tls-key (without them the admin listener is plain HTTP)
  --admin-tls-key FILE   the PEM private key of --admin-tls-cert
  --drain-timeout DUR    on SIGTERM/SIGINT, how long requests in flight may finish (default 30s)
  --bundle DIR           a prebuilt bundle (index.js and its modules) instead of building one
  --workerd PATH         the workerd binary (default: $SLUICE_WORKERD, else the project's)
  --check-credentials    before starting, make one cheap authenticated call per backend (GET of
                         its health-check path, else /models) and report each key; a key the
                         provider refuses (401/403) fails the start, naming backend and secret
  --watch                when DIR/publication.yaml changes, or on SIGHUP, publish it to the
                         running gateway; an invalid file keeps the running revision and
                         prints every issue as "file: path: reason"

Every secret the config names (security.adminTokenSecret of gateway.yaml, its
governance.approverTokenSecret, governance.approvals.stateSecret and governance.verifierTokenSecret,
each backend's credential.secret and tls.clientCertificate secrets) must be set in the
environment; serve refuses to start naming what is missing.
Backends with tls are reached through workerd services rendered at start from backends.yaml: a
snapshot pushed later may name only the TLS material the gateway was started with.
SIGTERM or SIGINT drains first (new requests are refused, those in flight finish, budget slices
go back to the ledger), then stops workerd; so does the exit of the process that started serve
(a shell, npx). A second signal stops at once. workerd runs in its own process group, so a
terminal's Ctrl-C reaches serve, which drains, and it stops whenever serve ends, even by SIGKILL.
The listeners' ports are checked before anything starts; a taken one is named.
`;

/** What a gateway needs to start on workerd. */
export interface ServeOptions {
  readonly config: ValidConfigDir;
  readonly stateDir: string;
  readonly publicAddress: { readonly host: string; readonly port: number };
  readonly adminAddress: { readonly host: string; readonly port: number };
  /** Secrets to bind beyond those the config names. */
  readonly extraSecrets?: readonly string[] | undefined;
  /** The environment secrets are read from (the process's by default). */
  readonly env?: NodeJS.ProcessEnv | undefined;
  readonly bundleDir?: string | undefined;
  readonly workerdPath?: string | undefined;
  /** Progress lines (stderr by default). */
  readonly progress?: ((line: string) => void) | undefined;
  /** The public listener's certificate chain and key (HTTPS); plain HTTP without. */
  readonly publicTls?: TlsKeypairFiles | undefined;
  /** The admin listener's own certificate chain and key (HTTPS); plain HTTP without. */
  readonly adminTls?: TlsKeypairFiles | undefined;
  /** Aborting it before the gateway is ready stops workerd and fails the start. */
  readonly signal?: AbortSignal | undefined;
  /** Before starting, one cheap authenticated call per seed backend; a refused key fails the start. */
  readonly checkCredentials?: boolean | undefined;
}

/** A gateway started by {@link startServe}. */
export interface ServedGateway {
  readonly publicUrl: string;
  readonly adminUrl: string;
  /** Where Prometheus scrapes: the metrics listener's `/metrics` when one is configured, else the admin API's `/admin/metrics` (admin token). */
  readonly metricsUrl: string;
  /** Resolves with workerd's exit code once it has exited, for whatever reason. */
  readonly exited: Promise<number | null>;
  /** The tail of workerd's output, for error reports. */
  output(): string;
  /** Drains through the admin API (bounded by `drainMs`), then stops workerd. True when the drain completed. */
  stop(drainMs: number): Promise<boolean>;
  /** Stops workerd without draining. */
  kill(): Promise<void>;
}

/** workerd's address of the metrics listener (IPv6 in brackets), if one is configured. */
function metricsAddress(l: { host: string; port: number } | undefined): string | undefined {
  if (l === undefined) return undefined;
  return `${l.host.includes(":") ? `[${l.host}]` : l.host}:${l.port}`;
}

/**
 * Checks the secrets, renders the workerd config into the state directory and starts workerd,
 * resolving once the public listener answers `/ready`.
 */
export async function startServe(o: ServeOptions): Promise<ServedGateway> {
  const env = o.env ?? process.env;
  const progress = o.progress ?? ((line: string) => process.stderr.write(`${line}\n`));
  // Bound to the Worker: what the config names and --secret adds; the TLS client secrets are read here only.
  const named = secretsNamed(o.config.config);
  for (const name of o.extraSecrets ?? []) if (!named.some((s) => s.name === name)) named.push({ name, namedBy: "--secret" });
  const required = [...named, ...secretsRequired(o.config.config).filter((r) => !named.some((s) => s.name === r.name))];
  const missing = required.filter((s) => !env[s.name]);
  if (missing.length > 0) {
    throw failure(missing.map((s) => `missing secret ${s.name} (named by ${s.namedBy}): set it in the environment`).join("\n"));
  }
  if (o.publicAddress.host === o.adminAddress.host && o.publicAddress.port === o.adminAddress.port) {
    throw usageError("the public and admin listeners must not share an address");
  }
  const workerd = o.workerdPath ?? env.SLUICE_WORKERD ?? join(ROOT, "node_modules", ".bin", "workerd");
  if (!existsSync(workerd)) throw failure(`workerd not found at ${workerd} (set --workerd or SLUICE_WORKERD)`);
  if (o.checkCredentials === true) {
    const checks = await checkCredentials(o.config.seedBackends, env);
    for (const c of checks) progress(checkLine(c));
    const refused = checks.filter((c) => c.result === "refused");
    if (refused.length > 0) {
      throw failure(`cannot start: the provider refused the key of ${refused.map((c) => `backend ${c.backend}${c.secret ? ` (secret ${c.secret})` : ""}`).join(", ")}`);
    }
  }
  const metricsListener = o.config.config.gateway.observability.metrics.listener;
  const listeners = { public: o.publicAddress, admin: o.adminAddress, metrics: metricsListener };
  // Checked before anything starts: workerd reports a taken port as a native stack trace, after
  // the bundle was built.
  const taken = await bindProblems(listeners);
  if (taken.length > 0) throw failure(`cannot start: ${taken.join("; ")}`);
  let bundleDir = o.bundleDir;
  if (bundleDir === undefined) {
    progress("bundling the Worker …");
    try {
      bundleDir = buildBundle();
    } catch (err) {
      throw failure((err as Error).message);
    }
  } else if (!existsSync(join(bundleDir, "index.js"))) {
    throw failure(`no index.js in the bundle directory ${bundleDir}`);
  }
  const stateDir = resolve(o.stateDir);
  const storage = join(stateDir, "durable-objects");
  mkdirSync(storage, { recursive: true });
  const compat = compatibilitySettings();
  for (const [pair, flags] of [
    [o.publicTls, ["--tls-cert", "--tls-key"]],
    [o.adminTls, ["--admin-tls-cert", "--admin-tls-key"]],
  ] as const) {
    if (pair === undefined) continue;
    try {
      checkPemFile(pair.certFile, flags[0], "certificate");
      checkPemFile(pair.keyFile, flags[1], "key");
    } catch (err) {
      throw usageError((err as Error).message);
    }
  }
  // Client keys are written for workerd to read at start (this user only) and removed once it is ready.
  const tlsDir = join(stateDir, "tls");
  let tlsBackends;
  try {
    tlsBackends = await tlsBackendServices(o.config.config.backendsSeed.backends, env, tlsDir);
  } catch (err) {
    throw failure((err as Error).message);
  }
  // The config was validated above (readConfigDir): the Worker is handed that result, not the YAML to check again.
  let validatedConfig: string | undefined;
  if (bundleReadsValidatedConfig(bundleDir)) {
    validatedConfig = join(stateDir, "validated-config.json");
    writeFileSync(validatedConfig, renderValidatedConfig({ config: o.config.config, publicationDocument: o.config.publicationDocument }), { mode: 0o600 });
  }
  const absolute = (p: TlsKeypairFiles | undefined) => (p === undefined ? undefined : { certFile: resolve(p.certFile), keyFile: resolve(p.keyFile) });
  // The rendered config holds paths and binding names only: secret values stay in the environment.
  const capnp = renderWorkerdConfig({
    configDir: stateDir,
    bundleDir: resolve(bundleDir),
    publicAddress: `${o.publicAddress.host}:${o.publicAddress.port}`,
    adminAddress: `${o.adminAddress.host}:${o.adminAddress.port}`,
    metricsAddress: metricsAddress(metricsListener),
    stateDir: storage,
    compatibilityDate: compat.date,
    compatibilityFlags: compat.flags,
    vars: {},
    secretsFromEnv: named.map((s) => s.name),
    configFiles: o.config.files,
    validatedConfig,
    publicTls: absolute(o.publicTls),
    adminTls: absolute(o.adminTls),
    tlsBackends,
  });
  const capnpPath = join(stateDir, "sluice.capnp");
  writeFileSync(capnpPath, capnp);
  progress(`starting workerd (state in ${stateDir}) …`);
  // workerd runs in its own process group (a terminal's Ctrl-C reaches this process only, which
  // drains first) and stops when this process is gone, however it ends (see spawnOwned).
  const owned = spawnOwned(workerd, ["serve", capnpPath, "--experimental"], { env, graceSeconds: EXIT_GRACE_MS / 1000 });
  const proc = owned.process;
  progress(`workerd pid ${proc.pid}`);
  let tail = "";
  // Held until the gateway is ready: a start that fails is reported once, in plain words, instead
  // of workerd's own trace scrolling past first.
  let held: [NodeJS.WriteStream, Buffer][] | undefined = [];
  const keep = (out: NodeJS.WriteStream) => (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-16_000);
    if (held) held.push([out, chunk]);
    else out.write(chunk);
  };
  proc.stdout!.on("data", keep(process.stdout));
  proc.stderr!.on("data", keep(process.stderr));
  let exitCode: number | null | undefined;
  const exited = new Promise<number | null>((done) => {
    proc.once("exit", (code, signal) => {
      exitCode = code ?? (signal ? null : 0);
      done(exitCode);
    });
    proc.once("error", (err) => {
      tail += `\n${String(err)}`;
      exitCode = 1;
      done(1);
    });
  });
  const publicUrl = localUrl(o.publicAddress, o.publicTls ? "https" : "http");
  const adminUrl = localUrl(o.adminAddress, o.adminTls ? "https" : "http");
  const publicTls = o.publicTls;
  const adminTls = o.adminTls;
  const kill = async () => {
    if (exitCode !== undefined) return;
    owned.signal("SIGTERM");
    const timer = setTimeout(() => owned.signal("SIGKILL"), EXIT_GRACE_MS);
    await exited;
    clearTimeout(timer);
  };
  try {
    await waitForHttp(`${publicUrl}/ready`, READY_TIMEOUT_MS, () => exitCode === undefined, o.signal, publicTls && ((url, signal) => pinnedRequest(url, publicTls.certFile, { signal })));
  } catch (err) {
    rmSync(tlsDir, { recursive: true, force: true });
    await kill();
    // Another process may have bound a port after the check above: name it rather than show
    // workerd's trace.
    const takenNow = await bindProblems(listeners);
    if (takenNow.length > 0) throw failure(`cannot start: ${takenNow.join("; ")}`);
    throw failure(`the gateway did not start: ${(err as Error).message}\n${tail.trim()}`);
  }
  for (const [out, chunk] of held) out.write(chunk);
  held = undefined;
  // workerd has read its config: the key files are no longer needed on disk.
  rmSync(tlsDir, { recursive: true, force: true });
  const adminToken = env[o.config.config.gateway.security.adminTokenSecret]!;
  return {
    publicUrl,
    adminUrl,
    metricsUrl: metricsListener ? `${localUrl(metricsListener, "http")}/metrics` : `${adminUrl}/admin/metrics`,
    exited,
    output: () => tail,
    kill,
    async stop(drainMs) {
      let drained = false;
      if (exitCode === undefined) {
        progress(`draining (up to ${Math.ceil(drainMs / 1000)} s) …`);
        try {
          const init = {
            method: "POST",
            headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
            body: JSON.stringify({ budgetMs: drainMs }),
            signal: AbortSignal.timeout(drainMs + 10_000),
          };
          const res = adminTls ? await pinnedRequest(`${adminUrl}/admin/drain`, adminTls.certFile, init) : await fetch(`${adminUrl}/admin/drain`, init).then(async (r) => ({ status: r.status, text: await r.text() }));
          let report: unknown = {};
          try {
            report = JSON.parse(res.text);
          } catch {
            // An answer that is not JSON is reported by its status alone.
          }
          drained = res.status >= 200 && res.status < 300;
          progress(drained ? `drained: ${JSON.stringify(report)}` : `drain refused (${res.status}): ${JSON.stringify(report)}`);
        } catch (err) {
          progress(`drain failed: ${(err as Error).message}`);
        }
      }
      await kill();
      return drained;
    },
  };
}

/** `sluice serve`: runs until SIGTERM/SIGINT (drain, then stop) or until workerd exits on its own. */
export async function serveCommand(argv: readonly string[]): Promise<number> {
  const args = parseFlags(
    argv,
    {
      config: { type: "string" },
      state: { type: "string" },
      public: { type: "string" },
      admin: { type: "string" },
      secret: { type: "string", multiple: true },
      "drain-timeout": { type: "string" },
      bundle: { type: "string" },
      workerd: { type: "string" },
      "check-credentials": { type: "boolean" },
      watch: { type: "boolean" },
      "tls-cert": { type: "string" },
      "tls-key": { type: "string" },
      "admin-tls-cert": { type: "string" },
      "admin-tls-key": { type: "string" },
    },
    { min: 0, max: 0, names: "" },
  );
  if (args.help) {
    process.stdout.write(SERVE_HELP);
    return 0;
  }
  const configDir = stringFlag(args, "config");
  if (configDir === undefined) throw usageError("--config DIR is required");
  const publicFlag = stringFlag(args, "public");
  const adminFlag = stringFlag(args, "admin");
  const drainFlag = stringFlag(args, "drain-timeout");
  const drainMs = drainFlag === undefined ? DEFAULT_DRAIN_MS : parseDuration(drainFlag, "--drain-timeout");
  const publicAddress = publicFlag === undefined ? undefined : parseAddress(publicFlag, "--public");
  const adminAddress = adminFlag === undefined ? undefined : parseAddress(adminFlag, "--admin");
  const keypair = (cert: string, key: string): TlsKeypairFiles | undefined => {
    const certFile = stringFlag(args, cert);
    const keyFile = stringFlag(args, key);
    if ((certFile === undefined) !== (keyFile === undefined)) throw usageError(`--${cert} and --${key} go together`);
    return certFile === undefined || keyFile === undefined ? undefined : { certFile, keyFile };
  };
  const publicTls = keypair("tls-cert", "tls-key");
  const adminTls = keypair("admin-tls-cert", "admin-tls-key");
  // A signal during the start (bundling, waiting for /ready) stops it: nothing is admitted yet,
  // so there is nothing to drain.
  const starting = new AbortController();
  // Kept: a signal that lands after workerd answered but before the start returned stops the
  // gateway once it is up.
  let startStopped: NodeJS.Signals | number | undefined;
  const stopStart = (signal: NodeJS.Signals | number) => {
    startStopped = signal;
    starting.abort();
  };
  process.once("SIGTERM", stopStart);
  process.once("SIGINT", stopStart);
  // The process that started this one gone (reparented) is one more signal to stop.
  let onParentGone = (parentPid: number) => stopStart(parentPid);
  const stopWatchingParent = watchParent((pid) => onParentGone(pid));
  const config = await readConfigDir(configDir);
  const listeners = config.config.gateway.listeners;
  const gateway = await startServe({
    signal: starting.signal,
    config,
    stateDir: stringFlag(args, "state") ?? DEFAULT_STATE_DIR,
    publicAddress: publicAddress ?? listeners.public,
    adminAddress: adminAddress ?? listeners.admin,
    extraSecrets: (args.values.secret as string[] | undefined) ?? [],
    bundleDir: stringFlag(args, "bundle"),
    workerdPath: stringFlag(args, "workerd"),
    checkCredentials: args.values["check-credentials"] === true,
    publicTls,
    adminTls,
  });
  process.off("SIGTERM", stopStart);
  process.off("SIGINT", stopStart);
  process.stderr.write(`Sluice is serving.\n  public API  ${gateway.publicUrl}/v1\n  admin API   ${gateway.adminUrl}/admin\n  console     ${gateway.adminUrl}/admin/console\n  metrics     ${gateway.metricsUrl}\n`);
  const watching =
    args.values.watch === true
      ? watchPublication({ dir: configDir, adminUrl: gateway.adminUrl, token: process.env[config.config.gateway.security.adminTokenSecret] ?? "", certFile: adminTls?.certFile, progress: (line) => process.stderr.write(`${line}\n`) })
      : undefined;
  return await new Promise<number>((done) => {
    let stopping = false;
    let forced = false;
    const onSignal = (signal: NodeJS.Signals | number) => {
      watching?.stop();
      if (stopping) {
        if (typeof signal === "number") return;
        process.stderr.write(`${signal} again: stopping now\n`);
        forced = true;
        void gateway.kill().then(() => done(128 + osConstants.signals[signal]));
        return;
      }
      stopping = true;
      stopWatchingParent();
      process.stderr.write(typeof signal === "number" ? `the process that started sluice serve (pid ${signal}) has exited: ` : `${signal}: `);
      void gateway.stop(drainMs).then((drained) => {
        if (forced) return;
        process.stderr.write(`stopped${drained ? "" : " (the drain did not complete)"}\n`);
        done(drained ? 0 : 1);
      });
    };
    onParentGone = onSignal;
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
    if (startStopped !== undefined) onSignal(startStopped);
    void gateway.exited.then((code) => {
      watching?.stop();
      if (stopping) return;
      stopWatchingParent();
      process.stderr.write(`workerd exited unexpectedly (code ${code})\n`);
      done(1);
    });
  });
}
