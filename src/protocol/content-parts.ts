import type { ContentPart } from "./neutral.ts";

/** The text of a message's parts, joined; images and replayed reasoning contribute nothing. */
export function textOf(parts: readonly ContentPart[]): string {
  return parts.map((p) => (p.type === "text" ? p.text : "")).join("");
}

/**
 * Content for the OpenAI wire formats, which share one shape: replayed reasoning is left out (no
 * OpenAI protocol can take it back, see docs/protocols), a lone text part goes as a plain string
 * (the form every OpenAI-compatible server accepts), no parts as "", and anything else as the
 * protocol's own part objects.
 */
export function openAiContent<W>(
  all: readonly ContentPart[],
  text: (p: Extract<ContentPart, { type: "text" }>) => W,
  image: (p: Extract<ContentPart, { type: "image" }>) => W,
): string | W[] {
  const content = all.filter((p) => p.type !== "reasoning");
  if (content.length === 1 && content[0]?.type === "text") return content[0].text;
  if (content.length === 0) return "";
  return content.flatMap((p): W[] => (p.type === "text" ? [text(p)] : p.type === "image" ? [image(p)] : []));
}
