import { textOf } from "../protocol/content-parts.ts";
import type { NeutralRequest } from "../protocol/neutral.ts";
import { estimatePromptTokens } from "../protocol/prompt-estimate.ts";
import type { Subject } from "./subject.ts";

/**
 * Which text of a request a signal reads:
 * - `last_user`: the last user message (the caller's own words now; the default for routing);
 * - `user`: every user message;
 * - `all`: every message's text, system and assistant included, and tool results (what PII and
 *   jailbreak checks read by default: a secret pasted three turns ago is still sent).
 * A tool call's text is its arguments' string values, whichever scope is asked.
 */
export type TextScope = "last_user" | "user" | "all";

/** What several signals read from one request, computed once per subject. */
interface SubjectFacts {
  readonly text: Partial<Record<TextScope, string>>;
  estimate?: number;
  modalities?: readonly string[];
}

const facts = new WeakMap<object, SubjectFacts>();

function factsOf(subject: Subject): SubjectFacts {
  const key = subject.kind === "model" ? subject.request : subject.arguments;
  let f = facts.get(key);
  if (f === undefined) facts.set(key, (f = { text: {} }));
  return f;
}

/** The subject's text in a scope (see {@link TextScope}), computed once per subject and scope. */
export function subjectText(subject: Subject, scope: TextScope): string {
  const f = factsOf(subject);
  const scopeKey = subject.kind === "model" ? scope : "all";
  const known = f.text[scopeKey];
  if (known !== undefined) return known;
  const text = subject.kind === "model" ? requestText(subject.request, scope) : argumentText(subject.arguments);
  (f.text as Record<TextScope, string>)[scopeKey] = text;
  return text;
}

/** The prompt's estimated tokens (as reservations estimate them); undefined for a tool call. */
export function subjectTokens(subject: Subject): number | undefined {
  if (subject.kind !== "model") return undefined;
  const f = factsOf(subject);
  f.estimate ??= estimatePromptTokens(subject.request);
  return f.estimate;
}

/** The modalities a model request uses: `images`, `tools`, `audio`, `json_schema`; undefined for a tool call. */
export function subjectModalities(subject: Subject): readonly string[] | undefined {
  if (subject.kind !== "model") return undefined;
  const f = factsOf(subject);
  f.modalities ??= modalitiesOf(subject.request);
  return f.modalities;
}

function requestText(req: NeutralRequest, scope: TextScope): string {
  if (scope === "last_user") {
    for (let i = req.messages.length - 1; i >= 0; i--) {
      const m = req.messages[i]!;
      if (m.role === "user") return textOf(m.content);
    }
    return "";
  }
  const parts: string[] = [];
  for (const m of req.messages) {
    if (scope === "user" && m.role !== "user") continue;
    parts.push(textOf(m.content));
    if (scope === "all" && m.role === "assistant") for (const c of m.toolCalls ?? []) parts.push(c.arguments);
  }
  return parts.join("\n");
}

function argumentText(args: Readonly<Record<string, unknown>>): string {
  const out: string[] = [];
  const walk = (v: unknown, depth: number): void => {
    // Arguments are JSON the client sent: bounded depth keeps a hostile nesting from costing more.
    if (depth > 32) return;
    if (typeof v === "string") out.push(v);
    else if (Array.isArray(v)) for (const x of v) walk(x, depth + 1);
    else if (v !== null && typeof v === "object") for (const x of Object.values(v)) walk(x, depth + 1);
  };
  walk(args, 0);
  return out.join("\n");
}

function modalitiesOf(req: NeutralRequest): readonly string[] {
  const out: string[] = [];
  if (req.messages.some((m) => m.content.some((p) => p.type === "image"))) out.push("images");
  if ((req.tools?.length ?? 0) > 0) out.push("tools");
  if (req.responseFormat?.type === "json_schema") out.push("json_schema");
  return out;
}
