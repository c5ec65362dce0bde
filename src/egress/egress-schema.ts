import { z } from "zod";
import { parseAllowEntry } from "./egress-guard.ts";

/** One `security.egress.allow` entry: `host:port` or `host`, checked by {@link parseAllowEntry}. */
const allowEntrySchema = z.string().superRefine((entry, ctx) => {
  const parsed = parseAllowEntry(entry);
  if (!parsed.ok) ctx.addIssue({ code: "custom", message: parsed.message });
});

/**
 * gateway.yaml `security.egress`: the egress guard's allowlist. Empty by default: every target
 * must then be https to a public address.
 */
export const egressConfigSchema = z
  .strictObject({
    /**
     * Hosts (`host`, any port) or host and port (`host:port`) that may be reached over plain
     * http and inside loopback, private, link-local, shared and unique-local ranges.
     */
    allow: z.array(allowEntrySchema).default([]),
  })
  .prefault({});
