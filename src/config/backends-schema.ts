import { z } from "zod";
import { capabilitySchema } from "./publication-schema.ts";
import { PROTOCOL_IDS } from "../protocol/codec.ts";
import { responseHeaderRefusal } from "../egress/response-headers.ts";

const name = z
  .string()
  .regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, "names are 1-64 lower-case letters, digits, '.', '_' or '-'");

/** Wire protocols a backend may speak; each needs a registered codec. */
export const backendProtocolSchema = z.enum(PROTOCOL_IDS);
export type BackendProtocol = z.infer<typeof backendProtocolSchema>;

/** A provider credential is only ever a reference to a secret or env binding by name. */
const credentialSchema = z.strictObject({
  secret: z.string().regex(/^[A-Z_][A-Z0-9_]*$/, "secret names are upper-case env-style names"),
  /** How the provider expects it: `Authorization: Bearer` (OpenAI style) or `x-api-key` (Anthropic). */
  scheme: z.enum(["bearer", "x-api-key"]).default("bearer"),
});

const backendSchema = z.strictObject({
  name,
  protocol: backendProtocolSchema,
  /** Base URL the protocol's paths are appended to, e.g. `https://api.openai.com/v1`. */
  baseUrl: z.url({ protocol: /^https?$/ }),
  credential: credentialSchema.optional(),
  capabilities: z.array(capabilitySchema).min(1),
  /** Extra static headers for the provider (never secrets: use `credential`). */
  headers: z.record(z.string().regex(/^[a-z0-9-]+$/), z.string()).default({}),
  /**
   * Provider response headers passed to the client on a successful answer (a provider's request
   * id, say). None by default; hop-by-hop, cookie, server-software and the gateway's own headers
   * are refused here and never passed.
   */
  responseHeaders: z
    .array(
      z
        .string()
        .regex(/^[a-z0-9-]+$/, "header names are lower-case letters, digits and '-'")
        .superRefine((n, ctx) => {
          const why = responseHeaderRefusal(n);
          if (why !== undefined) ctx.addIssue({ code: "custom", message: why });
        }),
    )
    .default([]),
  /**
   * Open a TCP connection before each attempt and only then send the request. A connection that
   * cannot be opened proves nothing was sent (known-zero), so the attempt may be retried elsewhere;
   * fetch alone cannot tell a refused connection from a reset after the body was written. Costs
   * one extra TCP handshake per attempt.
   */
  connectCheck: z.boolean().default(false),
  /**
   * Send the attempt's W3C `traceparent` (and the client's `tracestate`) to this provider, so its
   * spans join the gateway's trace. Off by default: a trace id is an identifier the provider
   * would otherwise never see.
   */
  propagateTraceContext: z.boolean().default(false),
  /**
   * Active health probes on a non-billable path (GET `baseUrl` + `path`), run by one Durable
   * Object per backend, so replicas never multiply them. Omitted: no active probes.
   */
  healthCheck: z
    .strictObject({
      path: z.string().regex(/^\/[A-Za-z0-9._~\/-]*$/, "a path starting with '/'").default("/models"),
      intervalMs: z.number().int().min(1000).max(3_600_000).default(30_000),
      timeoutMs: z.number().int().min(100).max(60_000).default(5_000),
    })
    .optional(),
});

const memberSchema = z.strictObject({
  backend: name,
  /** The provider's own model id. */
  model: z.string().min(1).max(256),
  weight: z.number().int().min(1).max(10_000).default(1),
});

const poolSchema = z.strictObject({
  name,
  selector: z.enum(["random", "round-robin", "weighted-round-robin", "affinity", "p2c"]).default("p2c"),
  members: z.array(memberSchema).min(1),
});

/** BackendSnapshot source (`config/backends.yaml`, or a candidate pushed through the admin API). */
export const snapshotSourceSchema = z.strictObject({
  version: z.literal(1),
  backends: z.array(backendSchema).min(1),
  pools: z.array(poolSchema).min(1),
});

export type SnapshotSource = z.infer<typeof snapshotSourceSchema>;
