/**
 * Why a command failed, and so its exit code: `usage` (2) for a command line that cannot be run
 * as written, `failure` (1) for everything that went wrong while running it.
 */
export class CliError extends Error {
  readonly kind: "usage" | "failure";

  constructor(kind: "usage" | "failure", message: string) {
    super(message);
    this.name = "CliError";
    this.kind = kind;
  }

  /** The process exit code of this failure. */
  get exitCode(): 1 | 2 {
    return this.kind === "usage" ? 2 : 1;
  }
}

/** A command line that cannot be run as written (exit 2). */
export const usageError = (message: string): CliError => new CliError("usage", message);

/** A command that ran and failed (exit 1). */
export const failure = (message: string): CliError => new CliError("failure", message);
