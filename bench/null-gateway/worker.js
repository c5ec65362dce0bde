// The null gateway: the least a Worker on this runtime can do to proxy a chat completion.
// It parses the JSON body, swaps the public model name for the backend's, calls the provider and
// hands the provider's body back untouched (streamed when the provider streams). No auth, no
// routing, no validation, no re-encoding: the benchmark's floor for "a Worker in the path".
// An MCP request (`/mcp/…`) is the same floor for a tool call: nothing in it needs changing, so
// its body and the headers of its protocol revision are passed to the MCP server as they came.
//
// An embeddings request (`/v1/embeddings`) is the chat path's floor for its operation: the model
// swapped for the embedding backend's, the provider's body handed back.
//
// Bindings: UPSTREAM_URL (provider base URL incl. /v1), UPSTREAM_KEY, UPSTREAM_MODEL,
// UPSTREAM_EMBED_MODEL (optional; the embeddings model), UPSTREAM_MCP_URL (the MCP server's endpoint).

const MCP_HEADERS = ["accept", "mcp-protocol-version", "mcp-method", "mcp-name"];

export default {
  async fetch(request, env) {
    if (request.method !== "POST") return new Response("ok\n"); // readiness probe
    const path = new URL(request.url).pathname;
    if (path.startsWith("/mcp")) return await proxyMcp(request, env);
    const embeddings = path === "/v1/embeddings";
    const body = await request.json();
    body.model = embeddings ? (env.UPSTREAM_EMBED_MODEL ?? env.UPSTREAM_MODEL) : env.UPSTREAM_MODEL;
    const upstream = await fetch(`${env.UPSTREAM_URL}${embeddings ? "/embeddings" : "/chat/completions"}`, {
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
