import { InternalError, InvalidArgError, NotFoundError, UnsupportedError } from './errors.js';

/**
 * Custom metrics a model defines at run time (Triton's TRITONSERVER_MetricFamily / TRITONSERVER_Metric, which the
 * python backend's `pb_utils.MetricFamily` reaches), held for the metrics endpoint to export.
 *
 * Rules, as Triton's core and its prometheus-cpp registry have them: one family per name server-wide, shared by
 * everyone who creates it again with the same kind (a different kind is refused); metrics with equal labels in one
 * family are one series, counted by reference and dropped with the last reference. Every family and metric handle
 * belongs to an owner (a backend's process); `release(owner)` drops all of them, so a model's metrics go when it
 * unloads (or its process dies). A family no handle refers to is no longer exported.
 *
 * Threading: main thread only.
 */

export type CustomMetricKind = 'counter' | 'gauge' | 'histogram';

const TRITON_KIND: Record<CustomMetricKind, string> = {
  counter: 'TRITONSERVER_METRIC_KIND_COUNTER',
  gauge: 'TRITONSERVER_METRIC_KIND_GAUGE',
  histogram: 'TRITONSERVER_METRIC_KIND_HISTOGRAM',
};

/** Prometheus' metric and label name rules (a label may not start with `__`, which Prometheus reserves). */
const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** One exported series: a value (counter, gauge) or bucket counts (histogram, `counts[i]` for `le` = buckets[i]). */
export interface CustomSeries {
  readonly labels: Readonly<Record<string, string>>;
  value: number;
  readonly buckets?: readonly number[];
  counts?: number[];
  sum: number;
  count: number;
  refs: number;
}

export interface CustomFamily {
  readonly name: string;
  readonly help: string;
  readonly kind: CustomMetricKind;
  handles: number;
  readonly series: Map<string, CustomSeries>;
}

interface FamilyHandle {
  owner: object;
  family: CustomFamily;
  metrics: Set<number>;
}

interface MetricHandle {
  owner: object;
  family: CustomFamily;
  familyHandle: number;
  key: string;
  series: CustomSeries;
}

/** The operations a metric handle takes. */
export type MetricOp = 'increment' | 'set' | 'observe';

export class CustomMetrics {
  readonly #families = new Map<string, CustomFamily>();
  readonly #familyHandles = new Map<number, FamilyHandle>();
  readonly #metricHandles = new Map<number, MetricHandle>();
  #nextId = 1;

  /** The families exported now (those some handle refers to). */
  families(): Iterable<CustomFamily> {
    return this.#families.values();
  }

  createFamily(owner: object, name: string, help: string, kind: CustomMetricKind): number {
    if (!(kind in TRITON_KIND)) throw new InvalidArgError('Unsupported kind passed to MetricFamily constructor.');
    if (!METRIC_NAME.test(name)) throw new InvalidArgError('Invalid metric name');
    let family = this.#families.get(name);
    if (family !== undefined && family.kind !== kind) {
      throw new InvalidArgError('Family name already exists with different type');
    }
    if (family === undefined) {
      family = { name, help, kind, handles: 0, series: new Map() };
      this.#families.set(name, family);
    }
    family.handles += 1;
    const id = this.#nextId++;
    this.#familyHandles.set(id, { owner, family, metrics: new Set() });
    return id;
  }

  /** Drops a family handle and every metric made through it. */
  deleteFamily(owner: object, id: number): void {
    const h = this.#familyHandles.get(id);
    if (h === undefined || h.owner !== owner) return;
    for (const m of h.metrics) this.deleteMetric(owner, m);
    this.#familyHandles.delete(id);
    h.family.handles -= 1;
    if (h.family.handles === 0) this.#families.delete(h.family.name);
  }

  createMetric(
    owner: object,
    familyId: number,
    labels: Readonly<Record<string, string>>,
    buckets?: readonly number[],
  ): number {
    const fh = this.#familyHandles.get(familyId);
    if (fh === undefined || fh.owner !== owner) throw new NotFoundError(`unknown metric family handle ${familyId}`);
    const family = fh.family;
    checkLabels(labels);
    if (family.kind === 'histogram') {
      if (buckets === undefined) throw new InvalidArgError('Bucket boundaries not found in Metric args.');
      checkBuckets(buckets);
    } else if (buckets !== undefined) {
      throw new InvalidArgError(`Unexpected args found in ${family.kind} Metric constructor.`);
    }
    const key = labelsKey(labels);
    let series = family.series.get(key);
    if (series === undefined) {
      series = { labels: { ...labels }, value: 0, sum: 0, count: 0, refs: 0 };
      if (buckets !== undefined) Object.assign(series, { buckets: [...buckets], counts: buckets.map(() => 0) });
      family.series.set(key, series);
    }
    series.refs += 1;
    const id = this.#nextId++;
    this.#metricHandles.set(id, { owner, family, familyHandle: familyId, key, series });
    fh.metrics.add(id);
    return id;
  }

  deleteMetric(owner: object, id: number): void {
    const h = this.#metricHandles.get(id);
    if (h === undefined || h.owner !== owner) return;
    this.#metricHandles.delete(id);
    this.#familyHandles.get(h.familyHandle)?.metrics.delete(id);
    h.series.refs -= 1;
    if (h.series.refs === 0 && h.family.series.get(h.key) === h.series) h.family.series.delete(h.key);
  }

  /** increment / set / observe, with Triton's refusals for the kinds that do not take them. */
  apply(owner: object, id: number, op: MetricOp, value: number): void {
    const { family, series } = this.#metric(owner, id, op);
    if (typeof value !== 'number') throw new InvalidArgError(`metric ${op} takes a number, got ${typeof value}`);
    const kind = family.kind;
    if (op === 'increment') {
      if (kind === 'histogram') throw new UnsupportedError(`${TRITON_KIND[kind]} does not support Increment`);
      if (kind === 'counter' && value < 0) {
        throw new InvalidArgError(
          'TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by non-negative values.',
        );
      }
      series.value += value;
    } else if (op === 'set') {
      if (kind !== 'gauge') throw new UnsupportedError(`${TRITON_KIND[kind]} does not support Set`);
      series.value = value;
    } else {
      if (kind !== 'histogram') throw new UnsupportedError(`${TRITON_KIND[kind]} does not support Observe`);
      observe(series, value);
    }
  }

  value(owner: object, id: number): number {
    const { family, series } = this.#metric(owner, id, 'value');
    if (family.kind === 'histogram') throw new UnsupportedError(`${TRITON_KIND.histogram} does not support Value`);
    return series.value;
  }

  /** Drops every handle `owner` holds (its process ended: the model unloaded or its instance died). */
  release(owner: object): void {
    for (const [id, h] of this.#familyHandles) if (h.owner === owner) this.deleteFamily(owner, id);
  }

  #metric(owner: object, id: number, op: string): MetricHandle {
    const h = this.#metricHandles.get(id);
    if (h === undefined || h.owner !== owner) {
      throw new InternalError(`Could not ${op === 'value' ? 'get' : op} metric value. Metric has been invalidated.`);
    }
    return h;
  }
}

function checkLabels(labels: Readonly<Record<string, string>>): void {
  if (labels === null || typeof labels !== 'object' || Array.isArray(labels)) {
    throw new InvalidArgError('Failed to create metric. Labels must be a dictionary.');
  }
  for (const [k, v] of Object.entries(labels)) {
    if (!LABEL_NAME.test(k) || k.startsWith('__')) throw new InvalidArgError(`Invalid label name '${k}'`);
    if (typeof v !== 'string') {
      throw new InvalidArgError(
        `Parameter [${k}] must have a type of TRITONSERVER_PARAMETER_STRING to be added as a label.`,
      );
    }
  }
}

function checkBuckets(buckets: readonly number[]): void {
  if (!Array.isArray(buckets) || buckets.some((b) => typeof b !== 'number' || Number.isNaN(b))) {
    throw new InvalidArgError('Failed to create metric. Buckets must be a list.');
  }
  for (let i = 1; i < buckets.length; i++) {
    if (!(buckets[i - 1] < buckets[i])) throw new InvalidArgError('Bucket Boundaries must be strictly sorted');
  }
}

function observe(series: CustomSeries, value: number): void {
  const buckets = series.buckets ?? [];
  const counts = series.counts ?? [];
  // Non-cumulative counts; the exporter sums them into Prometheus' cumulative `le` buckets.
  const i = buckets.findIndex((b) => value <= b);
  if (i >= 0) counts[i] += 1;
  series.sum += value;
  series.count += 1;
}

/** Labels in name order, so `{a, b}` and `{b, a}` are one series. */
function labelsKey(labels: Readonly<Record<string, string>>): string {
  return JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
