/**
 * The metric and label names a PromQL expression queries, read by a small lexer rather than a
 * full parser: the dashboard's expressions use selectors, matchers, range vectors, aggregations
 * with `by`/`without`, functions and arithmetic, and every identifier of those falls in one of a
 * few places. An identifier the lexer cannot place is reported, never skipped, so an expression
 * outside that subset fails the test instead of passing unchecked.
 */

/** PromQL functions and aggregation operators the dashboard may call. */
const FUNCTIONS = new Set([
  "sum", "avg", "min", "max", "count", "topk", "bottomk", "quantile", "group", "stddev",
  "rate", "irate", "increase", "delta", "idelta", "deriv", "resets", "changes",
  "histogram_quantile", "histogram_count", "histogram_sum", "clamp_min", "clamp_max", "abs", "ceil", "floor", "round",
  "avg_over_time", "max_over_time", "min_over_time", "sum_over_time", "last_over_time", "label_replace", "vector", "scalar", "time",
]);
/** Keywords that take no parentheses of label names. */
const KEYWORDS = new Set(["and", "or", "unless", "bool", "offset"]);
/** Keywords followed by a parenthesized list of label names. */
const GROUPING = new Set(["by", "without", "on", "ignoring", "group_left", "group_right"]);

/** What one expression names. */
export interface PromqlNames {
  /** Metric names, each with the label names matched in its selector. */
  readonly selectors: readonly { readonly metric: string | undefined; readonly labels: readonly string[] }[];
  /** Label names in `by (…)`, `without (…)`, `on (…)` and the like. */
  readonly grouping: readonly string[];
  /** Identifiers the lexer could not place. */
  readonly unknown: readonly string[];
}

const IDENT = /[a-zA-Z_:][a-zA-Z0-9_:]*/y;

/** The names `expr` queries. Grafana variables (`$entrypoint`, `$__rate_interval`) are not names. */
export function promqlNames(expr: string): PromqlNames {
  const selectors: { metric: string | undefined; labels: string[] }[] = [];
  const grouping: string[] = [];
  const unknown: string[] = [];
  let i = 0;
  const skipSpace = () => {
    while (i < expr.length && /\s/.test(expr[i]!)) i++;
  };
  const ident = (): string | undefined => {
    IDENT.lastIndex = i;
    const m = IDENT.exec(expr);
    if (!m) return undefined;
    i += m[0].length;
    return m[0];
  };
  const string = () => {
    const quote = expr[i]!;
    i++;
    while (i < expr.length && expr[i] !== quote) i += expr[i] === "\\" ? 2 : 1;
    i++;
  };
  /** `{name op "value", …}`: the label names, in order. */
  const matchers = (): string[] => {
    const labels: string[] = [];
    i++; // {
    for (;;) {
      skipSpace();
      if (expr[i] === "}") {
        i++;
        return labels;
      }
      const name = ident();
      if (name === undefined) throw new Error(`a matcher without a label name at ${i} in ${expr}`);
      labels.push(name);
      skipSpace();
      const op = /^(=~|!~|!=|=)/.exec(expr.slice(i));
      if (!op) throw new Error(`a matcher without an operator at ${i} in ${expr}`);
      i += op[0].length;
      skipSpace();
      if (expr[i] !== '"' && expr[i] !== "'") throw new Error(`a matcher without a quoted value at ${i} in ${expr}`);
      string();
      skipSpace();
      if (expr[i] === ",") i++;
    }
  };
  while (i < expr.length) {
    const c = expr[i]!;
    if (/\s/.test(c) || "()+-*/%^,<>=!".includes(c)) {
      i++;
    } else if (c === '"' || c === "'") {
      string();
    } else if (c === "[") {
      // A range or subquery duration, a Grafana variable included.
      i = expr.indexOf("]", i) + 1;
      if (i === 0) throw new Error(`an unclosed range in ${expr}`);
    } else if (c === "$") {
      i++;
      ident();
    } else if (/[0-9.]/.test(c)) {
      while (i < expr.length && /[0-9.eE]/.test(expr[i]!)) i++;
    } else if (c === "{") {
      selectors.push({ metric: undefined, labels: matchers() });
    } else {
      const name = ident();
      if (name === undefined) throw new Error(`unexpected ${c} at ${i} in ${expr}`);
      skipSpace();
      if (GROUPING.has(name)) {
        if (expr[i] === "(") {
          const close = expr.indexOf(")", i);
          grouping.push(...expr.slice(i + 1, close).split(",").map((s) => s.trim()).filter((s) => s !== ""));
          i = close + 1;
        }
      } else if (KEYWORDS.has(name)) {
        // An operator word; `offset` is followed by a duration the number branch reads.
      } else if (expr[i] === "(" || (FUNCTIONS.has(name) && /^(by|without)\b/.test(expr.slice(i)))) {
        // A call, or an aggregation whose `by (…)` comes before its argument.
        if (!FUNCTIONS.has(name)) unknown.push(name);
      } else {
        selectors.push({ metric: name, labels: expr[i] === "{" ? matchers() : [] });
      }
    }
  }
  return { selectors, grouping, unknown };
}
