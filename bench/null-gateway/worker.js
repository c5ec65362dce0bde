// The null gateway: the least a Worker on this runtime can do to proxy a chat completion.
// It parses the JSON body, swaps the public model name for the backend's, calls the provider and
// hands the provider's body back untouched (streamed when the provider streams). No auth, no
// routing, no validation, no re-encoding: the benchmark's floor for "a Worker in the path".
//
// Bindings: UPSTREAM_URL (provider base URL incl. /v1), UPSTREAM_KEY, UPSTREAM_MODEL.

export default {
  async fetch(request, env) {
    if (request.method !== "POST") return new Response("ok\n"); // readiness probe
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
