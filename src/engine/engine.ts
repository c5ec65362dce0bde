import { authenticate } from "../auth/authenticate.ts";
import { grantedEntrypoints } from "../auth/authorize.ts";
import type { EngineDeps } from "./engine-deps.ts";
import { McpSession, type McpIngress } from "./mcp-session.ts";
import { RequestSession } from "./session.ts";
import type { Ingress, ListedModel, Session } from "./session-api.ts";

/** The transport-neutral gateway engine: one per isolate and publication. */
export interface Engine {
  readonly publicationRevision: string;
  begin(ingress: Ingress): Session;
  /** An MCP request on the same runtime; undefined when no MCP server is configured. */
  beginMcp(ingress: McpIngress): McpSession | undefined;
  /** Authenticates a key and lists what it may call. @throws GatewayError on a bad key. */
  listModels(apiKey: string | undefined): Promise<ListedModel[]>;
}

/** Builds the engine over the isolate's runtime: every request it begins runs the same phases. */
export function createEngine(deps: EngineDeps): Engine {
  return {
    publicationRevision: deps.publication.revision,
    begin: (ingress) => new RequestSession(deps, ingress, undefined),
    beginMcp: (ingress) => (deps.mcp && deps.mcp.servers.size > 0 ? new McpSession(deps, deps.mcp, ingress) : undefined),
    async listModels(apiKey) {
      const principal = await authenticate(deps.publication, apiKey);
      return grantedEntrypoints(deps.publication, principal).map((ep) => ({ id: ep.name, description: ep.description }));
    },
  };
}
