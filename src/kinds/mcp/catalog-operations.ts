/**
 * The MCP kind's operations over what servers offer: the lists (tools, prompts, resources and
 * templates — one server's, or every server's merged on the virtual server), the reads of one
 * item, `completion/complete`, and `logging/setLevel`.
 */

import { authorizeRead, authorizeReach } from "../../auth/mcp-authorize.ts";
import { GatewayError, toGatewayError } from "../../errors/gateway-error.ts";
import { forwardedParams, invokeUpstream } from "../../invoker/mcp-exchange.ts";
import { listEndpointCatalog, listEndpointTools, type EndpointList, type ListScope } from "../../invoker/mcp-lists.ts";
import { tasksServed } from "../../mcp/task-support.ts";
import { upstreamRefusal } from "../../mcp/upstream-errors.ts";
import { CATALOG_LISTS, type CatalogItem, type CatalogList } from "../../mcp/virtual-catalog.ts";
import type { ListedTool } from "../../mcp/virtual-server.ts";
import { isRecord } from "../../protocol/fast-guard.ts";
import type { StatelessRequest } from "../../protocol/mcp/stateless-request.ts";
import { listResult, readResult } from "../../respond/mcp-result.ts";
import { endpointServers, type McpCall } from "./mcp-call.ts";
import type { McpOperation } from "./mcp-operation.ts";

function scopeOf(call: McpCall): ListScope {
  return { policy: call.mcp.policy, caller: call.authorization.caller, endpoint: call.ingress.server, names: endpointServers(call) };
}

/** `tools/list`: discovery is not authorization — every tool is listed only as the caller may see it, and each call is decided again. */
export function toolList(call: McpCall, req: StatelessRequest): McpOperation {
  let list: EndpointList<ListedTool> | undefined;
  return {
    authorize: () => {},
    admissionServer: () => call.ingress.server ?? "*",
    invoke: async () => {
      list = await listEndpointTools(call.exchange, scopeOf(call), tasksServed(call.mcp.approvals !== undefined, call.client.era, req.protocolVersion));
    },
    result: () => listResult("tools", list!, true),
  };
}

/** `prompts/list`, `resources/list`, `resources/templates/list`. */
export function catalogList(call: McpCall, req: StatelessRequest, method: CatalogList): McpOperation {
  let list: EndpointList<CatalogItem> | undefined;
  return {
    authorize: () => {},
    admissionServer: () => call.ingress.server ?? "*",
    invoke: async () => {
      list = await listEndpointCatalog(call.exchange, scopeOf(call), method, req.params.cursor);
    },
    result: () => listResult(CATALOG_LISTS[method].field, list!, false),
  };
}

/** `prompts/get` and `resources/read`: one item, decided with its arguments, from the server its name reaches. */
export function catalogRead(call: McpCall, req: StatelessRequest, method: "prompts/get" | "resources/read"): McpOperation {
  let target: { readonly server: string; readonly name: string } | undefined;
  let answer: Record<string, unknown> = {};
  return {
    authorize: () => {
      // Validated at decode: the name (or URI) the method needs is a string.
      target = authorizeRead(call.authorization, method, (method === "prompts/get" ? req.params.name : req.params.uri) as string, req.params.arguments);
    },
    admissionServer: () => target!.server,
    invoke: async () => {
      const forwarded = method === "prompts/get" ? { name: target!.name, ...(req.params.arguments !== undefined ? { arguments: req.params.arguments } : {}) } : { uri: target!.name };
      const out = await invokeUpstream(call.exchange, target!.server, method, { ...forwarded, ...forwardedParams(req.params) });
      if (!out.ok) throw upstreamRefusal(target!.server, out.error);
      answer = isRecord(out.result) ? out.result : {};
    },
    result: () => readResult(method, answer, call.ingress.server === undefined ? target!.server : undefined),
  };
}

/** `completion/complete`: completing an argument reveals what a list would, so the item must be one the caller may see. */
export function complete(call: McpCall, req: StatelessRequest): McpOperation {
  let target: { readonly server: string; readonly name: string } | undefined;
  let forwarded: Record<string, unknown> = {};
  let answer: Record<string, unknown> = {};
  return {
    authorize: () => {
      const ref = isRecord(req.params.ref) ? req.params.ref : {};
      const kind = ref.type === "ref/prompt" ? "prompt" : ref.type === "ref/resource" ? "resource" : undefined;
      const named = kind === "prompt" ? ref.name : ref.uri;
      if (kind === undefined || typeof named !== "string") throw new GatewayError("invalid_request", "completion/complete needs a ref: ref/prompt with a name, or ref/resource with a uri.", { param: "params.ref" });
      target = authorizeReach(call.authorization, kind, named);
      forwarded = { ...req.params, ref: kind === "prompt" ? { ...ref, name: target.name } : { ...ref, uri: target.name } };
      delete forwarded._meta;
    },
    admissionServer: () => target!.server,
    invoke: async () => {
      const out = await invokeUpstream(call.exchange, target!.server, "completion/complete", forwarded);
      if (!out.ok) throw upstreamRefusal(target!.server, out.error);
      answer = isRecord(out.result) ? out.result : {};
    },
    result: () => ({ resultType: "complete", ...answer }),
  };
}

/**
 * `logging/setLevel`: the client's own upstream sessions take its level — each stateful server it
 * may reach here (a 2026-07-28 server has no session to keep one in, and a REST tool logs
 * nothing). No item to authorize: any caller may set its own sessions' level.
 */
export function setLevel(call: McpCall, req: StatelessRequest): McpOperation {
  let level = "";
  return {
    authorize: () => {
      const asked = req.params.level;
      if (typeof asked !== "string") throw new GatewayError("invalid_request", "logging/setLevel needs a level.", { param: "params.level" });
      level = asked;
    },
    admissionServer: () => call.ingress.server ?? "*",
    invoke: async () => {
      const stateful = endpointServers(call).filter((n) => call.mcp.servers.get(n)?.era === "stateful");
      const answers = await Promise.all(
        stateful.map(async (n) => ({ n, answer: await invokeUpstream(call.exchange, n, "logging/setLevel", { level }).catch((err: unknown) => ({ ok: false as const, error: { code: -32603, message: toGatewayError(err).message } })) })),
      );
      const refused = answers.find((a) => !a.answer.ok);
      // One server: its answer is the answer. Many: a server that refused is named, the rest keep the level.
      if (refused && !refused.answer.ok && (call.ingress.server !== undefined || refused.answer.error.code === -32602)) throw upstreamRefusal(refused.n, refused.answer.error);
    },
    result: () => ({ resultType: "complete" }),
  };
}
