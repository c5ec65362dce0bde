import { describe, expect, it } from "vitest";
describe("pool", () => { it("runs", () => { expect(1 + 1).toBe(2); }); });
