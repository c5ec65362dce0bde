// The null gateway: the least a Worker on this runtime can do to proxy a chat completion.
// It parses the JSON body, swaps the public model name for the backend's, calls the provider and
// hands the provider's body back untouched (streamed when the provider streams). No auth, no
// routing, no validation, no re-encoding: the benchmark's floor for "a Worker in the path".
// An MCP request (`/mcp/…`) is the same floor for a tool call: nothing in it needs changing, so
// its body and the headers of its protocol revision are passed to the MCP server as they came.
//
// Bindings: UPSTREAM_URL (provider base URL incl. /v1), UPSTREAM_KEY, UPSTREAM_MODEL,
// UPSTREAM_MCP_URL (the MCP server's endpoint).

const MCP_HEADERS = ["accept", "mcp-protocol-version", "mcp-method", "mcp-name"];

export default {
  async fetch(request, env) {
    if (request.method !== "POST") return new Response("ok\n"); // readiness probe
    if (new URL(request.url).pathname.startsWith("/mcp")) return await proxyMcp(request, env);
    const body = await request.json();
    body.model = env.UPSTREAM_MODEL;
    const upstream = await fetch(`${env.UPSTREAM_URL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${env.UPSTREAM_KEY}` },
      body: JSON.stringify(body),
    });
    const headers = { "content-type": upstream.headers.get("content-type") ?? "application/json" };
    const cacheControl = upstream.headers.get("cache-control");
    if (cacheControl !== null) headers["cache-control"] = cacheControl;
    return new Response(upstream.body, { status: upstream.status, headers });
  },
};

async function proxyMcp(request, env) {
  const headers = { "content-type": "application/json", authorization: `Bearer ${env.UPSTREAM_KEY}` };
  for (const name of MCP_HEADERS) {
    const value = request.headers.get(name);
    if (value !== null) headers[name] = value;
  }
  const upstream = await fetch(env.UPSTREAM_MCP_URL, { method: "POST", headers, body: request.body });
  return new Response(upstream.body, { status: upstream.status, headers: { "content-type": upstream.headers.get("content-type") ?? "application/json" } });
}
