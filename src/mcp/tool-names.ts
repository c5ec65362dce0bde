/**
 * How the virtual server (`POST /mcp`) names what many upstream servers offer, so that two
 * servers' tools can never collide and a name can never reach the wrong server.
 *
 * The rule: `<server>.<name>`. A server name is lower-case letters, digits and `-` — never a dot —
 * so the first dot of a namespaced name is always the separator, whatever the upstream name holds
 * (tool names may contain dots). Splitting at the first dot gives back exactly the server and the
 * upstream name, and different (server, name) pairs give different namespaced names. Unlike a
 * `server_tool` prefix (LiteLLM's), no real name can be mistaken for a prefixed one: on the
 * virtual server every name is namespaced, and a name whose server part is not a configured
 * server is refused rather than guessed.
 */

/** A configured MCP server's name: what comes before the first dot. */
export const SERVER_NAME = /^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$/;

/**
 * Tool names as the MCP specification (2025-11-25) asks servers to write them: 1–128 characters
 * from `A–Z a–z 0–9 _ - .`. A namespaced name must fit the same rule, so clients that check it
 * accept what the gateway lists.
 */
export const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/** The virtual server's name for `name` of `server`; undefined when it would not be a valid tool name. */
export function namespacedName(server: string, name: string): string | undefined {
  if (!SERVER_NAME.test(server)) return undefined;
  const full = `${server}.${name}`;
  return TOOL_NAME.test(full) ? full : undefined;
}

/** The server and upstream name a namespaced name stands for; undefined when it is not one. */
export function splitNamespaced(full: string): { readonly server: string; readonly name: string } | undefined {
  const dot = full.indexOf(".");
  if (dot <= 0 || dot === full.length - 1) return undefined;
  const server = full.slice(0, dot);
  return SERVER_NAME.test(server) ? { server, name: full.slice(dot + 1) } : undefined;
}
