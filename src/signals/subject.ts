import type { NeutralRequest } from "../protocol/neutral.ts";

/**
 * What signals and `request_safe` plugins look at, for every kind of traffic alike: a model
 * request in its neutral form, or a tool call's server, name and arguments (a PII rule applies to
 * a tool's arguments as much as to a prompt). A `request_safe` plugin may hand back a changed
 * subject of the same kind; the kind then sends that instead.
 */
export type Subject =
  | {
      readonly kind: "model";
      readonly request: NeutralRequest;
      /** Headers a `headers` plugin set for the backend (allowlisted names only). */
      readonly headers?: Readonly<Record<string, string>> | undefined;
    }
  | { readonly kind: "tool_call"; readonly server: string; readonly tool: string; readonly arguments: Readonly<Record<string, unknown>> };
