import { expect } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";

/** The GatewayError `fn` throws; rethrows anything else, and fails the test when it throws nothing. */
export function refusal(fn: () => unknown): GatewayError {
  try {
    fn();
  } catch (err) {
    if (err instanceof GatewayError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}

/** The code of the GatewayError `fn` throws; fails the test when it throws nothing or something else. */
export function refusalCode(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError);
    return (err as GatewayError).code;
  }
  throw new Error("expected a refusal");
}
