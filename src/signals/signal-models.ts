/**
 * The model calls a model-backed signal makes on the request's behalf. Each is an ordinary
 * sub-request on the one runner (its own request and attempt ids, breakers, health, budgets
 * charged to the caller), never a side channel.
 */
export interface SignalModels {
  /**
   * Embeds texts with an embeddings entrypoint, one vector per text, in order.
   * @throws GatewayError the sub-request's error (the signal is then `unknown`).
   */
  embed(model: string, texts: readonly string[], signal: AbortSignal): Promise<readonly Float32Array[]>;
  /**
   * Classifies texts with a moderations entrypoint: per text, whether it is flagged and a score
   * per category. Undefined where the gateway serves no moderation operation.
   * @throws GatewayError the sub-request's error.
   */
  readonly moderate?: ((model: string, texts: readonly string[], signal: AbortSignal) => Promise<readonly ModerationVerdict[]>) | undefined;
}

/** A moderation classifier's verdict on one text. */
export interface ModerationVerdict {
  readonly flagged: boolean;
  readonly scores: Readonly<Record<string, number>>;
}

/**
 * Wraps a request's model calls so that the same text embedded by the same model is embedded
 * once per request, however many similarity signals read it (and, later, the cache).
 */
export function memoizedModels(models: SignalModels): SignalModels {
  // Made on the first embedding: most requests embed nothing, and every request is wrapped.
  let embeddings: Map<string, Promise<Float32Array>> | undefined;
  return {
    moderate: models.moderate,
    async embed(model, texts, signal) {
      const memo = (embeddings ??= new Map());
      const missing = texts.filter((t) => !memo.has(`${model}\u0000${t}`));
      if (missing.length > 0) {
        const batch = models.embed(model, missing, signal);
        missing.forEach((t, i) => {
          const one = batch.then((vectors) => vectors[i]!);
          // A failed batch is not remembered: the next signal that asks tries again.
          one.catch(() => memo.delete(`${model}\u0000${t}`));
          memo.set(`${model}\u0000${t}`, one);
        });
      }
      return Promise.all(texts.map((t) => memo.get(`${model}\u0000${t}`)!));
    },
  };
}
