import type { McpEra } from "./bridging.ts";

/** The MCP client a request came from, as the bridging between the eras needs it. */
export interface ClientView {
  readonly era: McpEra;
  readonly capabilities: Readonly<Record<string, unknown>>;
  /** The client's own upstream sessions are keyed by this (its gateway session, or its key). */
  readonly sessionKey: string;
  /** A stateful-era client's gateway session id: where relayed requests' answers arrive. */
  readonly relaySession: string | undefined;
}
