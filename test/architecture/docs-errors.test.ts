import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { tableCells } from "./support/markdown-table.ts";
import { toAnthropicErrorBody, toOpenAiErrorBody } from "../../src/errors/envelopes.ts";
import { ERROR_CODES, GatewayError, type ErrorCode } from "../../src/errors/gateway-error.ts";

const DOC = "docs/errors.md";
const HEADER = ["code", "HTTP status", "retryable", "OpenAI type", "Anthropic type", "when it happens"];

const cells = tableCells;

/** The rows of the table whose header is HEADER, as written. */
function codeTable(markdown: string): string[][] {
  const lines = markdown.split("\n");
  const start = lines.findIndex((l) => l.trim().startsWith("|") && JSON.stringify(cells(l)) === JSON.stringify(HEADER));
  if (start < 0) throw new Error(`${DOC} has no table headed | ${HEADER.join(" | ")} |`);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.trim().startsWith("|")) break;
    rows.push(cells(line));
  }
  return rows;
}

const unquote = (cell: string) => /^`([^`]+)`$/.exec(cell)?.[1];

/** What the table says about one code, in the shape the code itself is read into. */
interface CodeFacts {
  status: number;
  retryable: boolean;
  openai: string | undefined;
  anthropic: string | undefined;
}

const rows = codeTable(readFileSync(resolve(import.meta.dirname, "..", "..", DOC), "utf8"));
const documented = new Map<string, CodeFacts>(
  rows.map(([code = "", status = "", retryable = "", openai = "", anthropic = ""]) => [
    unquote(code) ?? code,
    { status: Number(status), retryable: retryable === "yes", openai: unquote(openai), anthropic: unquote(anthropic) },
  ]),
);

/** The facts as a client meets them: built through the real error type and both real envelopes. */
function actual(code: ErrorCode): CodeFacts {
  const err = new GatewayError(code, "docs check");
  return {
    status: err.status,
    retryable: err.retryable,
    openai: toOpenAiErrorBody(err).error.type,
    anthropic: toAnthropicErrorBody(err).error.type,
  };
}

describe(`${DOC}: the error-code table`, () => {
  it("writes every row in the table's format", () => {
    for (const row of rows) {
      expect(row, row.join(" | ")).toHaveLength(HEADER.length);
      const [code = "", status = "", retryable = "", openai = "", anthropic = "", when = ""] = row;
      expect(unquote(code), `code cell ${code}`).toMatch(/^[a-z_]+$/);
      expect(status, `${code} status`).toMatch(/^[1-5][0-9]{2}$/);
      expect(["yes", "no"], `${code} retryable`).toContain(retryable);
      expect(unquote(openai), `${code} OpenAI type`).toBeDefined();
      expect(unquote(anthropic), `${code} Anthropic type`).toBeDefined();
      expect(when, `${code} says when it happens`).not.toBe("");
    }
  });

  it("lists each code once", () => {
    const codes = rows.map(([code = ""]) => unquote(code) ?? code);
    expect(codes.filter((c, i) => codes.indexOf(c) !== i)).toEqual([]);
  });

  it("lists every code the gateway has", () => {
    expect(ERROR_CODES.filter((c) => !documented.has(c))).toEqual([]);
  });

  it("lists no code the gateway does not have", () => {
    expect([...documented.keys()].filter((c) => !(ERROR_CODES as readonly string[]).includes(c))).toEqual([]);
  });

  it.each([...ERROR_CODES])("%s: status, retryable and both protocols' types as the code produces them", (code) => {
    expect(documented.get(code)).toEqual(actual(code));
  });
});
