import { describe, expect, it } from "vitest";
import { restServerSchema } from "../../../src/mcp/rest-tool.ts";
import { RestServer } from "../../../src/mcp/rest-server.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";

const rest = restServerSchema.parse({
  tools: [
    {
      name: "get_issue",
      description: "One issue",
      inputSchema: { type: "object", properties: { repo: { type: "string" }, number: { type: "integer", minimum: 1 }, state: { type: "string" } }, required: ["repo", "number"], additionalProperties: false },
      method: "GET",
      path: "/repos/{repo}/issues/{number}",
      query: { state: "{state}" },
      response: { fields: ["title", "user.login"] },
    },
    {
      name: "create_issue",
      inputSchema: { type: "object", properties: { repo: { type: "string" }, title: { type: "string" } }, required: ["repo", "title"] },
      method: "POST",
      path: "/repos/{repo}/issues",
      body: "arguments",
      response: { maxBytes: 1024 },
    },
  ],
});

interface Sent {
  readonly url: string;
  readonly init: RequestInit;
}

/** A REST server over a fake fetch that answers `answer` and records what it was sent. */
function server(answer: (url: string) => Response | Promise<Response> = () => Response.json({ title: "t", body: "long", user: { login: "u", id: 7 } })) {
  const sent: Sent[] = [];
  const s = new RestServer({
    baseUrl: "https://api.example.com/v1",
    credential: { secret: "API_TOKEN", scheme: "bearer" },
    rest,
    secret: (n) => (n === "API_TOKEN" ? "token-value" : undefined),
    egress: { allow: [] },
    fetch: async (input, init) => {
      sent.push({ url: String(input), init: init ?? {} });
      return await answer(String(input));
    },
  });
  return { s, sent };
}

const call = (s: RestServer, name: string, args: unknown) => s.request("tools/call", { name, arguments: args });
/** The code of the GatewayError `p` rejects with. */
async function rejection(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError);
    return (err as GatewayError).code;
  }
  throw new Error("expected a refusal");
}

describe("REST server", () => {
  it("lists the configured tools with their schemas", async () => {
    const { s, sent } = server();
    const answer = await s.request("tools/list", {});
    expect(answer).toEqual({
      ok: true,
      result: { tools: [{ name: "get_issue", description: "One issue", inputSchema: rest.tools[0]!.inputSchema }, { name: "create_issue", inputSchema: rest.tools[1]!.inputSchema }] },
    });
    expect(sent).toEqual([]);
  });

  it("calls the API from the template: encoded segments, query, the credential, no redirects; the answer trimmed", async () => {
    const { s, sent } = server();
    const answer = await call(s, "get_issue", { repo: "a b", number: 42, state: "open" });
    expect(sent).toHaveLength(1);
    expect(sent[0]!.url).toBe("https://api.example.com/v1/repos/a%20b/issues/42?state=open");
    expect(sent[0]!.init).toMatchObject({ method: "GET", redirect: "manual", headers: { authorization: "Bearer token-value", accept: "application/json" } });
    expect(answer).toEqual({ ok: true, result: { content: [{ type: "text", text: '{"title":"t","user":{"login":"u"}}' }], structuredContent: { title: "t", user: { login: "u" } } } });
  });

  it("sends the other arguments as the JSON body", async () => {
    const { s, sent } = server(() => Response.json({ id: 1 }, { status: 201 }));
    expect(await call(s, "create_issue", { repo: "r", title: "Bug" })).toMatchObject({ ok: true, result: { structuredContent: { id: 1 } } });
    expect(sent[0]!.init).toMatchObject({ method: "POST", body: '{"title":"Bug"}', headers: { "content-type": "application/json" } });
  });

  it("refuses traversal and arguments that fail the schema as invalid params, before sending anything", async () => {
    const { s, sent } = server();
    for (const repo of ["..", ".", "a/b", "..\\x"]) expect(await rejection(call(s, "get_issue", { repo, number: 1 })), repo).toBe("invalid_request");
    expect(await rejection(call(s, "get_issue", { repo: "r" }))).toBe("invalid_request");
    expect(await rejection(call(s, "get_issue", { repo: "r", number: 0 }))).toBe("invalid_request");
    expect(await rejection(call(s, "get_issue", { repo: "r", number: 1, extra: 1 }))).toBe("invalid_request");
    expect(await rejection(call(s, "get_issue", "not an object"))).toBe("invalid_request");
    expect(await rejection(call(s, "nosuch", {}))).toBe("invalid_request");
    expect(sent).toEqual([]);
  });

  it("turns an API's 4xx into a tool error the model can read, and a 5xx, a redirect or no answer into upstream errors", async () => {
    const notFound = server(() => Response.json({ message: "Not Found" }, { status: 404 }));
    expect(await call(notFound.s, "get_issue", { repo: "r", number: 1 })).toEqual({ ok: true, result: { isError: true, content: [{ type: "text", text: "HTTP 404: Not Found" }] } });
    const plain = server(() => new Response("nope", { status: 422 }));
    expect(await call(plain.s, "get_issue", { repo: "r", number: 1 })).toEqual({ ok: true, result: { isError: true, content: [{ type: "text", text: "HTTP 422" }] } });
    expect(await rejection(call(server(() => new Response("boom", { status: 503 })).s, "get_issue", { repo: "r", number: 1 }))).toBe("upstream_error");
    expect(await rejection(call(server(() => new Response(null, { status: 302, headers: { location: "https://elsewhere.example/" } })).s, "get_issue", { repo: "r", number: 1 }))).toBe("upstream_error");
    expect(await rejection(call(server(() => Promise.reject(new TypeError("connection refused"))).s, "get_issue", { repo: "r", number: 1 }))).toBe("upstream_unreachable");
    // A 401 refuses the gateway's credential: no argument the model could change fixes it. A 403 may be about the arguments (a repository), so the model reads it.
    expect(await rejection(call(server(() => Response.json({ message: "Bad credentials" }, { status: 401 })).s, "get_issue", { repo: "r", number: 1 }))).toBe("upstream_auth_failed");
    expect(await call(server(() => Response.json({ message: "Resource not accessible" }, { status: 403 })).s, "get_issue", { repo: "r", number: 1 })).toEqual({ ok: true, result: { isError: true, content: [{ type: "text", text: "HTTP 403: Resource not accessible" }] } });
  });

  it("bounds the answer, and never passes on an answer it was told to trim but cannot", async () => {
    const big = server(() => Response.json({ id: "x".repeat(2000) }));
    expect(await rejection(call(big.s, "create_issue", { repo: "r", title: "t" }))).toBe("upstream_error");
    const html = server(() => new Response("<html>", { headers: { "content-type": "text/html" } }));
    expect(await rejection(call(html.s, "get_issue", { repo: "r", number: 1 }))).toBe("upstream_protocol_error");
    // An empty answer (204) is a success with nothing to trim.
    expect(await call(server(() => new Response(null, { status: 204 })).s, "get_issue", { repo: "r", number: 1 })).toEqual({ ok: true, result: { content: [{ type: "text", text: "HTTP 204, no content" }] } });
    // Without configured fields a text answer is passed on as text.
    expect(await call(html.s, "create_issue", { repo: "r", title: "t" })).toEqual({ ok: true, result: { content: [{ type: "text", text: "<html>" }] } });
  });

  it("refuses a target the egress guard refuses, and answers other methods as a server without them does", async () => {
    const s = new RestServer({ baseUrl: "http://10.0.0.1", rest, secret: () => undefined, egress: { allow: [] }, fetch: async () => Response.json({}) });
    expect(await rejection(call(s, "get_issue", { repo: "r", number: 1 }))).toBe("internal_error");
    for (const method of ["prompts/list", "resources/list", "resources/read", "prompts/get"]) expect(await s.request(method, {})).toEqual({ ok: false, error: { code: -32601, message: "Method not found" } });
  });
});

describe("what a REST tool call proves, for its charge and its approval", () => {
  /** The call's onSent / onEvidence, in the order they came, with how many API requests had left at each. */
  async function proof(answer: () => Response | Promise<Response>, args: unknown = { repo: "sluice", number: 1 }) {
    const { s, sent } = server(answer);
    const events: string[] = [];
    await s
      .request("tools/call", { name: "get_issue", arguments: args }, { onSent: () => events.push(`sent:${sent.length}`), onEvidence: (e) => events.push(`evidence:${e}`) })
      .catch(() => events.push("threw"));
    return events;
  }

  it("is sent right before the API request leaves, and answered when the API answered 2xx", async () => {
    expect(await proof(() => Response.json({ title: "t" }))).toEqual(["sent:0", "evidence:answered"]);
  });

  it("proves the tool did not run on a 4xx or a 429, and proves nothing on a 5xx or a failed connection", async () => {
    expect(await proof(() => new Response("no", { status: 404 }))).toEqual(["sent:0", "evidence:refused"]);
    expect(await proof(() => new Response("slow", { status: 429 }))).toEqual(["sent:0", "evidence:rate_limited"]);
    expect(await proof(() => new Response("oops", { status: 502 }))).toEqual(["sent:0", "evidence:unknown", "threw"]);
    expect(await proof(() => Promise.reject(new TypeError("reset")))).toEqual(["sent:0", "evidence:unknown", "threw"]);
  });

  it("is never sent when the arguments are refused before the API is called", async () => {
    expect(await proof(() => Response.json({}), { repo: "sluice" })).toEqual(["evidence:not_sent", "threw"]);
  });
});
