import { gatewayConfigSchema, type GatewayConfig } from "./gateway-schema.ts";
import { publicationSchema, type PublicationConfig } from "./publication-schema.ts";
import { snapshotSourceSchema, type SnapshotSource } from "./backends-schema.ts";
import { checkA2aAgentNames, checkA2aPublication } from "./check-a2a.ts";
import { checkBudgets, unknownChargeTo } from "./check-budgets.ts";
import { checkEgress } from "../egress/egress-guard.ts";
import { CONFIG_FILES, ConfigValidationError, duplicates, parseConfigDocument, parseConfigText, validateValue, type ConfigIssue } from "./parse-file.ts";
import { PER_MODEL_CALL_PLUGIN_KINDS, TOOL_CALL_PLUGIN_KINDS } from "./plugin-schema.ts";
import { compileSignal, type SignalShape } from "../signals/compile-signals.ts";
import { compileCondition } from "../signals/conditions.ts";
import { checkAlgorithm } from "./check-algorithm.ts";

/** The three config texts, as bundled or as overridden by the deployment. */
export interface ConfigTexts {
  readonly gateway: string;
  readonly publication: string;
  readonly backends: string;
}

/** Validated config: bootstrap, publication, and the seed BackendSnapshot source. */
export interface LoadedConfig {
  readonly gateway: GatewayConfig;
  readonly publication: PublicationConfig;
  readonly backendsSeed: SnapshotSource;
}

/**
 * Parses and validates all three files, collecting the issues of every file before failing, then
 * checks the references between them. Throws ConfigValidationError.
 */
export function loadConfig(texts: ConfigTexts): LoadedConfig {
  return loadConfigWithSeed(texts).config;
}

/**
 * {@link loadConfig}, also giving publication.yaml's document as written (the publication
 * controller's seed), so a caller that hands both on does not parse the YAML twice.
 */
export function loadConfigWithSeed(texts: ConfigTexts): { readonly config: LoadedConfig; readonly publicationDocument: unknown } {
  const issues: ConfigIssue[] = [];
  const attempt = <T>(fn: () => T): T | undefined => {
    try {
      return fn();
    } catch (err) {
      if (err instanceof ConfigValidationError) {
        issues.push(...err.issues);
        return undefined;
      }
      throw err;
    }
  };
  const gateway = attempt(() => parseConfigText(CONFIG_FILES.gateway, texts.gateway, gatewayConfigSchema));
  // Boxed: an empty file's document is itself empty, and the schema must still say so.
  const publicationParsed = attempt(() => ({ document: parseConfigDocument(CONFIG_FILES.publication, texts.publication) }));
  const publicationDocument = publicationParsed?.document;
  const publication = publicationParsed && attempt(() => validateValue(CONFIG_FILES.publication, publicationParsed.document, publicationSchema));
  const backendsSeed = attempt(() => parseConfigText(CONFIG_FILES.backends, texts.backends, snapshotSourceSchema));
  if (gateway && publication) issues.push(...publicationIssues(gateway, publication));
  if (gateway && backendsSeed) issues.push(...checkSeedEgress(gateway, backendsSeed));
  if (gateway) issues.push(...checkExporterEgress(gateway), ...checkMcpServers(gateway), ...checkA2aAgents(gateway));
  if (!gateway || !publication || !backendsSeed || issues.length > 0) throw new ConfigValidationError(issues);
  return { config: { gateway, publication, backendsSeed }, publicationDocument };
}

/**
 * Every check of a publication against the bootstrap it runs under: references inside it, routing,
 * budgets, MCP policy and the OAuth issuers' tenants. `config validate`, the start and a
 * publication published at runtime all run exactly these.
 */
export function publicationIssues(gateway: GatewayConfig, publication: PublicationConfig): ConfigIssue[] {
  return [...checkPublication(gateway, publication), ...checkRouting(gateway, publication), ...checkBudgets(gateway, publication), ...checkMcpPolicy(gateway, publication), ...checkOAuth(gateway, publication), ...checkA2aPublication(publication, new Set(gateway.security.trustedHeaders)), ...checkA2aAgentNames(publication, new Set(gateway.a2a.agents.map((a) => a.name)))];
}

/**
 * The seed snapshot's base URLs against the egress guard, so a seed that would send requests to
 * a forbidden address fails the start rather than its first request. A backend reached through a
 * binding has no address to check.
 */
export function checkSeedEgress(gateway: GatewayConfig, seed: SnapshotSource): ConfigIssue[] {
  return seed.backends.flatMap((b, i) => {
    if (b.baseUrl === undefined) return [];
    const verdict = checkEgress(b.baseUrl, gateway.security.egress);
    return verdict.ok ? [] : [{ file: CONFIG_FILES.backends, path: `backends[${i}].baseUrl`, message: verdict.refusal.message }];
  });
}

/** MCP servers: unique names, and each endpoint through the egress guard. */
export function checkMcpServers(gateway: GatewayConfig): ConfigIssue[] {
  const file = CONFIG_FILES.gateway;
  const servers = gateway.mcp.servers;
  const issues: ConfigIssue[] = duplicates(servers.map((s) => s.name)).map((d) => ({ file, path: "mcp.servers", message: `duplicate MCP server "${d}"` }));
  servers.forEach((s, i) => {
    const verdict = checkEgress(s.url, gateway.security.egress);
    if (!verdict.ok) issues.push({ file, path: `mcp.servers[${i}].url`, message: verdict.refusal.message });
  });
  return issues;
}

/** A2A agents: unique names, and each card URL through the egress guard (an inline card has none to fetch). */
export function checkA2aAgents(gateway: GatewayConfig): ConfigIssue[] {
  const file = CONFIG_FILES.gateway;
  const agents = gateway.a2a.agents;
  const issues: ConfigIssue[] = duplicates(agents.map((a) => a.name)).map((d) => ({ file, path: "a2a.agents", message: `duplicate agent "${d}"` }));
  agents.forEach((a, i) => {
    if (typeof a.card !== "string") return;
    const verdict = checkEgress(a.card, gateway.security.egress);
    if (!verdict.ok) issues.push({ file, path: `a2a.agents[${i}].card`, message: verdict.refusal.message });
  });
  return issues;
}

/**
 * OAuth issuers (`auth.oauth`): unique names and issuer identifiers, each JWKS URL through the
 * egress guard (the gateway fetches it), a fixed tenant that the publication configures, a fixed
 * `chargeTo` that names a team (and project) of that tenant, and scopes that grant entrypoints the
 * publication has.
 */
export function checkOAuth(gateway: GatewayConfig, pub: PublicationConfig): ConfigIssue[] {
  const oauth = gateway.auth.oauth;
  if (!oauth) return [];
  const file = CONFIG_FILES.gateway;
  const tenants = new Map(pub.tenants.map((t) => [t.id, t]));
  const entrypoints = new Set(pub.entrypoints.map((e) => e.name));
  const issues: ConfigIssue[] = [
    ...duplicates(oauth.issuers.map((i) => i.name)).map((d) => ({ file, path: "auth.oauth.issuers", message: `duplicate issuer name "${d}"` })),
    ...duplicates(oauth.issuers.map((i) => i.issuer)).map((d) => ({ file, path: "auth.oauth.issuers", message: `issuer ${d} is listed twice` })),
  ];
  oauth.issuers.forEach((i, n) => {
    const verdict = checkEgress(i.jwksUrl, gateway.security.egress);
    if (!verdict.ok) issues.push({ file, path: `auth.oauth.issuers[${n}].jwksUrl`, message: verdict.refusal.message });
    const tenant = i.tenant === undefined ? undefined : tenants.get(i.tenant);
    if (i.tenant !== undefined && !tenant) issues.push({ file, path: `auth.oauth.issuers[${n}].tenant`, message: `unknown tenant "${i.tenant}" (publication.yaml tenants)` });
    const unknown = tenant && i.chargeTo !== undefined ? unknownChargeTo(tenant, i.chargeTo) : undefined;
    if (unknown !== undefined) issues.push({ file, path: `auth.oauth.issuers[${n}].chargeTo`, message: `${unknown} (publication.yaml tenants)` });
  });
  for (const [scope, names] of Object.entries(oauth.scopeEntrypoints)) {
    names.forEach((name, n) => {
      if (name !== "*" && !entrypoints.has(name)) issues.push({ file, path: `auth.oauth.scopeEntrypoints.${scope}[${n}]`, message: `unknown entrypoint "${name}" (publication.yaml entrypoints)` });
    });
  }
  return issues;
}

/** An MCP policy rule may name only configured MCP servers (or `*`). */
export function checkMcpPolicy(gateway: GatewayConfig, pub: PublicationConfig): ConfigIssue[] {
  const known = new Set(gateway.mcp.servers.map((s) => s.name));
  return (pub.mcp?.policy.rules ?? []).flatMap((r, i) =>
    r.servers.flatMap((name, j) => (name === "*" || known.has(name) ? [] : [{ file: CONFIG_FILES.publication, path: `mcp.policy.rules[${i}].servers[${j}]`, message: `unknown MCP server "${name}" (gateway.yaml mcp.servers)` }])),
  );
}

/**
 * Signals, decisions and plugins (docs/routing.md): unique names; every signal a decision tests
 * declared, read at a key it has, with an operator its value can take; a header signal on a
 * trusted header; a model-backed signal naming an entrypoint of the operation it calls; every
 * plugin named declared, and on MCP tool calls only the kinds that apply to arguments.
 */
export function checkRouting(gateway: GatewayConfig, pub: PublicationConfig): ConfigIssue[] {
  const file = CONFIG_FILES.publication;
  const issues: ConfigIssue[] = [];
  const trusted = new Set(gateway.security.trustedHeaders);
  const entrypoints = new Map(pub.entrypoints.map((e) => [e.name, e]));
  for (const d of duplicates(pub.signals.map((x) => x.name))) issues.push({ file, path: "signals", message: `duplicate signal "${d}"` });
  for (const d of duplicates(pub.plugins.map((x) => x.name))) issues.push({ file, path: "plugins", message: `duplicate plugin "${d}"` });

  const shapes = new Map<string, SignalShape>();
  pub.signals.forEach((sig, i) => {
    const path = `signals[${i}]`;
    try {
      shapes.set(sig.name, compileSignal(sig).shape);
    } catch (err) {
      issues.push({ file, path, message: (err as Error).message });
    }
    if (sig.kind === "header" && !trusted.has(sig.header)) issues.push({ file, path: `${path}.header`, message: `header "${sig.header}" is not in gateway.yaml security.trustedHeaders` });
    if (sig.kind === "similarity" || sig.kind === "moderation") {
      const operation = sig.kind === "similarity" ? "embeddings" : "moderations";
      const ep = entrypoints.get(sig.model);
      if (!ep) issues.push({ file, path: `${path}.model`, message: `unknown entrypoint "${sig.model}"` });
      else if (ep.operation !== operation) issues.push({ file, path: `${path}.model`, message: `entrypoint "${sig.model}" serves ${ep.operation}; a ${sig.kind} signal needs one with operation: ${operation}` });
    }
    if (sig.kind === "similarity") {
      for (const d of duplicates(sig.categories.map((c) => c.name))) issues.push({ file, path: `${path}.categories`, message: `duplicate category "${d}"` });
      const utterances = sig.categories.reduce((n, c) => n + c.utterances.length, 0);
      if (utterances > 1024) issues.push({ file, path: `${path}.categories`, message: `${utterances} utterances: at most 1024 per signal (each is embedded once per isolate)` });
    }
  });

  pub.plugins.forEach((p, i) => {
    if (p.kind !== "cache") return;
    if (p.model !== undefined) {
      const ep = entrypoints.get(p.model);
      if (!ep) issues.push({ file, path: `plugins[${i}].model`, message: `unknown entrypoint "${p.model}"` });
      else if (ep.operation !== "embeddings") issues.push({ file, path: `plugins[${i}].model`, message: `entrypoint "${p.model}" serves ${ep.operation}; a semantic cache needs one with operation: embeddings` });
    }
    if (p.knowledgeVersionHeader !== undefined && !trusted.has(p.knowledgeVersionHeader)) issues.push({ file, path: `plugins[${i}].knowledgeVersionHeader`, message: `header "${p.knowledgeVersionHeader}" is not in gateway.yaml security.trustedHeaders` });
  });

  const plugins = new Map(pub.plugins.map((p) => [p.name, p]));
  const checkPlugins = (names: readonly string[], path: string, only?: { readonly kinds: readonly string[]; readonly where: string }) =>
    names.forEach((name, i) => {
      const p = plugins.get(name);
      if (!p) issues.push({ file, path: `${path}[${i}]`, message: `unknown plugin "${name}" (publication.yaml plugins)` });
      else if (only && !only.kinds.includes(p.kind)) issues.push({ file, path: `${path}[${i}]`, message: `plugin "${name}" is a ${p.kind} plugin; ${only.where} take only ${only.kinds.join(", ")}` });
    });

  pub.entrypoints.forEach((ep, ei) => {
    const at = `entrypoints[${ei}]`;
    checkPlugins(ep.plugins, `${at}.plugins`);
    if (ep.operation !== "chat") {
      if (ep.decisions.length > 0) issues.push({ file, path: `${at}.decisions`, message: `an ${ep.operation} entrypoint has no decisions: it serves its default tiers` });
      if (ep.plugins.length > 0) issues.push({ file, path: `${at}.plugins`, message: `an ${ep.operation} entrypoint runs no plugins` });
    }
    if (ep.routes.length > 0 && ep.decisions.length > 0) issues.push({ file, path: `${at}.routes`, message: "routes and decisions together: write every route as a decision (entrypoints[].decisions) and remove routes" });
    for (const d of duplicates(ep.decisions.map((d) => d.name))) issues.push({ file, path: `${at}.decisions`, message: `duplicate decision "${d}"` });
    ep.decisions.forEach((d, di) => {
      const path = `${at}.decisions[${di}]`;
      if (d.name === "default") issues.push({ file, path: `${path}.name`, message: `"default" names the entrypoint's default tiers; choose another name` });
      issues.push(...compileCondition(d.when, shapes, `${path}.when`).problems.map((p) => ({ file, ...p })));
      checkPlugins(d.plugins, `${path}.plugins`);
      if (d.algorithm) checkPlugins(d.algorithm.perModelCall, `${path}.algorithm.perModelCall`, { kinds: PER_MODEL_CALL_PLUGIN_KINDS, where: "an algorithm's sub-calls" });
    });
  });
  checkPlugins(pub.mcp?.plugins ?? [], "mcp.plugins", { kinds: TOOL_CALL_PLUGIN_KINDS, where: "a tool call's arguments" });
  return issues;
}

/** The OTLP collector is one more outbound target: the same guard, at config load. */
export function checkExporterEgress(gateway: GatewayConfig): ConfigIssue[] {
  const endpoint = gateway.observability.otlp?.endpoint;
  if (endpoint === undefined) return [];
  const verdict = checkEgress(endpoint, gateway.security.egress);
  return verdict.ok ? [] : [{ file: CONFIG_FILES.gateway, path: "observability.otlp.endpoint", message: verdict.refusal.message }];
}

/** Cross-reference checks inside the publication, and against the bootstrap's trusted headers. */
export function checkPublication(gateway: GatewayConfig, pub: PublicationConfig): ConfigIssue[] {
  const file = CONFIG_FILES.publication;
  const issues: ConfigIssue[] = [];
  const models = new Map(pub.models.map((m) => [m.id, m]));
  const entrypointNames = new Set(pub.entrypoints.map((e) => e.name));
  const trusted = new Set(gateway.security.trustedHeaders);
  // The workload is trusted metadata: only a header a trusted hop sets may carry it.
  for (const [field, header] of Object.entries(gateway.governance.workload)) {
    if (header !== undefined && !trusted.has(header)) issues.push({ file: CONFIG_FILES.gateway, path: `governance.workload.${field}`, message: `header "${header}" is not in gateway.yaml security.trustedHeaders` });
  }

  for (const d of duplicates(pub.tenants.map((t) => t.id))) issues.push({ file, path: "tenants", message: `duplicate tenant id "${d}"` });
  for (const d of duplicates(pub.entrypoints.map((e) => e.name))) issues.push({ file, path: "entrypoints", message: `duplicate entrypoint "${d}"` });
  for (const d of duplicates(pub.models.map((m) => m.id))) issues.push({ file, path: "models", message: `duplicate model id "${d}"` });
  // A rotated-out value is still a key until its grace ends: it may name no other key either.
  for (const d of duplicates(pub.tenants.flatMap((t) => t.apiKeys.flatMap((k) => [k.sha256, ...k.previous.map((p) => p.sha256)])))) {
    issues.push({ file, path: "tenants", message: `API key hash ${d.slice(0, 8)}… is listed twice` });
  }
  for (const d of duplicates(pub.tenants.flatMap((t) => t.apiKeys.map((k) => `${t.id}/${k.id}`)))) {
    issues.push({ file, path: "tenants", message: `duplicate API key id "${d}"` });
  }

  pub.tenants.forEach((t, ti) =>
    t.apiKeys.forEach((k, ki) =>
      k.entrypoints.forEach((e, ei) => {
        if (e !== "*" && !entrypointNames.has(e)) {
          issues.push({ file, path: `tenants[${ti}].apiKeys[${ki}].entrypoints[${ei}]`, message: `unknown entrypoint "${e}"` });
        }
      }),
    ),
  );

  pub.models.forEach((m, mi) => {
    if (!m.revisions.some((r) => r.revision === m.activeRevision)) {
      issues.push({ file, path: `models[${mi}].activeRevision`, message: `revision ${m.activeRevision} is not defined` });
    }
    for (const d of duplicates(m.revisions.map((r) => String(r.revision)))) {
      issues.push({ file, path: `models[${mi}].revisions`, message: `duplicate revision ${d}` });
    }
  });

  pub.entrypoints.forEach((ep, ei) => {
    const checkTiers = (tiers: readonly (readonly string[])[], path: string) =>
      tiers.forEach((tier, ti) =>
        tier.forEach((modelId, mi) => {
          const m = models.get(modelId);
          if (!m) return void issues.push({ file, path: `${path}[${ti}][${mi}]`, message: `unknown model "${modelId}"` });
          // An entrypoint serves one operation: its models' active revisions must require its capability.
          const requires = m.revisions.find((r) => r.revision === m.activeRevision)?.requires ?? [];
          const needed = ep.operation;
          if (!requires.includes(needed)) issues.push({ file, path: `${path}[${ti}][${mi}]`, message: `model "${modelId}" does not require "${needed}", which this ${ep.operation} entrypoint serves` });
        }),
      );
    checkTiers(ep.default, `entrypoints[${ei}].default`);
    ep.decisions.forEach((d, di) => {
      if (d.models) checkTiers(d.models, `entrypoints[${ei}].decisions[${di}].models`);
      issues.push(...checkAlgorithm(d, models, `entrypoints[${ei}].decisions[${di}]`).map((i) => ({ file, ...i })));
    });
    ep.routes.forEach((r, ri) => {
      checkTiers(r.models, `entrypoints[${ei}].routes[${ri}].models`);
      if (r.when.header && !trusted.has(r.when.header.name)) {
        issues.push({
          file,
          path: `entrypoints[${ei}].routes[${ri}].when.header.name`,
          message: `header "${r.when.header.name}" is not in gateway.yaml security.trustedHeaders`,
        });
      }
    });
    for (const d of duplicates(ep.routes.map((r) => r.name))) issues.push({ file, path: `entrypoints[${ei}].routes`, message: `duplicate route "${d}"` });
    if (ep.operation !== "chat" && ep.routes.length > 0) issues.push({ file, path: `entrypoints[${ei}].routes`, message: `an ${ep.operation} entrypoint has no routes: it serves its default tiers` });
    if (ep.affinityHeader !== undefined && !trusted.has(ep.affinityHeader)) {
      issues.push({
        file,
        path: `entrypoints[${ei}].affinityHeader`,
        message: `header "${ep.affinityHeader}" is not in gateway.yaml security.trustedHeaders`,
      });
    }
  });
  return issues;
}
