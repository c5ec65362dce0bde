import { expect } from "vitest";
import { ConfigValidationError } from "../../../src/config/parse-file.ts";

/** The issues of the ConfigValidationError `fn` throws; fails the test when it throws nothing or something else. */
export function issuesOf(fn: () => unknown): ConfigValidationError["issues"] {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigValidationError);
    return (err as ConfigValidationError).issues;
  }
  throw new Error("expected a ConfigValidationError");
}
