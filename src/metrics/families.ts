import { Counter, Gauge, Histogram, Summary } from 'prom-client';

/**
 * prom-client families shaped for Nereid's data. prom-client wants every label name declared up front and values
 * pushed in; ours are cumulative totals owned by ModelStats (read at scrape time) and label sets that differ per
 * model (`_<tag>` labels from each config's metric_tags). So each class here extends a prom-client type — the
 * registry, exposition and `# TYPE` line stay prom-client's — and overrides only `get()`.
 */

export type Labels = Readonly<Record<string, string>>;

/** One exported value and its labels. */
export interface Sample {
  labels: Labels;
  value: number;
}

/** Reads a family's samples at scrape time; a promise where the source is asynchronous (NVML on libuv's pool). */
export type ReadSamples = () => readonly Sample[] | Promise<readonly Sample[]>;

/** A counter whose values are cumulative totals read at scrape time (never inc()'d). */
export class ScrapedCounter extends Counter<string> {
  readonly #read: ReadSamples;

  constructor(name: string, help: string, read: ReadSamples) {
    super({ name, help, registers: [] });
    this.#read = read;
  }

  override async get(): ReturnType<Counter<string>['get']> {
    const base = await super.get();
    return { ...base, values: (await this.#read()).map((s) => ({ labels: s.labels, value: s.value })) };
  }
}

/** A gauge whose values are read at scrape time. */
export class ScrapedGauge extends Gauge<string> {
  readonly #read: ReadSamples;

  constructor(name: string, help: string, read: ReadSamples) {
    super({ name, help, registers: [] });
    this.#read = read;
  }

  override async get(): ReturnType<Gauge<string>['get']> {
    const base = await super.get();
    return { ...base, values: (await this.#read()).map((s) => ({ labels: s.labels, value: s.value })) };
  }
}

interface Child<M> {
  labels: Labels;
  metric: M;
}

type Exported = Awaited<ReturnType<Summary<string>['get']>>;

/** One unlabelled, unregistered prom-client metric per series, merged under the family's name at export. */
class SeriesChildren<M extends { get(): Promise<Exported> }> {
  readonly #children = new Map<string, Child<M>>();
  readonly #make: () => M;

  constructor(make: () => M) {
    this.#make = make;
  }

  /** The series' child, created on first use; `labels`, when given, replaces the labels it is exported with. */
  child(key: string, labels?: Labels): M {
    let c = this.#children.get(key);
    if (!c) {
      c = { labels: labels ?? {}, metric: this.#make() };
      this.#children.set(key, c);
    } else if (labels) c.labels = labels;
    return c.metric;
  }

  /** Drops the series not in `keep` (versions no longer served, as Triton drops an unloaded model's metrics). */
  retain(keep: ReadonlySet<string>): void {
    for (const key of this.#children.keys()) if (!keep.has(key)) this.#children.delete(key);
  }

  async export(base: Exported): Promise<Exported> {
    const parts = await Promise.all(
      [...this.#children.values()].map(async (c) => ({ labels: c.labels, obj: await c.metric.get() })),
    );
    const values = parts.flatMap((p) => p.obj.values.map((v) => ({ ...v, labels: { ...v.labels, ...p.labels } })));
    return { ...base, values };
  }
}

/** Options of a per-series summary; prom-client's own (t-digest with a sliding window). */
export interface SummaryShape {
  percentiles: number[];
  maxAgeSeconds: number;
  ageBuckets: number;
}

/** A summary with one child per series; `beforeExport` runs first so the caller can refresh series. */
export class SeriesSummary extends Summary<string> {
  readonly series: SeriesChildren<Summary<string>>;
  readonly #beforeExport: () => void;

  constructor(name: string, help: string, shape: SummaryShape, beforeExport: () => void) {
    super({ name, help, registers: [] });
    this.series = new SeriesChildren(() => new Summary({ name, help, registers: [], ...shape }));
    this.#beforeExport = beforeExport;
  }

  override async get(): ReturnType<Summary<string>['get']> {
    this.#beforeExport();
    return this.series.export({ ...(await super.get()), values: [] });
  }
}

/** A histogram with one child per series (children are zeroed so a served model shows before its first request). */
export class SeriesHistogram extends Histogram<string> {
  readonly series: SeriesChildren<Histogram<string>>;
  readonly #beforeExport: () => void;
  readonly #empty: Histogram<string>;
  /**
   * prom-client's registry prefers a histogram's `getForPromString()`; shadowing it makes the registry use the
   * `get()` below, which already returns the labels flattened.
   */
  readonly getForPromString = undefined;

  constructor(name: string, help: string, buckets: number[], beforeExport: () => void) {
    super({ name, help, buckets, registers: [] });
    const make = (): Histogram<string> => {
      const h = new Histogram({ name, help, buckets, registers: [] });
      h.zero({});
      return h;
    };
    this.series = new SeriesChildren(make);
    // Histogram's own get() goes through getForPromString, shadowed above; an empty child gives the base object.
    this.#empty = new Histogram({ name, help, buckets, registers: [] });
    this.#beforeExport = beforeExport;
  }

  override async get(): ReturnType<Histogram<string>['get']> {
    this.#beforeExport();
    return this.series.export(await this.#empty.get());
  }
}
