import { expect } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";

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
