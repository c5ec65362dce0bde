/**
 * The `sluice` command: serve the gateway, validate its config, and operate a running one through
 * its admin API. Exit codes: 0 ok, 1 failure, 2 usage error.
 */
import { CliError } from "./cli-error.ts";
import { adminCommand, ADMIN_HELP } from "./commands/admin.ts";

const HELP = `Usage: sluice <command> [options]

Commands:
  serve --config DIR            run the gateway on workerd with your config; state persists
  config validate --config DIR [--no-secrets]
                                check the three config files and that the secrets they name are
                                set; every issue as "file: path: reason"
  config print-effective --config DIR
                                the effective config, always redacted
  status                        the running gateway's state
  backends list                 the active snapshot's backends
  routes list                   entrypoints, routes, models, pools and backends
  drain [--timeout 2m]          stop admitting, let requests in flight finish
  resume                        admit again after a drain
  budgets balance TENANT        where a tenant's budgets stand
  publish --config DIR          publish publication.yaml to the running gateway (checked, atomic;
                                --canary P serves it to P% of callers first)
  publication history|rollback  the publication's revisions; back to the last-known-good
  publication canary promote|abort|status
                                the running canary: make it active, end it, show it
  keys list|create|revoke|disable|enable|rotate
                                API keys as a lifecycle; a new key is printed once
  explain (--key K | --tenant T) FILE
                                how a request would be decided (offline, or --gateway URL)
  eval --dataset FILE.jsonl (--key K | --tenant T)
                                routing accuracy, confusion matrix and cost of a labelled set
  version                       package, workerd and compatibility date

Run 'sluice <command> --help' for a command's options. Admin commands read the token from
$SLUICE_ADMIN_TOKEN. Exit codes: 0 ok, 1 failure, 2 usage error.
`;

/** Runs one command line; resolves with the exit code. */
export async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case undefined:
        process.stderr.write(HELP);
        return 2;
      case "help":
      case "--help":
      case "-h":
        process.stdout.write(HELP);
        return 0;
      case "serve":
        // Each command loads what it needs when asked for: the config loader and its signal
        // compilers (a language model among them) cost a short command most of its start-up.
        return await (await import("./commands/serve.ts")).serveCommand(rest);
      case "config":
        return await (await import("./commands/config.ts")).configCommand(rest);
      // Loaded on demand: they bring the gateway's whole engine, which no other command needs.
      case "explain":
        return await (await import("./commands/explain.ts")).explainCommand(rest);
      case "eval":
        return await (await import("./commands/eval.ts")).evalCommand(rest);
      case "publish":
        return await (await import("./commands/publication.ts")).publishCommand(rest);
      case "publication":
        return await (await import("./commands/publication.ts")).publicationCommand(rest);
      case "keys":
        return await (await import("./commands/keys.ts")).keysCommand(rest);
      case "version":
      case "--version":
        return (await import("./commands/version.ts")).versionCommand(rest);
      default:
        if (command in ADMIN_HELP) return await adminCommand(command, rest);
        process.stderr.write(`sluice: unknown command '${command}'\n\n${HELP}`);
        return 2;
    }
  } catch (err) {
    if (err instanceof CliError) {
      process.stderr.write(`sluice ${command}: ${err.message}\n`);
      if (err.kind === "usage") process.stderr.write(`Run 'sluice ${command} --help' for usage.\n`);
      return err.exitCode;
    }
    process.stderr.write(`sluice ${command}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return 1;
  }
}

const code = await main(process.argv.slice(2));
process.exitCode = code;
// `serve` has stopped workerd: whatever connection or timer a library still holds must not keep a
// stopped gateway's process alive (an orchestrator would wait for it, then kill it). The timer is
// unref'd, so it fires only if something else keeps the process running.
if (process.argv[2] === "serve") setTimeout(() => process.exit(code), 2_000).unref();
