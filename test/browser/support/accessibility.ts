import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Page } from "playwright-core";

/** axe-core's browser bundle, read once: the checks run inside the page under test. */
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/**
 * The rule sets the console is held to: WCAG 2.0 and 2.1, levels A and AA, and axe's best
 * practices (one main landmark, content inside landmarks, headings in order, a level-one heading),
 * which no WCAG tag covers.
 */
export const AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"] as const;

/** One failed rule, as much of axe's answer as a person needs to find and fix it. */
export interface AccessibilityViolation {
  readonly id: string;
  readonly impact: string;
  readonly help: string;
  readonly nodes: readonly { readonly target: string; readonly summary: string }[];
}

/**
 * The rules of {@link AXE_TAGS} the page as it is now fails. axe runs in the page through the
 * DevTools protocol (`page.evaluate`), which a page's Content-Security-Policy does not govern:
 * the console's CSP forbids every script (`default-src 'none'`, no `script-src`), so a
 * `<script>` tag added to the page would be refused, and the page keeps its real CSP while it is
 * checked.
 */
export async function accessibilityViolations(page: Page): Promise<AccessibilityViolation[]> {
  const loaded = await page.evaluate(`typeof globalThis.axe === "object"`);
  if (loaded !== true) await page.evaluate(AXE_SOURCE);
  return (await page.evaluate(async (tags: readonly string[]) => {
    type AxeNode = { target: unknown[]; failureSummary?: string };
    type AxeResult = { id: string; impact?: string | null; help: string; nodes: AxeNode[] };
    const axe = (globalThis as unknown as { axe: { run(options: object): Promise<{ violations: AxeResult[] }> } }).axe;
    const { violations } = await axe.run({ runOnly: { type: "tag", values: tags }, resultTypes: ["violations"] });
    return violations.map((v) => ({
      id: v.id,
      impact: v.impact ?? "unknown",
      help: v.help,
      nodes: v.nodes.map((n) => ({ target: n.target.map(String).join(" "), summary: (n.failureSummary ?? "").replace(/\s+/g, " ").trim() })),
    }));
  }, AXE_TAGS)) as AccessibilityViolation[];
}

/** The violations as lines a test failure shows: rule, impact, what it wants, and each element with why. */
export function describeViolations(violations: readonly AccessibilityViolation[]): string {
  return violations
    .map((v) => [`${v.id} (${v.impact}): ${v.help}`, ...v.nodes.map((n) => `  at ${n.target}${n.summary ? ` — ${n.summary}` : ""}`)].join("\n"))
    .join("\n");
}

/** Fails, listing every violation readably, unless the page passes axe's WCAG 2.1 A/AA and best-practice rules. */
export async function expectAccessible(page: Page, what = page.url()): Promise<void> {
  const violations = await accessibilityViolations(page);
  if (violations.length > 0) throw new Error(`${what} fails ${violations.length} accessibility rule(s):\n${describeViolations(violations)}`);
}
