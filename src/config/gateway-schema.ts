import { z } from "zod";
import { a2aConfigSchema } from "./a2a-agents-schema.ts";
import { egressConfigSchema } from "../egress/egress-schema.ts";
import { restServerSchema } from "../mcp/rest-tool.ts";
import { SERVER_NAME } from "../mcp/tool-names.ts";
import { oauthConfigSchema } from "./oauth-schema.ts";

const port = z.number().int().min(1).max(65535);
const headerName = z
  .string()
  .regex(/^[a-z0-9-]+$/, "header names are lower-case letters, digits and '-'");
/** A browser origin exactly as the `Origin` header carries it: scheme, host and port, nothing else. */
const corsOrigin = z.string().refine(
  (o) => {
    try {
      const u = new URL(o);
      return (u.protocol === "https:" || u.protocol === "http:") && u.origin === o;
    } catch {
      return false;
    }
  },
  { message: "an origin such as https://app.example.com (scheme, host and port only; lower-case, no trailing slash)" },
);

/**
 * The largest request head workerd serves: request line, headers and the blank line (measured on
 * workerd 2026-08-15: a 131072-byte head reaches the Worker, a 131073-byte one gets workerd's own
 * plain-text 431). test/e2e/request-edges.test.ts pins the figure.
 */
export const RUNTIME_MAX_HEAD_BYTES = 128 * 1024;

/** Bootstrap config (`config/gateway.yaml`): owned by whoever runs the gateway process. */
export const gatewayConfigSchema = z.strictObject({
  version: z.literal(1),
  listeners: z.strictObject({
    public: z.strictObject({ host: z.string().min(1), port }),
    /** Admin listener; keep it on loopback or a private interface. */
    admin: z.strictObject({ host: z.string().min(1), port }),
  }),
  limits: z
    .strictObject({
      maxBodyBytes: z.number().int().min(1024).max(64 * 1024 * 1024).default(4 * 1024 * 1024),
      maxHeaderCount: z.number().int().min(8).max(1000).default(100),
      /**
       * Header bytes (names, values and line framing). Capped where the runtime stops anyway:
       * workerd refuses a request head (request line and headers) over 128 KiB with its own
       * plain-text 431 before the Worker runs, so a larger setting would never apply.
       */
      maxHeaderBytes: z.number().int().min(1024).max(RUNTIME_MAX_HEAD_BYTES).default(32 * 1024),
      maxJsonDepth: z.number().int().min(4).max(512).default(64),
    })
    .prefault({}),
  traffic: z
    .strictObject({
      /** One absolute deadline per request; retries and fallbacks never refresh it. */
      requestDeadlineMs: z.number().int().min(1000).max(3_600_000).default(600_000),
      /**
       * Per attempt: time from sending the request to the provider's response headers (connection
       * set-up included: fetch does not expose it separately). Expiry is unknown evidence: no retry.
       */
      firstByteTimeoutMs: z.number().int().min(100).max(3_600_000).default(120_000),
      /** Streams: time from response headers to the first content delta; heartbeats do not count. */
      firstTokenTimeoutMs: z.number().int().min(100).max(3_600_000).default(120_000),
      /**
       * Streams: longest gap between content deltas; heartbeats do not reset it, so a
       * heartbeat-only stream ends. A long stream that keeps producing is never cut by it.
       */
      streamIdleTimeoutMs: z.number().int().min(100).max(3_600_000).default(60_000),
      /** Bounded staleness of each isolate's cached BackendSnapshot. */
      snapshotCacheTtlMs: z.number().int().min(0).max(300_000).default(5_000),
      /**
       * Bounded staleness of each isolate's view of the active publication: a revision published
       * or rolled back serves every new request within this long (docs/publication.md).
       */
      publicationCacheTtlMs: z.number().int().min(0).max(300_000).default(5_000),
      /** A latency sample older than this no longer steers the p2c selector. */
      loadFreshnessMs: z.number().int().min(100).max(3_600_000).default(30_000),
      /** Half-life of the time-decayed latency EWMA. */
      latencyHalfLifeMs: z.number().int().min(10).max(600_000).default(5_000),
    })
    .prefault({}),
  /**
   * Admission per isolate: concurrent requests allowed in all, per tenant and per public model
   * (unset = unlimited), and a bounded queue that is fair across tenants and deadline-aware.
   */
  admission: z
    .strictObject({
      maxConcurrent: z.number().int().min(1).optional(),
      perTenant: z.number().int().min(1).optional(),
      perModel: z.number().int().min(1).optional(),
      /** Concurrent requests per physical backend; a full backend is skipped for another. */
      perBackend: z.number().int().min(1).optional(),
      maxQueue: z.number().int().min(0).max(100_000).default(1000),
      maxQueuePerTenant: z.number().int().min(0).max(100_000).default(100),
    })
    .prefault({}),
  /**
   * Per-backend circuit breakers (one Durable Object per backend). Unset fields take the defaults
   * documented in docs/reliability.md; `enabled: false` turns them off.
   */
  breaker: z
    .strictObject({
      enabled: z.boolean().default(true),
      windowMs: z.number().int().min(1000).optional(),
      minSamples: z.number().int().min(1).optional(),
      failureRatio: z.number().gt(0).max(1).optional(),
      openMs: z.number().int().min(100).optional(),
      halfOpenProbes: z.number().int().min(1).optional(),
      halfOpenSuccesses: z.number().int().min(1).optional(),
      /** How long an isolate trusts its cached view of a breaker. */
      cacheTtlMs: z.number().int().min(50).max(60_000).default(1000),
    })
    .prefault({}),
  /** Active health probes (configured per backend in the snapshot's `healthCheck`). */
  health: z
    .strictObject({
      enabled: z.boolean().default(true),
      /** How long an isolate trusts its cached view of a backend's health. */
      cacheTtlMs: z.number().int().min(50).max(60_000).default(2000),
    })
    .prefault({}),
  security: z
    .strictObject({
      /**
       * Request headers the engine may read (decision rules, affinity). Everything else a caller
       * sends is ignored by routing and never forwarded upstream.
       */
      trustedHeaders: z.array(headerName).default([]),
      /** Name of the secret that holds the admin bearer token. */
      adminTokenSecret: z.string().regex(/^[A-Z_][A-Z0-9_]*$/).default("SLUICE_ADMIN_TOKEN"),
      /** The egress guard's allowlist (docs/security.md): every other target must be https to a public host. */
      egress: egressConfigSchema,
      /** Browser origins granted CORS on the public listener; none by default, so no CORS headers at all. */
      cors: z
        .strictObject({
          allowOrigins: z.array(corsOrigin).default([]),
        })
        .prefault({}),
    })
    .prefault({}),
  /** MCP servers the gateway fronts at `/mcp` (docs/mcp.md); none by default. */
  /** How callers authenticate on every public endpoint, beside the publication's API keys (docs/security.md, "Identity"). */
  auth: z
    .strictObject({
      /** OAuth 2.1 / OIDC access tokens (JWTs) accepted beside the API keys, on the model API and on `/mcp`. */
      oauth: oauthConfigSchema.optional(),
    })
    .prefault({}),
  mcp: z
    .strictObject({
      servers: z
        .array(
          z
            .strictObject({
              /** The server's name: `/mcp/<name>`, and the prefix of its tools on `/mcp`. */
              name: z.string().regex(SERVER_NAME, "lower-case letters, digits and '-', no dots, at most 32"),
              /** Its MCP endpoint (a REST server's: its API's base URL); checked by the egress guard. */
              url: z.url({ protocol: /^https?$/, message: "an http(s) URL" }),
              /** The protocol era it speaks: `stateful` (2025-era sessions) or `stateless` (2026-07-28). */
              era: z.enum(["stateful", "stateless"]).optional(),
              /** Instead of `era`: the gateway serves the server itself from the HTTP API at `url` (src/mcp/rest-tool.ts). */
              rest: restServerSchema.optional(),
              credential: z.strictObject({ secret: z.string().regex(/^[A-Z_][A-Z0-9_]*$/), scheme: z.enum(["bearer", "x-api-key"]) }).optional(),
              /** When its list fails: `open` lists the other servers and reports the gap, `closed` fails the list. */
              listFailure: z.enum(["open", "closed"]).default("open"),
              /**
               * Open a TCP connection before each request: when none opens, nothing was sent, so the
               * request may be retried once and a priced call is not charged (docs/mcp.md).
               */
              connectCheck: z.boolean().default(false),
              /** Active probes (`server/discover`, or `initialize` for a stateful server; never a tool call). Omitted: not probed. */
              healthCheck: z
                .strictObject({
                  intervalMs: z.number().int().min(1000).max(3_600_000).default(30_000),
                  timeoutMs: z.number().int().min(100).max(60_000).default(5_000),
                })
                .optional(),
            })
            .superRefine((s, ctx) => {
              if ((s.era === undefined) === (s.rest === undefined)) ctx.addIssue({ code: "custom", path: ["era"], message: "an MCP server has an era (stateful or stateless); a server built from an HTTP API has rest instead" });
              if (s.rest !== undefined && s.healthCheck !== undefined) ctx.addIssue({ code: "custom", path: ["healthCheck"], message: "a server built from an HTTP API is not probed: its API has no MCP discovery to ask" });
            })
            // One or the other, as the type says: code reading an MCP server's era need not check for REST.
            .transform(({ era, rest, ...common }) => (rest !== undefined ? { ...common, rest, era: undefined } : { ...common, era: era!, rest: undefined })),
        )
        .default([]),
      /** Browser origins allowed to call `/mcp` (DNS-rebinding protection); requests without Origin are not browsers'. */
      allowedOrigins: z.array(corsOrigin).default([]),
      /**
       * Stateful-era (2025) clients: their session ids are sealed with keys derived from these
       * secrets (the first seals, all open: rotation). Without it only 2026-07-28 clients are served.
       */
      sessions: z
        .strictObject({
          secrets: z.array(z.string().regex(/^[A-Z_][A-Z0-9_]*$/)).min(1),
          ttlMs: z.number().int().min(60_000).max(30 * 86_400_000).default(86_400_000),
        })
        .optional(),
    })
    .prefault({}),
  /** A2A agents the gateway fronts at `/a2a/<agent>` (docs/a2a.md); none by default. */
  a2a: a2aConfigSchema,
  observability: z
    .strictObject({
      /** Response header that carries the request id. */
      requestIdHeader: headerName.default("x-request-id"),
      /** Structured access log (one JSON line per request) on stdout. */
      accessLog: z.boolean().default(true),
      metrics: z
        .strictObject({
          /**
           * Tenant as a metric label: off by default (one more dimension on every request series);
           * when on, the first `maxTenants` tenants seen get their own value, the rest `other`.
           */
          tenantLabel: z
            .strictObject({ enabled: z.boolean().default(false), maxTenants: z.number().int().min(1).max(1000).default(20) })
            .prefault({}),
          /** Distinct backend, pool and upstream model names kept per label (they come from snapshots, which change). */
          maxSnapshotNames: z.number().int().min(1).max(10_000).default(200),
          /**
           * An unauthenticated listener serving only `GET /metrics`, for scrapers that cannot send
           * the admin token. Loopback only: anything else would publish the metrics.
           */
          listener: z
            .strictObject({
              host: z.enum(["127.0.0.1", "::1", "localhost"], { message: "the metrics listener binds loopback only: 127.0.0.1, ::1 or localhost" }),
              port,
            })
            .optional(),
        })
        .prefault({}),
      tracing: z
        .strictObject({
          /**
           * Share of new traces that are recorded (0..1). A request continuing a client's trace
           * (when `traceparent` is a trusted header) follows the client's sampled flag instead.
           */
          sampleRatio: z.number().min(0).max(1).default(1),
        })
        .prefault({}),
      /** OTLP/HTTP (JSON) export of spans and metrics; off when absent. */
      otlp: z
        .strictObject({
          /** The collector's base URL; `/v1/traces` and `/v1/metrics` are appended. */
          endpoint: z.url({ protocol: /^https?$/, message: "an http(s) URL" }).transform((u) => u.replace(/\/+$/, "")),
          /** Secret holding extra request headers, `name=value` pairs separated by commas (a collector's API key). */
          headersSecret: z.string().regex(/^[A-Z_][A-Z0-9_]*$/).optional(),
          traces: z.boolean().default(true),
          /** Push metrics too: the way to get them where isolates cannot be scraped (the edge). */
          metrics: z.boolean().default(true),
          maxQueueSpans: z.number().int().min(1).max(100_000).default(4096),
          batchSpans: z.number().int().min(1).max(10_000).default(512),
          flushIntervalMs: z.number().int().min(100).max(600_000).default(5000),
          metricsIntervalMs: z.number().int().min(1000).max(3_600_000).default(60_000),
          timeoutMs: z.number().int().min(100).max(60_000).default(10_000),
        })
        .optional(),
    })
    .prefault({}),
  /** Agent governance (docs/governance.md): the call ledger and audit trail, approvals, the console. */
  governance: z
    .strictObject({
      /** Days the call ledger keeps task records and audit events. */
      retentionDays: z.number().int().min(1).max(3650).default(30),
      /** The request log (`GET /admin/calls`): every call of a tenant, attributed to a task or not, kept for `retentionDays`. */
      requestLog: z
        .strictObject({
          /** Calls a tenant's request log keeps at most (the oldest go first); 0: no request log. */
          maxCalls: z.number().int().min(0).max(10_000_000).default(100_000),
        })
        .prefault({}),
      /** What the stored audit trail holds beyond decisions, tool executions, proposals and approvals. */
      audit: z
        .strictObject({
          /**
           * `attributed`: model completions of calls that name a task; `all`: every model completion
           * (an unattributed call's is on its access line either way).
           */
          modelCompletions: z.enum(["attributed", "all"]).default("attributed"),
        })
        .prefault({}),
      /** Name of the secret that holds the verifier's bearer token (it alone may attach a task's outcome); none: outcomes are refused. */
      verifierTokenSecret: z.string().regex(/^[A-Z_][A-Z0-9_]*$/).optional(),
      /**
       * Trusted headers that name the workload behind a call (its agent instance, its end user):
       * recorded beside the call as metadata, never identity. Each must be in security.trustedHeaders.
       */
      workload: z.strictObject({ agentHeader: headerName.optional(), endUserHeader: headerName.optional() }).prefault({}),
      /** Name of the secret holding the approvers' bearer token: it may list, approve, deny and revoke approvals on the admin listener. */
      approverTokenSecret: z.string().regex(/^[A-Z_][A-Z0-9_]*$/).optional(),
      /** Human approval of tool calls a policy rule marks `approval: required`; without it such calls are refused. */
      approvals: z
        .strictObject({
          /** How long an approval (pending or approved, not yet used) stays valid. */
          ttlMs: z.number().int().min(1000).max(30 * 86_400_000).default(3_600_000),
          /** Name of the secret the `requestState` of 2026-07-28 clients is sealed under (at least 16 characters). */
          stateSecret: z.string().regex(/^[A-Z_][A-Z0-9_]*$/),
          /** The public base URL of the status pages (`<publicUrl>/approvals/<id>`); default: the origin the request came in on. */
          publicUrl: z.url({ protocol: /^https?$/, message: "an http(s) URL" }).optional(),
        })
        .optional(),
    })
    .prefault({}),
});

/** Parsed and defaulted bootstrap config. */
export type GatewayConfig = z.infer<typeof gatewayConfigSchema>;
