/**
 * The answer to each MCP method the gateway serves, in the 2026-07-28 shape (the stateful era's
 * path strips what its revision has not): the gateway's own (`server/discover`, `ping`), the
 * catalog — tool, prompt and resource lists (one server's, or every server's merged under the
 * virtual server's names, filtered by the tool policy) and the reads of one item —, `completion/complete`
 * and `logging/setLevel`. Each runs its own phases (authorize, decide, admit, invoke) on the
 * request's context; tool calls and tasks (mcp-tools.ts) and subscriptions (mcp-streams.ts) are
 * answered by their own modules. An unknown method is refused here.
 */

import { GatewayError, toGatewayError } from "../errors/gateway-error.ts";
import { STATELESS_VERSION, type StatelessRequest } from "../mcp/stateless-request.ts";
import { withTaskSupport } from "../mcp/task-support.ts";
import { authorizeCall } from "../mcp/tool-policy.ts";
import { upstreamRefusal } from "../mcp/upstream-errors.ts";
import { CATALOG_LISTS, mergeCatalog, renameContents, routeCatalogRead, type CatalogList } from "../mcp/virtual-catalog.ts";
import { mergeToolLists } from "../mcp/virtual-server.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import { admitToInvoke, endpointServers, mayReach, noteDecision, policySubject, type McpCall } from "./mcp-call.ts";
import { listen, subscribe } from "./mcp-streams.ts";
import { answerTask, answerToolCall, tasksServed } from "./mcp-tools.ts";
import { forwardedParams, invokeUpstream, listAll, listTools } from "./mcp-upstream.ts";

/** Results proxied through a per-caller policy must not be shared by caches (2026-07-28 caching). */
const UNCACHEABLE = { ttlMs: 0, cacheScope: "private" } as const;

/** The result of one MCP request (a method the gateway serves), or the refusal it throws. */
export async function answerMethod(call: McpCall, req: StatelessRequest): Promise<Record<string, unknown>> {
  const { ctx, mcp, client } = call;
  const server = call.ingress.server;
  const caller = policySubject(call);
  switch (req.method) {
    case "server/discover":
      return {
        resultType: "complete",
        supportedVersions: [STATELESS_VERSION],
        capabilities: { tools: {}, prompts: {}, resources: {}, completions: {} },
        _meta: { "io.modelcontextprotocol/serverInfo": mcp.serverInfo },
        ...UNCACHEABLE,
      };
    case "ping":
      return { resultType: "complete" };
    case "subscriptions/listen":
      return await listen(call, req);
    case "resources/subscribe":
    case "resources/unsubscribe":
      return await subscribe(call, req);
    case "logging/setLevel": {
      // The client's own upstream sessions take its level: each stateful server it may reach here
      // (a 2026-07-28 server has no session to keep one in, and a REST tool logs nothing).
      // No item to authorize (any caller may set its own sessions' level), but the phase is entered
      // like every method's, so a trace reads the same phases whatever the method.
      ctx.enter("authorize");
      const level = req.params.level;
      if (typeof level !== "string") throw new GatewayError("invalid_request", "logging/setLevel needs a level.", { param: "params.level" });
      await admitToInvoke(call, server ?? "*");
      const stateful = endpointServers(call).filter((n) => mcp.servers.get(n)?.era === "stateful");
      const answers = await Promise.all(stateful.map(async (n) => ({ n, answer: await invokeUpstream(call, n, "logging/setLevel", { level }).catch((err: unknown) => ({ ok: false as const, error: { code: -32603, message: toGatewayError(err).message } })) })));
      const refused = answers.find((a) => !a.answer.ok);
      // One server: its answer is the answer. Many: a server that refused is named, the rest keep the level.
      if (refused && !refused.answer.ok && (server !== undefined || refused.answer.error.code === -32602)) throw upstreamRefusal(refused.n, refused.answer.error);
      return { resultType: "complete" };
    }
    case "completion/complete": {
      ctx.enter("authorize");
      const ref = isRecord(req.params.ref) ? req.params.ref : {};
      const kind = ref.type === "ref/prompt" ? "prompt" : ref.type === "ref/resource" ? "resource" : undefined;
      const named = kind === "prompt" ? ref.name : ref.uri;
      if (kind === undefined || typeof named !== "string") throw new GatewayError("invalid_request", "completion/complete needs a ref: ref/prompt with a name, or ref/resource with a uri.", { param: "params.ref" });
      // Completing an argument reveals what a list would: the item must be one the caller may see.
      const target = mayReach(call, kind, named);
      await admitToInvoke(call, target.server);
      const forwarded = { ...req.params, ref: kind === "prompt" ? { ...ref, name: target.name } : { ...ref, uri: target.name } };
      delete (forwarded as Record<string, unknown>)._meta;
      const answer = await invokeUpstream(call, target.server, "completion/complete", forwarded);
      if (!answer.ok) throw upstreamRefusal(target.server, answer.error);
      return { resultType: "complete", ...(isRecord(answer.result) ? answer.result : {}) };
    }
    case "tools/list": {
      ctx.enter("authorize");
      const names = endpointServers(call);
      await admitToInvoke(call, server ?? "*");
      const tasks = tasksServed(mcp, client.era, req.protocolVersion);
      // The gateway's own task support replaces the servers' (it does not relay their tasks).
      const listings = (await Promise.all(names.map((n) => listTools(call, n, server === undefined)))).map((l) =>
        l.ok ? { ...l, tools: l.tools.map((t) => withTaskSupport(t, tasks && mcp.policy.mayNeedApproval({ ...caller, server: l.server, kind: "tool", name: t.name }))) } : l,
      );
      if (server === undefined) {
        const merged = mergeToolLists(listings, (n) => mcp.servers.get(n)?.listFailure ?? "open", caller, mcp.policy);
        return { resultType: "complete", tools: merged.tools, ...UNCACHEABLE, ...(merged.partial.length > 0 || merged.unnamed.length > 0 ? { _meta: { "sluice/partial": merged.partial, "sluice/unlisted": merged.unnamed } } : {}) };
      }
      const only = listings[0]!;
      if (!only.ok) throw new GatewayError("upstream_error", `The tool list of MCP server ${server} could not be read.`, { cause: only.reason });
      const tools = only.tools.filter((t) => mcp.policy.visible({ ...caller, server, kind: "tool", name: t.name }).allowed);
      return { resultType: "complete", tools, ...UNCACHEABLE };
    }
    case "tools/call":
      return await answerToolCall(call, req);
    case "tasks/get":
    case "tasks/result":
    case "tasks/cancel":
    case "tasks/list":
      return await answerTask(call, req);
    case "prompts/list":
    case "resources/list":
    case "resources/templates/list": {
      ctx.enter("authorize");
      const names = endpointServers(call);
      await admitToInvoke(call, server ?? "*");
      const { field } = CATALOG_LISTS[req.method];
      if (server !== undefined) {
        // One server's page, under its own names and cursor.
        const answer = await invokeUpstream(call, server, req.method, typeof req.params.cursor === "string" ? { cursor: req.params.cursor } : {});
        if (!answer.ok) throw upstreamRefusal(server, answer.error);
        const result = isRecord(answer.result) ? answer.result : {};
        const items = Array.isArray(result[field]) ? (result[field] as unknown[]).filter(isRecord) : [];
        const merged = mergeCatalog(req.method, [{ server, ok: true, items }], () => "closed", caller, mcp.policy, false);
        return { resultType: "complete", [field]: merged.items, ...(typeof result.nextCursor === "string" ? { nextCursor: result.nextCursor } : {}), ...UNCACHEABLE };
      }
      const listings = await Promise.all(names.map((n) => listAll(call, n, req.method as CatalogList, field, true)));
      const merged = mergeCatalog(req.method, listings, (n) => mcp.servers.get(n)?.listFailure ?? "open", caller, mcp.policy, true);
      return { resultType: "complete", [field]: merged.items, ...UNCACHEABLE, ...(merged.partial.length > 0 ? { _meta: { "sluice/partial": merged.partial } } : {}) };
    }
    case "prompts/get":
    case "resources/read": {
      ctx.enter("authorize");
      const kind = req.method === "prompts/get" ? "prompt" : "resource";
      const named = (req.method === "prompts/get" ? req.params.name : req.params.uri) as string;
      const target = server === undefined ? routeCatalogRead(req.method, named, mcp.servers) : { server, name: named };
      authorizeCall(mcp.policy, { ...caller, server: target.server, kind, name: target.name }, req.params.arguments, (decision) => noteDecision(call, decision, target.server, target.name));
      await admitToInvoke(call, target.server);
      const forwarded = req.method === "prompts/get" ? { name: target.name, ...(req.params.arguments !== undefined ? { arguments: req.params.arguments } : {}) } : { uri: target.name };
      const answer = await invokeUpstream(call, target.server, req.method, { ...forwarded, ...forwardedParams(req.params) });
      if (!answer.ok) throw upstreamRefusal(target.server, answer.error);
      const result = isRecord(answer.result) ? answer.result : {};
      if (req.method === "prompts/get") return { resultType: "complete", ...result };
      return { resultType: "complete", ...(server === undefined ? renameContents(target.server, result) : result), ...UNCACHEABLE };
    }
    default:
      throw new GatewayError("mcp_method_not_found", `Method ${JSON.stringify(req.method)} is not served by this gateway's MCP endpoint.`);
  }
}
