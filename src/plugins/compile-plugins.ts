import { GatewayError } from "../errors/gateway-error.ts";
import type { NeutralMessage } from "../protocol/neutral.ts";
import { BUILT_IN_JAILBREAK_RULES, compileJailbreak } from "../signals/jailbreak.ts";
import { PII_DETECTORS, type PiiDetector } from "../signals/pii.ts";
import type { Subject } from "../signals/subject.ts";
import { subjectText } from "../signals/subject-text.ts";
import { maskRewrite } from "./output-pii.ts";
import { PiiVault, redactSubject, restoreRewrite } from "./pii-redaction.ts";
import type { Plugin, PluginDeps, PluginFactory, RequestSafeInput, StreamEventFilter } from "./plugin.ts";
import { responseCachePlugin } from "./response-cache-plugin.ts";
import type { PluginConfig } from "../config/plugin-schema.ts";
import { textFilter } from "./text-filter.ts";

/** The most events a text filter holds: it merges what it holds into one. */
const TEXT_HOLD_BACK = 1;

/** Compiles the publication's plugins (validated at load) by name. */
export function compilePlugins(configs: readonly PluginConfig[], deps: PluginDeps = {}): ReadonlyMap<string, PluginFactory> {
  return new Map(configs.map((c) => [c.name, compilePlugin(c, deps)]));
}

/**
 * A request-safe check that fails (a detector throws): refused as `signal_unavailable`
 * (fail closed) or let through (fail open), and recorded either way.
 */
function guarded(name: string, onError: "closed" | "open", input: RequestSafeInput, run: () => Subject | undefined): Subject | undefined {
  try {
    return run();
  } catch (err) {
    if (err instanceof GatewayError) throw err;
    input.report({ plugin: name, action: onError === "open" ? "failed_open" : "failed_closed", detail: String(err) });
    if (onError === "open") return undefined;
    throw new GatewayError("signal_unavailable", `The gateway could not run the check of plugin "${name}" and does not pass the request on unchecked.`, { cause: err });
  }
}

const countsText = (counts: Readonly<Record<string, number | undefined>>) =>
  Object.entries(counts)
    .filter(([, n]) => (n ?? 0) > 0)
    .map(([d, n]) => `${d} ×${n}`)
    .join(", ");

function compilePlugin(c: PluginConfig, deps: PluginDeps): PluginFactory {
  const name = c.name;
  switch (c.kind) {
    case "pii": {
      const detectors = new Set<PiiDetector>(c.detectors);
      return {
        name,
        instantiate(): readonly Plugin[] {
          let vault: PiiVault | undefined;
          const plugins: Plugin[] = [
            {
              name,
              class: "request_safe",
              apply: (input) =>
                guarded(name, c.onError, input, () => {
                  const all = subjectText(input.subject, "all");
                  const found = new PiiVault((p) => all.includes(p));
                  const redacted = redactSubject(input.subject, c.in, detectors, found);
                  if (found.replaced === 0) return undefined;
                  // In the detectors' own order, so records read the same whatever the text's order.
                  const counts: Record<string, number> = {};
                  for (const d of PII_DETECTORS) if (found.counts[d] !== undefined) counts[d] = found.counts[d]!;
                  if (c.action === "block") {
                    input.report({ plugin: name, action: "blocked", counts, detail: Object.keys(counts).join(",") });
                    throw new GatewayError("content_blocked", `The request was refused by plugin "${name}": it carries ${countsText(counts)} (PII).`);
                  }
                  if (c.action === "allow") {
                    input.report({ plugin: name, action: "allowed", counts });
                    return undefined;
                  }
                  input.report({ plugin: name, action: "redacted", counts });
                  vault = found;
                  return redacted;
                }),
            },
          ];
          if (c.action === "redact" && c.restore) {
            // Restores what this request's redaction replaced; a request with nothing redacted passes through.
            plugins.push({ name, class: "stream_event_safe", maxHoldBack: TEXT_HOLD_BACK, runsLast: true, open: () => (vault ? textFilter(restoreRewrite(vault)) : PASS) });
          }
          return plugins;
        },
      };
    }
    case "jailbreak": {
      const set = compileJailbreak([...(c.builtIn ? BUILT_IN_JAILBREAK_RULES : []), ...c.rules]);
      return single(name, (input) =>
        guarded(name, c.onError, input, () => {
          const { rules } = set.match(subjectText(input.subject, c.in));
          if (rules.length === 0) return undefined;
          input.report({ plugin: name, action: "blocked", detail: rules.join(",") });
          throw new GatewayError("content_blocked", `The request was refused by plugin "${name}": jailbreak rule ${rules.map((r) => `"${r}"`).join(", ")}.`);
        }),
      );
    }
    case "block":
      return single(name, (input) => {
        input.report({ plugin: name, action: "blocked", detail: input.decision });
        const by = input.decision === undefined ? `plugin "${name}"` : `decision "${input.decision}" (plugin "${name}")`;
        throw new GatewayError("content_blocked", `The request was refused by ${by}${c.reason === undefined ? "" : `: ${c.reason}`}.`);
      });
    case "system_prompt":
      return single(name, (input) => {
        const s = input.subject;
        if (s.kind !== "model") return undefined;
        input.report({ plugin: name, action: "changed", detail: `system prompt ${c.mode}` });
        return { ...s, request: { ...s.request, messages: withSystemPrompt(s.request.messages, c.mode, c.text) } };
      });
    case "headers":
      return single(name, (input) => {
        const s = input.subject;
        if (s.kind !== "model") return undefined;
        input.report({ plugin: name, action: "changed", detail: `headers ${Object.keys(c.set).join(",")}` });
        return { ...s, headers: { ...s.headers, ...c.set } };
      });
    case "cache":
      return responseCachePlugin(c, deps);
    case "output_pii": {
      const detectors = new Set<PiiDetector>(c.detectors);
      return {
        name,
        instantiate(report): readonly Plugin[] {
          const counts: Partial<Record<PiiDetector, number>> = {};
          return [
            {
              name,
              class: "stream_event_safe",
              maxHoldBack: TEXT_HOLD_BACK,
              open: () => {
                const filter = textFilter(maskRewrite(detectors, (d) => (counts[d] = (counts[d] ?? 0) + 1)));
                return {
                  event: (ev) => filter.event(ev),
                  held: () => filter.held!(),
                  end: () => {
                    const out = filter.end();
                    if (Object.keys(counts).length > 0) report({ plugin: name, action: "masked", counts: { ...counts } as Record<string, number> });
                    return out;
                  },
                };
              },
            },
          ];
        },
      };
    }
  }
}

const PASS: StreamEventFilter = { event: (ev) => [ev], end: () => [] };

function single(name: string, apply: (input: RequestSafeInput) => Subject | undefined): PluginFactory {
  const plugin: Plugin = { name, class: "request_safe", apply };
  return { name, instantiate: () => [plugin] };
}

/** The messages with the operator's system prompt put before the request's own, after them, or instead of them. */
function withSystemPrompt(messages: readonly NeutralMessage[], mode: "prepend" | "append" | "replace", text: string): NeutralMessage[] {
  const system: NeutralMessage = { role: "system", content: [{ type: "text", text }] };
  if (mode === "prepend") return [system, ...messages];
  const isSystem = (m: NeutralMessage) => m.role === "system" || m.role === "developer";
  if (mode === "replace") return [system, ...messages.filter((m) => !isSystem(m))];
  // After the leading system messages, where protocols that hoist them (Anthropic) still find it.
  let at = 0;
  while (at < messages.length && isSystem(messages[at]!)) at++;
  return [...messages.slice(0, at), system, ...messages.slice(at)];
}
