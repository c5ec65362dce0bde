import { request } from "node:https";
import { Readable } from "node:stream";

/**
 * A fetch over node:https that trusts exactly the given CA: for clients (the official SDKs take a
 * `fetch`) talking to a listener whose certificate a private CA issued.
 */
export function fetchTrusting(ca: string): typeof fetch {
  return async (input, init) => {
    const req = new Request(input, init);
    const body = req.body === null ? undefined : Buffer.from(await req.arrayBuffer());
    return await new Promise<Response>((resolve, reject) => {
      const out = request(req.url, { method: req.method, headers: Object.fromEntries(req.headers), ca, signal: init?.signal ?? undefined }, (res) => {
        const headers = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(", ") : v);
        const status = res.statusCode ?? 502;
        const nullBody = status === 204 || status === 304 || req.method === "HEAD";
        resolve(new Response(nullBody ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), { status, headers }));
      });
      out.on("error", reject);
      out.end(body);
    });
  };
}
