/**
 * False hits of the semantic cache, measured: generates a labelled set of prompt pairs (paraphrases
 * that should hit, near-misses that must not) and runs each through the cache's match (cosine at
 * the shipped threshold, then the lexical gate) with the simulator's embeddings. docs/cache.md
 * quotes its table; test/simulator/cache-false-hits.test.ts checks that the quote is current and
 * that no near-miss is served.
 *
 *   node scripts/cache-false-hits.ts [--threshold 0.85] [--per-kind 400] [--seed 27]
 */

import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { lexicalSignature } from "../src/cache/lexical-gate.ts";
import { DEFAULT_SEMANTIC_THRESHOLD, semanticMatch, unitVector } from "../src/cache/semantic-match.ts";
import { embed } from "../simulator/embedding.ts";

/** How a pair was made. Paraphrase kinds should hit; near-miss kinds must never. */
export type PairKind =
  | "surface"
  | "politeness"
  | "contraction"
  | "synonym"
  | "reorder"
  | "name"
  | "number"
  | "negation"
  | "reversed"
  | "direction";

export const PARAPHRASE_KINDS: readonly PairKind[] = ["surface", "politeness", "contraction", "synonym", "reorder"];
export const NEAR_MISS_KINDS: readonly PairKind[] = ["name", "number", "negation", "reversed", "direction"];

export interface PromptPair {
  readonly kind: PairKind;
  readonly a: string;
  readonly b: string;
  /** True when `b` asks what `a` asks (a hit is right); false when serving `a`'s answer to `b` is wrong. */
  readonly same: boolean;
}

const NAMES = ["Alice", "Bob", "Carol", "David", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy", "Mallory", "Oscar", "Peggy", "Trent", "Victor", "Walter", "Priya", "Kenji", "Amara", "Lucas"];
const CITIES = ["Paris", "London", "Berlin", "Madrid", "Rome", "Tokyo", "Cairo", "Lima", "Oslo", "Dublin", "Vienna", "Prague", "Lisbon", "Seoul", "Nairobi", "Toronto"];
const DRUGS = ["ibuprofen", "aspirin", "paracetamol", "naproxen", "codeine", "melatonin", "loratadine", "omeprazole"];
const WITHS = ["alcohol", "coffee", "grapefruit juice", "antibiotics", "milk", "blood thinners"];
const TEAMS = ["sales", "finance", "support", "legal", "marketing", "platform", "security"];
const DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"];
const UNITS: readonly [string, string][] = [["kilometers", "miles"], ["pounds", "kilograms"], ["liters", "gallons"], ["celsius", "fahrenheit"], ["inches", "centimeters"]];

/** A seeded generator (mulberry32): the set is the same on every run. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Slots = Record<string, string>;

/**
 * A question with slots. `text` renders it; `neg` its negation; `swap` the two slots whose order
 * is the question (only where swapping changes the answer); `direction` the prepositions whose
 * exchange changes it; `synonyms` words a person might use instead; `reorder` the same question
 * in another word order.
 */
interface Template {
  readonly slots: (r: () => number) => Slots;
  readonly text: (s: Slots) => string;
  readonly neg: (s: Slots) => string;
  readonly swap?: readonly [string, string];
  readonly direction?: readonly [string, string];
  readonly name?: string;
  readonly number?: string;
  readonly synonyms: readonly [string, string][];
  readonly reorder: (s: Slots) => string;
}

const pick = <T,>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
const int = (r: () => number, lo: number, hi: number) => String(lo + Math.floor(r() * (hi - lo + 1)));
function two<T>(r: () => number, xs: readonly T[]): [T, T] {
  const a = pick(r, xs);
  let b = pick(r, xs);
  while (b === a) b = pick(r, xs);
  return [a, b];
}

const TEMPLATES: readonly Template[] = [
  {
    slots: (r) => ({ amount: int(r, 5, 5000), name: pick(r, NAMES), dir: "to" }),
    text: (s) => `Transfer $${s.amount} ${s.dir} ${s.name}'s account`,
    neg: (s) => `Do not transfer $${s.amount} ${s.dir} ${s.name}'s account`,
    direction: ["to", "from"],
    name: "name",
    number: "amount",
    synonyms: [["Transfer", "Send"], ["account", "wallet"]],
    reorder: (s) => `${s.dir === "to" ? "To" : "From"} ${s.name}'s account, transfer $${s.amount}`,
  },
  {
    slots: (r) => {
      const [x, y] = two(r, CITIES);
      return { x, y };
    },
    text: (s) => `Is ${s.x} bigger than ${s.y}?`,
    neg: (s) => `Is ${s.x} not bigger than ${s.y}?`,
    swap: ["x", "y"],
    name: "x",
    synonyms: [["bigger", "larger"]],
    reorder: (s) => `${s.x} bigger than ${s.y}, is it?`,
  },
  {
    slots: (r) => {
      const [x, y] = two(r, NAMES);
      return { x, y, amount: int(r, 10, 900) };
    },
    text: (s) => `Does ${s.x} owe ${s.y} $${s.amount}?`,
    neg: (s) => `Does ${s.x} not owe ${s.y} $${s.amount}?`,
    swap: ["x", "y"],
    name: "y",
    number: "amount",
    synonyms: [["owe", "still owe"]],
    reorder: (s) => `$${s.amount}: does ${s.x} owe ${s.y} that?`,
  },
  {
    slots: (r) => {
      const [x, y] = pick(r, UNITS);
      return { n: int(r, 2, 500), x, y };
    },
    text: (s) => `Convert ${s.n} ${s.x} to ${s.y}`,
    neg: (s) => `Do not convert ${s.n} ${s.x} to ${s.y}`,
    swap: ["x", "y"],
    number: "n",
    synonyms: [["Convert", "Change"]],
    reorder: (s) => `${s.n} ${s.x} to ${s.y}, convert it`,
  },
  {
    slots: (r) => ({ drug: pick(r, DRUGS), with: pick(r, WITHS) }),
    text: (s) => `Is it safe to take ${s.drug} with ${s.with}?`,
    neg: (s) => `Is it unsafe to not take ${s.drug} with ${s.with}?`,
    synonyms: [["safe", "okay"], ["take", "use"]],
    reorder: (s) => `Taking ${s.drug} with ${s.with}: is it safe?`,
  },
  {
    slots: (r) => ({ name: pick(r, NAMES), hour: int(r, 1, 11), day: pick(r, DAYS) }),
    text: (s) => `Schedule a meeting with ${s.name} at ${s.hour} pm on ${s.day}`,
    neg: (s) => `Do not schedule a meeting with ${s.name} at ${s.hour} pm on ${s.day}`,
    name: "name",
    number: "hour",
    synonyms: [["Schedule", "Book"], ["meeting", "call"]],
    reorder: (s) => `On ${s.day} at ${s.hour} pm, schedule a meeting with ${s.name}`,
  },
  {
    slots: (r) => ({ order: int(r, 1000, 99999), name: pick(r, NAMES) }),
    text: (s) => `Cancel order ${s.order} for ${s.name}`,
    neg: (s) => `Do not cancel order ${s.order} for ${s.name}`,
    name: "name",
    number: "order",
    synonyms: [["Cancel", "Call off"]],
    reorder: (s) => `For ${s.name}, cancel order ${s.order}`,
  },
  {
    slots: (r) => ({ n: int(r, 2, 40), team: pick(r, TEAMS), name: pick(r, NAMES) }),
    text: (s) => `Summarize report ${s.n} from ${s.name} for the ${s.team} team`,
    neg: (s) => `Do not summarize report ${s.n} from ${s.name} for the ${s.team} team`,
    direction: ["from", "for"],
    name: "name",
    number: "n",
    synonyms: [["Summarize", "Sum up"]],
    reorder: (s) => `For the ${s.team} team, summarize report ${s.n} from ${s.name}`,
  },
  {
    slots: (r) => {
      const [x, y] = two(r, CITIES);
      return { x, y, day: pick(r, DAYS) };
    },
    text: (s) => `Book a flight from ${s.x} to ${s.y} on ${s.day}`,
    neg: (s) => `Never book a flight from ${s.x} to ${s.y} on ${s.day}`,
    swap: ["x", "y"],
    name: "y",
    synonyms: [["Book", "Reserve"], ["flight", "plane ticket"]],
    reorder: (s) => `On ${s.day}, book a flight from ${s.x} to ${s.y}`,
  },
  {
    slots: (r) => {
      const [x, y] = two(r, NAMES);
      return { x, y, n: int(r, 2, 30) };
    },
    text: (s) => `Did ${s.x} beat ${s.y} in round ${s.n}?`,
    neg: (s) => `Did ${s.x} not beat ${s.y} in round ${s.n}?`,
    swap: ["x", "y"],
    name: "x",
    number: "n",
    synonyms: [["beat", "defeat"]],
    reorder: (s) => `In round ${s.n}, did ${s.x} beat ${s.y}?`,
  },
];

const POLITE_PREFIXES = ["Please ", "Hi, ", "Hey, could you please ", "Could you ", "Can you please "];
const POLITE_SUFFIXES = [" please", ", thanks", ". Thank you!", " thanks"];

/** Case, punctuation and white space: what changes when the same person types it twice. */
function surface(text: string, r: () => number): string {
  const variants = [
    (t: string) => t.toLowerCase(),
    (t: string) => t.toUpperCase(),
    (t: string) => t.replace(/[?.!]$/, "") + (r() < 0.5 ? "??" : "."),
    (t: string) => `  ${t.replace(/ /g, "  ")}\n`,
    (t: string) => t.replace(/'s\b/g, "s").replace(/[?.!]$/, ""),
  ];
  return pick(r, variants)(text);
}

function polite(text: string, r: () => number): string {
  const lowered = text.charAt(0).toLowerCase() + text.slice(1);
  return r() < 0.5 ? pick(r, POLITE_PREFIXES) + lowered : text.replace(/[?.!]$/, "") + pick(r, POLITE_SUFFIXES);
}

/** Contractions in or out, where the text has any; a politeness change otherwise. */
function contraction(text: string, r: () => number): string {
  const swapped = text
    .replace(/\bDo not\b/g, "Don't")
    .replace(/\bdoes not\b/gi, "doesn't")
    .replace(/\bDoes (\w+) not\b/g, "Doesn't $1")
    .replace(/\bDid (\w+) not\b/g, "Didn't $1")
    .replace(/\bIs (\w+) not\b/g, "Isn't $1")
    .replace(/\bIs it\b/g, "Is it really");
  return swapped !== text ? swapped : polite(text, r);
}

/** Every pair of the set: `perKind` of each kind, from the templates in turn. */
export function cachePairs(seed = 27, perKind = 400): PromptPair[] {
  const r = rng(seed);
  const out: PromptPair[] = [];
  const add = (kind: PairKind, same: boolean, make: (t: Template, s: Slots) => string | undefined) => {
    let made = 0;
    let tries = 0;
    while (made < perKind && tries < perKind * 50) {
      tries++;
      const t = TEMPLATES[tries % TEMPLATES.length]!;
      const s = t.slots(r);
      const b = make(t, s);
      if (b === undefined) continue;
      const a = t.text(s);
      if (a === b) continue;
      out.push({ kind, a, b, same });
      made++;
    }
  };
  add("surface", true, (t, s) => surface(t.text(s), r));
  add("politeness", true, (t, s) => polite(t.text(s), r));
  add("contraction", true, (t, s) => contraction(t.text(s), r));
  add("synonym", true, (t, s) => {
    const [from, to] = pick(r, t.synonyms);
    return t.text(s).replace(from, to);
  });
  add("reorder", true, (t, s) => t.reorder(s));
  add("name", false, (t, s) => {
    if (t.name === undefined) return undefined;
    const pool = NAMES.includes(s[t.name]!) ? NAMES : CITIES;
    const other = pool.filter((n) => !Object.values(s).includes(n));
    return t.text({ ...s, [t.name]: pick(r, other) });
  });
  add("number", false, (t, s) => {
    if (t.number === undefined) return undefined;
    const n = Number(s[t.number]);
    const changes = [n + 1, n * 10, Math.max(0, n - 1), n + 100];
    return t.text({ ...s, [t.number]: String(pick(r, changes.filter((c) => c !== n))) });
  });
  add("negation", false, (t, s) => (r() < 0.5 ? t.neg(s) : contraction(t.neg(s), r)));
  add("reversed", false, (t, s) => {
    if (t.swap === undefined) return undefined;
    const [x, y] = t.swap;
    return t.text({ ...s, [x]: s[y]!, [y]: s[x]! });
  });
  add("direction", false, (t, s) => {
    if (t.direction === undefined) return undefined;
    const [d1, d2] = t.direction;
    if (t.slots === TEMPLATES[0]!.slots) return t.text({ ...s, dir: s.dir === d1 ? d2 : d1 });
    return t.text(s).replace(` ${d1} `, ` ${d2} `);
  });
  return out;
}

/** One kind's result: how many pairs reach the threshold by cosine alone, and how many the cache serves. */
export interface KindResult {
  readonly kind: PairKind;
  readonly same: boolean;
  readonly pairs: number;
  readonly aboveThreshold: number;
  readonly served: number;
}

/** Runs every pair through the cache's match at `threshold` with the simulator's embeddings. */
export function measurePairs(pairs: readonly PromptPair[], threshold = DEFAULT_SEMANTIC_THRESHOLD): KindResult[] {
  const results = new Map<PairKind, { same: boolean; pairs: number; aboveThreshold: number; served: number }>();
  const probe = (text: string) => ({ unit: unitVector(embed(text)), signature: lexicalSignature(text) });
  for (const p of pairs) {
    const m = semanticMatch(probe(p.b), probe(p.a), threshold);
    const r = results.get(p.kind) ?? { same: p.same, pairs: 0, aboveThreshold: 0, served: 0 };
    r.pairs++;
    if ((m.similarity ?? -1) >= threshold) r.aboveThreshold++;
    if (m.accepted) r.served++;
    results.set(p.kind, r);
  }
  return [...PARAPHRASE_KINDS, ...NEAR_MISS_KINDS].filter((k) => results.has(k)).map((kind) => ({ kind, ...results.get(kind)! }));
}

const pct = (n: number, d: number) => `${((100 * n) / d).toFixed(1)} %`;

/** The table docs/cache.md quotes: per kind, pairs, share at or above the threshold, share served. */
export function resultTable(results: readonly KindResult[], threshold: number): string {
  const rows = results.map((r) => `| ${r.kind} | ${r.same ? "paraphrase (should hit)" : "near-miss (must not hit)"} | ${r.pairs} | ${pct(r.aboveThreshold, r.pairs)} | ${pct(r.served, r.pairs)} |`);
  const para = results.filter((r) => r.same);
  const near = results.filter((r) => !r.same);
  const sum = (rs: readonly KindResult[], f: (r: KindResult) => number) => rs.reduce((s, r) => s + f(r), 0);
  const paraPairs = sum(para, (r) => r.pairs);
  const nearPairs = sum(near, (r) => r.pairs);
  return [
    `| kind | label | pairs | cosine ≥ ${threshold} | served (cosine and lexical gate) |`,
    "|---|---|---|---|---|",
    ...rows,
    `| **all paraphrases** | miss rate ${pct(paraPairs - sum(para, (r) => r.served), paraPairs)} | ${paraPairs} | ${pct(sum(para, (r) => r.aboveThreshold), paraPairs)} | ${pct(sum(para, (r) => r.served), paraPairs)} |`,
    `| **all near-misses** | false-hit rate ${pct(sum(near, (r) => r.served), nearPairs)} | ${nearPairs} | ${pct(sum(near, (r) => r.aboveThreshold), nearPairs)} | ${pct(sum(near, (r) => r.served), nearPairs)} |`,
  ].join("\n");
}

function main(): void {
  const { values } = parseArgs({ options: { threshold: { type: "string" }, "per-kind": { type: "string" }, seed: { type: "string" } } });
  const threshold = values.threshold === undefined ? DEFAULT_SEMANTIC_THRESHOLD : Number(values.threshold);
  const pairs = cachePairs(values.seed === undefined ? 27 : Number(values.seed), values["per-kind"] === undefined ? 400 : Number(values["per-kind"]));
  process.stdout.write(`${resultTable(measurePairs(pairs, threshold), threshold)}\n`);
}

if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) main();
