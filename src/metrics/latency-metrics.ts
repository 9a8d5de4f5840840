import type { Registry } from 'prom-client';
import type { Duration, ModelStats } from '../core/stats.js';
import type { MetricsConfig } from './config.js';
import { SeriesHistogram, SeriesSummary } from './families.js';
import { seriesKey, type ModelLabels } from './labels.js';
import type { InferenceObserver, RequestTimings } from './observer.js';
import type { MetricsSource } from './source.js';

/** Triton's default buckets of `nv_inference_first_response_histogram_ms`. */
export const FIRST_RESPONSE_BUCKETS_MS: readonly number[] = Object.freeze([100, 500, 2000, 5000]);

/**
 * prometheus-cpp's Summary defaults, which Triton uses: quantiles over a sliding 60 s window in 5 buckets. prom-client
 * estimates quantiles with a t-digest, so Triton's per-quantile error targets are not used.
 */
const SUMMARY_WINDOW = { maxAgeSeconds: 60, ageBuckets: 5 };

/**
 * Observations fed per series and scrape when backfilling from totals; the rest waits for the next scrape, so a
 * scrape never stalls on a burst of millions of un-hooked requests.
 */
const BACKFILL_CAP = 10_000;

interface Kind {
  name: string;
  help: string;
  /** The ModelStats total this family's observations add up to. */
  total(st: ModelStats): Duration;
  /** This request's value, in ns. */
  ns(t: RequestTimings): number;
}

const SUMMARIES: readonly Kind[] = [
  {
    name: 'nv_inference_request_summary_us',
    help: 'End-to-end time of successful requests, in microseconds',
    total: (st) => st.success,
    ns: (t) => t.totalNs,
  },
  {
    name: 'nv_inference_queue_summary_us',
    help: 'Time successful requests waited in the queue, in microseconds',
    total: (st) => st.queue,
    ns: (t) => t.queueNs,
  },
  {
    name: 'nv_inference_compute_input_summary_us',
    help: 'Time spent preparing inputs for the backend per request, in microseconds',
    total: (st) => st.computeInput,
    ns: (t) => t.computeInputNs,
  },
  {
    name: 'nv_inference_compute_infer_summary_us',
    help: 'Time the backend spent running the model per request, in microseconds',
    total: (st) => st.computeInfer,
    ns: (t) => t.computeInferNs,
  },
  {
    name: 'nv_inference_compute_output_summary_us',
    help: 'Time spent collecting outputs from the backend per request, in microseconds',
    total: (st) => st.computeOutput,
    ns: (t) => t.computeOutputNs,
  },
];

const FIRST_RESPONSE: Kind = {
  name: 'nv_inference_first_response_histogram_ms',
  help: 'Time from receiving a request to sending its first response, in milliseconds',
  total: (st) => st.success,
  ns: (t) => t.firstResponseNs ?? t.totalNs,
};

/** What one series has been fed so far: its count and ns, against the ModelStats they must add up to. */
interface Fed {
  count: number;
  ns: number;
  stats?: ModelStats;
}

/** A summary or histogram family with the bookkeeping that keeps it equal to ModelStats' totals. */
class ObservedFamily {
  readonly metric: SeriesSummary | SeriesHistogram;
  readonly #kind: Kind;
  /** ns per exported unit: 1e3 for µs summaries, 1e6 for the ms histogram. */
  readonly #unitNs: number;
  readonly #source: MetricsSource;
  readonly #labels: ModelLabels;
  readonly #fed = new Map<string, Fed>();

  constructor(
    kind: Kind,
    unitNs: number,
    deps: { source: MetricsSource; labels: ModelLabels },
    make: (beforeExport: () => void) => SeriesSummary | SeriesHistogram,
  ) {
    this.#kind = kind;
    this.#unitNs = unitNs;
    this.#source = deps.source;
    this.#labels = deps.labels;
    this.metric = make(() => this.#sync());
  }

  /** The series' labels are attached at the next scrape, when the source says what the version's tags are. */
  observe(key: string, t: RequestTimings): void {
    const ns = this.#kind.ns(t);
    const fed = this.#fed.get(key) ?? { count: 0, ns: 0 };
    fed.count += 1;
    fed.ns += ns;
    this.#fed.set(key, fed);
    this.metric.series.child(key).observe(ns / this.#unitNs);
  }

  /**
   * Runs before each export. Refreshes labels, drops versions no longer served, and — when requests reached
   * ModelStats without the observer hook (not wired, or metrics started late) — feeds the missing ones from the
   * totals' delta since the last scrape, each at the delta's mean. With the hook wired nothing is missing and the
   * quantiles are per-request exact; without it _sum and _count are still exact, but the quantiles are of
   * per-scrape means.
   */
  #sync(): void {
    const served = new Set<string>();
    for (const s of this.#source.models()) {
      const key = seriesKey(s.name, s.version);
      served.add(key);
      const child = this.metric.series.child(key, this.#labels.of(s));
      let fed = this.#fed.get(key);
      if (!fed || (fed.stats !== undefined && fed.stats !== s.stats)) {
        // First sight, or the version was reloaded with fresh ModelStats: count from zero against them.
        fed = { count: 0, ns: 0 };
        this.#fed.set(key, fed);
      }
      fed.stats = s.stats;
      const total = this.#kind.total(s.stats);
      const missing = total.count - fed.count;
      if (missing <= 0) continue;
      const n = Math.min(missing, BACKFILL_CAP);
      const mean = Math.max(0, (total.ns - fed.ns) / missing);
      for (let i = 0; i < n; i++) child.observe(mean / this.#unitNs);
      fed.count += n;
      fed.ns += mean * n;
    }
    this.metric.series.retain(served);
    for (const key of this.#fed.keys()) if (!served.has(key)) this.#fed.delete(key);
  }
}

/**
 * Registers the families `summary_latencies` and `histogram_latencies` enable, and returns the observer that feeds
 * them (a no-op when neither is on).
 */
export function registerLatencyMetrics(
  registry: Registry,
  source: MetricsSource,
  config: MetricsConfig,
  labels: ModelLabels,
): InferenceObserver {
  const deps = { source, labels };
  const families: ObservedFamily[] = [];
  if (config.summaryLatencies) {
    const shape = { ...SUMMARY_WINDOW, percentiles: config.summaryQuantiles.map((q) => q.quantile) };
    for (const kind of SUMMARIES) {
      families.push(
        new ObservedFamily(kind, 1e3, deps, (sync) => new SeriesSummary(kind.name, kind.help, shape, sync)),
      );
    }
  }
  if (config.histogramLatencies) {
    const buckets = [...FIRST_RESPONSE_BUCKETS_MS];
    const kind = FIRST_RESPONSE;
    families.push(
      new ObservedFamily(kind, 1e6, deps, (sync) => new SeriesHistogram(kind.name, kind.help, buckets, sync)),
    );
  }
  for (const f of families) registry.registerMetric(f.metric);
  return {
    requestSucceeded(model, version, timings) {
      if (families.length === 0) return;
      const key = seriesKey(model, version);
      for (const f of families) f.observe(key, timings);
    },
  };
}
