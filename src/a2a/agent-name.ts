import { SERVER_NAME } from "../mcp/tool-names.ts";

/**
 * A configured A2A agent's name (gateway.yaml `a2a.agents[].name`, the `<agent>` of
 * `/a2a/<agent>`): the grammar of an MCP server's name, so policy and price rules name both alike.
 */
export const AGENT_NAME = SERVER_NAME;
