import type { StreamErrorEvent } from "./codec.ts";

/** The error event for a provider stream event that cannot be read (not JSON, not the protocol's shape). */
export const UNREADABLE_EVENT: StreamErrorEvent = { type: "error", code: "upstream_protocol_error", message: "The provider sent an unreadable stream event." };

/** The error event for a provider stream that ended without its protocol's ending. */
export const CUT_EVENT: StreamErrorEvent = { type: "error", code: "upstream_stream_cut", message: "The provider's stream ended before it was complete." };
