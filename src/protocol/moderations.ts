import type { InputRequest, InputResponse, InputWire } from "./input-wire.ts";

/**
 * Moderations in neutral form: texts to classify and, per text, whether the classifier flagged
 * it and its verdict and score per category, whichever wire protocol carried them. Categories are
 * the classifier's own names (OpenAI's thirteen, or a self-hosted model's), passed on as given.
 */

export interface NeutralModerationRequest extends InputRequest {
  readonly inputs: readonly string[];
}

/** One input's verdict. */
export interface ModerationVerdict {
  /** Whether any category flagged the input. */
  readonly flagged: boolean;
  /** Per category: whether it applies. */
  readonly categories: Readonly<Record<string, boolean>>;
  /** Per category: the classifier's score (OpenAI's are in 0–1). */
  readonly categoryScores: Readonly<Record<string, number>>;
  /** Per category: the kinds of input it was judged on (`text`, `image`), when the classifier said. */
  readonly appliedInputTypes?: Readonly<Record<string, readonly string[]>> | undefined;
}

export interface NeutralModerationResponse extends InputResponse {
  /** One verdict per input, in input order. */
  readonly results: readonly ModerationVerdict[];
}

/** A moderations wire protocol. */
export type ModerationsCodec = InputWire<NeutralModerationRequest, NeutralModerationResponse>;
