import type { ContentPart, NeutralMessage, NeutralRequest } from "../protocol/neutral.ts";
import { findPii, type PiiDetector } from "../signals/pii.ts";
import type { Subject } from "../signals/subject.ts";
import type { TextScope } from "../signals/subject-text.ts";
import type { TextChannel, TextRewrite } from "./text-filter.ts";

/** A placeholder's shape: the detector's name in capitals and a number, in brackets (`[EMAIL_1]`). */
const PLACEHOLDER = /\[[A-Z][A-Z_]*_\d+\]/g;

/**
 * One request's redactions: each distinct value found gets one placeholder (the same email in
 * three messages is `[EMAIL_1]` three times), never one the request's own text already contains,
 * so restoring cannot turn a caller's literal text into someone's value.
 */
export class PiiVault {
  readonly #byValue = new Map<string, string>();
  readonly #byPlaceholder = new Map<string, string>();
  readonly #next = new Map<PiiDetector, number>();
  readonly #counts: Partial<Record<PiiDetector, number>> = {};
  /** Text the request already had, so no placeholder collides with it. */
  readonly #taken: (candidate: string) => boolean;

  constructor(taken: (candidate: string) => boolean) {
    this.#taken = taken;
  }

  /** Matches replaced so far, per detector (each occurrence counts). */
  get counts(): Readonly<Partial<Record<PiiDetector, number>>> {
    return this.#counts;
  }

  /** Occurrences replaced so far, all detectors together. */
  get replaced(): number {
    let n = 0;
    for (const c of Object.values(this.#counts)) n += c ?? 0;
    return n;
  }

  /** The placeholder for a value found by a detector. */
  placeholder(detector: PiiDetector, value: string): string {
    this.#counts[detector] = (this.#counts[detector] ?? 0) + 1;
    const known = this.#byValue.get(`${detector}\u0000${value}`);
    if (known !== undefined) return known;
    let n = this.#next.get(detector) ?? 1;
    let p: string;
    do p = `[${detector.toUpperCase()}_${n++}]`;
    while (this.#taken(p));
    this.#next.set(detector, n);
    this.#byValue.set(`${detector}\u0000${value}`, p);
    this.#byPlaceholder.set(p, value);
    return p;
  }

  /** The value a placeholder stands for, if it is one of this request's. */
  value(placeholder: string): string | undefined {
    return this.#byPlaceholder.get(placeholder);
  }

  /** Whether `tail` could still grow into one of this request's placeholders. */
  couldBecome(tail: string): boolean {
    for (const p of this.#byPlaceholder.keys()) if (p.length > tail.length && p.startsWith(tail)) return true;
    return false;
  }
}

/** Every match of the detectors in `text` replaced by its placeholder. */
function redactText(text: string, detectors: ReadonlySet<PiiDetector>, vault: PiiVault): string {
  const matches = findPii(text, detectors);
  if (matches.length === 0) return text;
  let out = "";
  let at = 0;
  for (const m of matches) {
    out += text.slice(at, m.start) + vault.placeholder(m.detector, text.slice(m.start, m.end));
    at = m.end;
  }
  return out + text.slice(at);
}

/**
 * The subject with every PII match in scope replaced by a placeholder: a model request's message
 * text (and, in scope `all`, tool-call arguments and tool results), or a tool call's argument
 * strings at any depth. Undefined when nothing was found.
 */
export function redactSubject(subject: Subject, scope: TextScope, detectors: ReadonlySet<PiiDetector>, vault: PiiVault): Subject | undefined {
  const before = vault.replaced;
  const changed = (): boolean => vault.replaced !== before;
  if (subject.kind === "tool_call") {
    const args = redactValue(subject.arguments, detectors, vault, 0) as Readonly<Record<string, unknown>>;
    return changed() ? { ...subject, arguments: args } : undefined;
  }
  const request = redactRequest(subject.request, scope, detectors, vault);
  return changed() ? { ...subject, request } : undefined;
}

function redactRequest(req: NeutralRequest, scope: TextScope, detectors: ReadonlySet<PiiDetector>, vault: PiiVault): NeutralRequest {
  let lastUser = -1;
  if (scope === "last_user") for (let i = req.messages.length - 1; i >= 0 && lastUser < 0; i--) if (req.messages[i]!.role === "user") lastUser = i;
  const inScope = (m: NeutralMessage, i: number) => (scope === "all" ? true : scope === "user" ? m.role === "user" : i === lastUser);
  const parts = (content: readonly ContentPart[]): readonly ContentPart[] => content.map((p) => (p.type === "text" ? { ...p, text: redactText(p.text, detectors, vault) } : p.type === "reasoning" ? { ...p, text: redactText(p.text, detectors, vault) } : p));
  const messages = req.messages.map((m, i): NeutralMessage => {
    if (!inScope(m, i)) return m;
    if (m.role === "assistant") return { ...m, content: parts(m.content), toolCalls: m.toolCalls?.map((c) => ({ ...c, arguments: redactText(c.arguments, detectors, vault) })) };
    return { ...m, content: parts(m.content) } as NeutralMessage;
  });
  return { ...req, messages };
}

function redactValue(v: unknown, detectors: ReadonlySet<PiiDetector>, vault: PiiVault, depth: number): unknown {
  // Arguments are the client's JSON: the bound only stops a hostile nesting from costing more.
  if (depth > 32) return v;
  if (typeof v === "string") return redactText(v, detectors, vault);
  if (Array.isArray(v)) return v.map((x) => redactValue(x, detectors, vault, depth + 1));
  if (v !== null && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, redactValue(x, detectors, vault, depth + 1)]));
  return v;
}

/**
 * Puts the request's values back where the answer has their placeholders. A tail that could
 * still become a placeholder is held for the next event. In tool-call arguments (JSON text) the
 * value is written JSON-escaped, so a value with quotes or line breaks keeps the arguments valid.
 */
export function restoreRewrite(vault: PiiVault): TextRewrite {
  const restore = (text: string, channel: TextChannel) =>
    text.replace(PLACEHOLDER, (p) => {
      const v = vault.value(p);
      if (v === undefined) return p;
      return channel.kind === "args" ? JSON.stringify(v).slice(1, -1) : v;
    });
  return {
    step(text, channel, final) {
      if (final) return { out: restore(text, channel), keep: "" };
      const open = text.lastIndexOf("[");
      if (open >= 0 && text.indexOf("]", open) < 0 && vault.couldBecome(text.slice(open))) return { out: restore(text.slice(0, open), channel), keep: text.slice(open) };
      return { out: restore(text, channel), keep: "" };
    },
  };
}
