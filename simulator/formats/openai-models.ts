/**
 * OpenAI model listing (`GET /v1/models`, `GET /v1/models/{id}`).
 */

import type { SimError } from "../wire-format.ts";

/** Fixed so listings are byte-stable across runs. */
const CREATED = 1_700_000_000;
const OWNER = "sluice-simulator";

/** Body of `GET /v1/models`. */
export function renderModelList(ids: readonly string[]): string {
  return JSON.stringify({
    object: "list",
    data: ids.map((id) => ({ id, object: "model", created: CREATED, owned_by: OWNER })),
  });
}

/** Body of `GET /v1/models/{id}` for a listed model. */
export function renderModel(id: string): string {
  return JSON.stringify({ id, object: "model", created: CREATED, owned_by: OWNER });
}

/** OpenAI's error for a model id it does not list. */
export function modelNotFound(id: string): SimError {
  return {
    status: 404,
    kind: "not_found",
    message: `The model '${id}' does not exist or you do not have access to it.`,
    param: null,
    code: "model_not_found",
  };
}
