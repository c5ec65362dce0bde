/**
 * Counters, histograms and gauges whose label values can only come from bounded sets.
 *
 * LiteLLM's metrics leaked memory through label cardinality: caller-chosen model names and ids
 * became label values. Here every label has a {@link LabelDomain} decided from configuration (the
 * names of entrypoints, models, backends, pools; a closed enum of outcomes and error codes); a
 * value outside it is recorded as `other`. Each instrument also has a hard cap on its series, as
 * a second line: past it, new series fold into one whose every label is `other`.
 */

/** The value recorded for a label value outside its domain. */
export const OTHER = "other";
/** Series per instrument past which new label sets fold into one. */
export const DEFAULT_MAX_SERIES = 2_000;

/** Maps a raw label value to the value recorded: itself when allowed, else {@link OTHER}. */
export type LabelDomain = (value: string) => string;

/** A domain of the given values (configuration names, enum members). */
export function oneOf(values: Iterable<string>): LabelDomain {
  const allowed = new Set(values);
  return (v) => (allowed.has(v) ? v : OTHER);
}

/**
 * A domain of configuration names that later configuration may add to (a publication revision
 * published at runtime names new entrypoints, models, routes or tenants). Only {@link admit}
 * adds names, never a recorded value, and at most `cap` names in all: past that, new names fold.
 */
export class ConfiguredNames {
  readonly #allowed: Set<string>;
  readonly #cap: number;
  readonly domain: LabelDomain = (v) => (this.#allowed.has(v) ? v : OTHER);

  constructor(initial: Iterable<string>, cap: number) {
    this.#allowed = new Set(initial);
    this.#cap = Math.max(cap, this.#allowed.size);
  }

  /** Adds configuration names (up to the cap); names already allowed cost nothing. */
  admit(names: Iterable<string>): void {
    for (const n of names) {
      if (this.#allowed.size >= this.#cap) return;
      this.#allowed.add(n);
    }
  }
}

/**
 * A domain that admits the first `cap` distinct values it sees and folds the rest: for a label
 * whose values come from configuration but may be many (tenants), opted in with a cap.
 */
export function firstDistinct(cap: number, within?: LabelDomain): LabelDomain {
  const seen = new Set<string>();
  return (v) => {
    const x = within ? within(v) : v;
    if (x === OTHER || seen.has(x)) return x;
    if (seen.size >= cap) return OTHER;
    seen.add(x);
    return x;
  };
}

/** One label of an instrument: its attribute key (OpenTelemetry) and where its values may come from. */
export interface LabelSpec {
  readonly key: string;
  readonly domain: LabelDomain;
}

interface Base {
  /** OpenTelemetry name (`gen_ai.server.request.duration`, `sluice.requests`). */
  readonly name: string;
  /** Prometheus name (`gen_ai_server_request_duration_seconds`, `sluice_requests_total`). */
  readonly promName: string;
  readonly help: string;
  /** UCUM unit (`s`, `{token}`, `{request}`). */
  readonly unit: string;
  readonly labels: readonly LabelSpec[];
}

/** A series: label values in the instrument's label order, and its state. */
export interface Series<T> {
  readonly values: readonly string[];
  state: T;
}

/** The part of an instrument both renderings read. */
export interface InstrumentView extends Base {
  readonly kind: "counter" | "histogram" | "gauge";
}

abstract class Instrument<T> implements InstrumentView {
  abstract readonly kind: "counter" | "histogram" | "gauge";
  readonly name: string;
  readonly promName: string;
  readonly help: string;
  readonly unit: string;
  readonly labels: readonly LabelSpec[];
  readonly #series = new Map<string, Series<T>>();
  readonly #maxSeries: number;
  readonly #onFold: () => void;

  constructor(spec: Base, maxSeries: number, onFold: () => void) {
    this.name = spec.name;
    this.promName = spec.promName;
    this.help = spec.help;
    this.unit = spec.unit;
    this.labels = spec.labels;
    this.#maxSeries = maxSeries;
    this.#onFold = onFold;
  }

  protected abstract initial(): T;

  /** The series of these raw label values (mapped through their domains), created on first use. */
  protected series(raw: readonly string[]): Series<T> {
    const values = this.labels.map((l, i) => l.domain(raw[i] ?? ""));
    let key = values.join("\u0001");
    let s = this.#series.get(key);
    if (s !== undefined) return s;
    if (this.#series.size >= this.#maxSeries) {
      this.#onFold();
      const folded = this.labels.map(() => OTHER);
      key = folded.join("\u0001");
      s = this.#series.get(key);
      if (s !== undefined) return s;
      s = { values: folded, state: this.initial() };
    } else {
      s = { values, state: this.initial() };
    }
    this.#series.set(key, s);
    return s;
  }

  /** Every series, in creation order. */
  all(): Iterable<Series<T>> {
    return this.#series.values();
  }
}

/**
 * A monotonic count. `scale` divides the count when it is exported: money is counted in whole
 * micro-units (exact integer sums) and exported in units of its currency.
 */
export class Counter extends Instrument<number> {
  readonly kind = "counter";
  readonly scale: number;

  constructor(spec: Base & { readonly scale?: number | undefined }, maxSeries: number, onFold: () => void) {
    super(spec, maxSeries, onFold);
    this.scale = spec.scale ?? 1;
  }
  protected initial(): number {
    return 0;
  }
  /** A series' value as exported. */
  exported(s: Series<number>): number {
    return s.state / this.scale;
  }
  /** Adds `by` (default 1; never negative) to the series of `labels`. */
  add(labels: readonly string[], by = 1): void {
    if (!(by >= 0)) return;
    this.series(labels).state += by;
  }
}

/** Bucket counts (not cumulative), sum and count of observed values. */
export interface HistogramState {
  readonly counts: number[];
  sum: number;
  count: number;
}

/** A distribution over fixed bucket boundaries. */
export class Histogram extends Instrument<HistogramState> {
  readonly kind = "histogram";
  readonly bounds: readonly number[];

  constructor(spec: Base & { readonly bounds: readonly number[] }, maxSeries: number, onFold: () => void) {
    super(spec, maxSeries, onFold);
    this.bounds = spec.bounds;
  }
  protected initial(): HistogramState {
    return { counts: new Array<number>(this.bounds.length + 1).fill(0), sum: 0, count: 0 };
  }
  /** Records one value (ignored when not finite or negative). */
  observe(labels: readonly string[], value: number): void {
    if (!Number.isFinite(value) || value < 0) return;
    const s = this.series(labels).state;
    let i = 0;
    while (i < this.bounds.length && value > this.bounds[i]!) i++;
    s.counts[i]!++;
    s.sum += value;
    s.count++;
  }
}

/** How a read instrument takes its values: `set` each series' current value. */
export type GaugeRead = (set: (labels: readonly string[], value: number) => void) => void;

/**
 * A value read when the metrics are read: the current state of something the isolate holds.
 * With `monotonic`, what is read is a total some component keeps since the isolate started (an
 * observable counter): exported as a counter, so a dashboard takes its rate.
 */
export class Gauge extends Instrument<number> {
  readonly kind: "gauge" | "counter";
  readonly #read: GaugeRead;

  constructor(spec: Base & { readonly read: GaugeRead; readonly monotonic?: boolean | undefined }, maxSeries: number, onFold: () => void) {
    super(spec, maxSeries, onFold);
    this.kind = spec.monotonic === true ? "counter" : "gauge";
    this.#read = spec.read;
  }
  protected initial(): number {
    return 0;
  }
  /** A series' value as exported. */
  exported(s: Series<number>): number {
    return s.state;
  }
  /** Reads the current values (series not set this time keep their last value). */
  refresh(): void {
    this.#read((labels, value) => {
      this.series(labels).state = value;
    });
  }
}

/** The instruments of one isolate. */
export class MetricRegistry {
  readonly #instruments: (Counter | Histogram | Gauge)[] = [];
  readonly #maxSeries: number;
  /** Label sets that were folded because an instrument hit its series cap. */
  folded = 0;

  constructor(maxSeries = DEFAULT_MAX_SERIES) {
    this.#maxSeries = maxSeries;
  }

  readonly #fold = () => {
    this.folded++;
  };

  counter(spec: Base & { readonly scale?: number | undefined }): Counter {
    return this.#add(new Counter(spec, this.#maxSeries, this.#fold));
  }
  histogram(spec: Base & { readonly bounds: readonly number[] }): Histogram {
    return this.#add(new Histogram(spec, this.#maxSeries, this.#fold));
  }
  gauge(spec: Base & { readonly read: GaugeRead; readonly monotonic?: boolean | undefined }): Gauge {
    return this.#add(new Gauge(spec, this.#maxSeries, this.#fold));
  }

  #add<I extends Counter | Histogram | Gauge>(i: I): I {
    if (this.#instruments.some((x) => x.name === i.name || x.promName === i.promName)) throw new Error(`metric ${i.name} registered twice`);
    this.#instruments.push(i);
    return i;
  }

  /** Every instrument, gauges refreshed first. */
  read(): readonly (Counter | Histogram | Gauge)[] {
    for (const i of this.#instruments) if (i instanceof Gauge) i.refresh();
    return this.#instruments;
  }
}

const promLabel = (key: string) => key.replace(/[^a-zA-Z0-9_]/g, "_");
const escapeValue = (v: string) => v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
const num = (n: number) => (Number.isFinite(n) ? String(n) : n > 0 ? "+Inf" : n < 0 ? "-Inf" : "NaN");

function labelText(keys: readonly string[], values: readonly string[], extra?: string): string {
  const parts = keys.map((k, i) => `${k}="${escapeValue(values[i] ?? "")}"`);
  if (extra !== undefined) parts.push(extra);
  return parts.length === 0 ? "" : `{${parts.join(",")}}`;
}

/** The Prometheus text exposition format (version 0.0.4) of every instrument. */
export function prometheusText(registry: MetricRegistry): string {
  const out: string[] = [];
  for (const inst of registry.read()) {
    const keys = inst.labels.map((l) => promLabel(l.key));
    out.push(`# HELP ${inst.promName} ${inst.help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")}`);
    out.push(`# TYPE ${inst.promName} ${inst.kind}`);
    if (inst instanceof Histogram) {
      const base = inst.promName;
      for (const s of inst.all()) {
        let cumulative = 0;
        inst.bounds.forEach((b, i) => {
          cumulative += s.state.counts[i]!;
          out.push(`${base}_bucket${labelText(keys, s.values, `le="${num(b)}"`)} ${cumulative}`);
        });
        out.push(`${base}_bucket${labelText(keys, s.values, 'le="+Inf"')} ${s.state.count}`);
        out.push(`${base}_sum${labelText(keys, s.values)} ${num(s.state.sum)}`);
        out.push(`${base}_count${labelText(keys, s.values)} ${s.state.count}`);
      }
    } else {
      const c = inst as Counter | Gauge;
      for (const s of c.all()) out.push(`${inst.promName}${labelText(keys, s.values)} ${num(c.exported(s))}`);
    }
  }
  return `${out.join("\n")}\n`;
}
