import { expect } from "vitest";

/** One client-visible SSE block: a comment, `[DONE]`, or a JSON payload. */
export type ClientEvent = { readonly kind: "comment"; readonly text: string } | { readonly kind: "done" } | { readonly kind: "json"; readonly value: Record<string, unknown> };

/**
 * Strictly parses SSE text as the gateway writes it: LF line endings, every block terminated by a
 * blank line, each block either comment lines or exactly one `data:` line holding JSON or `[DONE]`.
 * Fails the test on anything else, so a test that parses output also checks it is well-formed.
 */
export function parseClientSse(text: string): ClientEvent[] {
  if (text === "") return [];
  expect(text.endsWith("\n\n"), `SSE text must end with a blank line: ${JSON.stringify(text.slice(-40))}`).toBe(true);
  expect(text).not.toContain("\r");
  const blocks = text.slice(0, -2).split("\n\n");
  const out: ClientEvent[] = [];
  for (const block of blocks) {
    const lines = block.split("\n");
    expect(lines.length, `block: ${JSON.stringify(block)}`).toBeGreaterThan(0);
    if (lines.every((l) => l.startsWith(":"))) {
      for (const l of lines) out.push({ kind: "comment", text: l.slice(1).trim() });
      continue;
    }
    expect(lines.length, `one data line per event: ${JSON.stringify(block)}`).toBe(1);
    const line = lines[0]!;
    expect(line.startsWith("data: "), `data line: ${JSON.stringify(line)}`).toBe(true);
    const data = line.slice("data: ".length);
    if (data === "[DONE]") {
      out.push({ kind: "done" });
      continue;
    }
    let value: unknown;
    expect(() => (value = JSON.parse(data)), `JSON payload: ${data}`).not.toThrow();
    expect(typeof value === "object" && value !== null && !Array.isArray(value)).toBe(true);
    out.push({ kind: "json", value: value as Record<string, unknown> });
  }
  return out;
}

/** Provider-side SSE text from JSON chunks (each as one `data:` event), optionally ending with `[DONE]`. */
export function providerSse(chunks: readonly unknown[], opts: { done?: boolean; eol?: string } = {}): string {
  const eol = opts.eol ?? "\n";
  const events = chunks.map((c) => `data: ${typeof c === "string" ? c : JSON.stringify(c)}${eol}${eol}`);
  if (opts.done ?? true) events.push(`data: [DONE]${eol}${eol}`);
  return events.join("");
}

const PROVIDER_HEAD = { id: "chatcmpl-PROVIDER", object: "chat.completion.chunk", created: 1_111_111_111, model: "provider-model", system_fingerprint: "fp_x" };

/** A provider chunk with one choice carrying `delta` (and `finish_reason`). */
export function deltaChunk(delta: Record<string, unknown>, finish_reason: string | null = null): Record<string, unknown> {
  return { ...PROVIDER_HEAD, choices: [{ index: 0, delta, logprobs: null, finish_reason }] };
}

/** The trailing usage chunk OpenAI sends with `stream_options.include_usage` (no choices). */
export function usageChunk(usage: Record<string, unknown>): Record<string, unknown> {
  return { ...PROVIDER_HEAD, choices: [], usage };
}

/** One client-visible typed SSE block: a comment, or an `event:` name with its JSON payload. */
export type TypedClientEvent = { readonly kind: "comment"; readonly text: string } | { readonly kind: "event"; readonly event: string; readonly value: Record<string, unknown> };

/**
 * Strictly parses typed SSE text (OpenAI Responses, Anthropic Messages): LF line endings, every
 * block terminated by a blank line, each block either comment lines or exactly `event: <name>`
 * followed by one `data:` line holding a JSON object whose `type` is that name.
 */
export function parseTypedSse(text: string): TypedClientEvent[] {
  if (text === "") return [];
  expect(text.endsWith("\n\n"), `SSE text must end with a blank line: ${JSON.stringify(text.slice(-40))}`).toBe(true);
  expect(text).not.toContain("\r");
  const out: TypedClientEvent[] = [];
  for (const block of text.slice(0, -2).split("\n\n")) {
    const lines = block.split("\n");
    if (lines.every((l) => l.startsWith(":"))) {
      for (const l of lines) out.push({ kind: "comment", text: l.slice(1).trim() });
      continue;
    }
    expect(lines.length, `an event line and one data line: ${JSON.stringify(block)}`).toBe(2);
    const [eventLine, dataLine] = lines as [string, string];
    expect(eventLine.startsWith("event: "), `event line: ${JSON.stringify(eventLine)}`).toBe(true);
    expect(dataLine.startsWith("data: "), `data line: ${JSON.stringify(dataLine)}`).toBe(true);
    const event = eventLine.slice("event: ".length);
    let value: unknown;
    expect(() => (value = JSON.parse(dataLine.slice("data: ".length))), `JSON payload: ${dataLine}`).not.toThrow();
    expect(typeof value === "object" && value !== null && !Array.isArray(value)).toBe(true);
    expect((value as Record<string, unknown>).type, `payload type matches the event name`).toBe(event);
    out.push({ kind: "event", event, value: value as Record<string, unknown> });
  }
  return out;
}
