import type { BackendCodec, Codec } from "./codec.ts";
import type { NeutralEmbeddingRequest, NeutralEmbeddingResponse } from "./embeddings.ts";
import type { BackendInputWire, InputRequest, InputResponse, InputWire } from "./input-wire.ts";
import type { NeutralModerationRequest, NeutralModerationResponse } from "./moderations.ts";

/** The input-only operations: each is also the capability a backend declares to serve it. */
export type InputOperationId = "embeddings" | "moderations";

/**
 * One input-only operation, as the phases past decoding see it: its name (the entrypoint's
 * operation and the capability its backends declare) and where a protocol's codec keeps its wire.
 */
export interface InputOperation<Req extends InputRequest, Res extends InputResponse> {
  readonly id: InputOperationId;
  /** The operation's wire in a codec's protocol; undefined when that protocol's providers do not serve it. */
  wire(codec: Codec): InputWire<Req, Res> | undefined;
  /** The backend half of the operation's wire in a backend's protocol (which may be one only backends speak). */
  backendWire(codec: BackendCodec): BackendInputWire<Req, Res> | undefined;
}

export const EMBEDDINGS: InputOperation<NeutralEmbeddingRequest, NeutralEmbeddingResponse> = { id: "embeddings", wire: (codec) => codec.embeddings, backendWire: (codec) => codec.embeddings };

export const MODERATIONS: InputOperation<NeutralModerationRequest, NeutralModerationResponse> = { id: "moderations", wire: (codec) => codec.moderations, backendWire: (codec) => codec.moderations };
