import { expect } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";

/** Runs `fn`, expecting a GatewayError, and returns it. */
export function rejectOf(fn: () => unknown): GatewayError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError);
    return err as GatewayError;
  }
  throw new Error("expected a GatewayError, nothing was thrown");
}

/** An `expectInvalid(body, param)` for one decoder: a client's 400 naming `param`. */
export function invalidRequestOf(decode: (body: unknown) => unknown): (body: unknown, param: string | undefined) => GatewayError {
  return (body, param) => {
    const err = rejectOf(() => decode(body));
    expect(err.code).toBe("invalid_request");
    expect(err.status).toBe(400);
    expect(err.source).toBe("client");
    expect(err.param).toBe(param);
    return err;
  };
}

/** Strips keys whose value is undefined, the way a JSON body would. */
export const json = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;
