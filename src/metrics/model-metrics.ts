import type { Registry } from 'prom-client';
import type { FailureReason, ModelStats } from '../core/stats.js';
import type { MetricsConfig } from './config.js';
import { ScrapedCounter, ScrapedGauge, type Sample } from './families.js';
import type { ModelLabels } from './labels.js';
import type { MetricsSource, ModelSeries } from './source.js';

/** A family read from one number of each served version. */
interface Family<T> {
  name: string;
  help: string;
  value(x: T): number | undefined;
}

/** ns totals become whole µs, as Triton's counters count (still monotonic, because the totals are). */
const us = (ns: number): number => Math.floor(ns / 1000);

const COUNTS: readonly Family<ModelStats>[] = [
  {
    name: 'nv_inference_request_success',
    help: 'Requests that completed successfully (a batched request counts once)',
    value: (st) => st.success.count,
  },
  {
    name: 'nv_inference_count',
    help: 'Inferences performed (a request of batch size n counts n)',
    value: (st) => st.inferenceCount,
  },
  {
    name: 'nv_inference_exec_count',
    help: 'Model executions, one per batch the backend ran',
    value: (st) => st.executionCount,
  },
];

/** Triton's `counter_latencies` family: cumulative microseconds of successful requests. */
const LATENCY_COUNTERS: readonly Family<ModelStats>[] = [
  {
    name: 'nv_inference_request_duration_us',
    help: 'Total end-to-end time of successful requests, in microseconds',
    value: (st) => us(st.success.ns),
  },
  {
    name: 'nv_inference_queue_duration_us',
    help: 'Total time successful requests waited in the queue, in microseconds',
    value: (st) => us(st.queue.ns),
  },
  {
    name: 'nv_inference_compute_input_duration_us',
    help: 'Total time spent preparing inputs for the backend, in microseconds',
    value: (st) => us(st.computeInput.ns),
  },
  {
    name: 'nv_inference_compute_infer_duration_us',
    help: 'Total time the backend spent running the model, in microseconds',
    value: (st) => us(st.computeInfer.ns),
  },
  {
    name: 'nv_inference_compute_output_duration_us',
    help: 'Total time spent collecting outputs from the backend, in microseconds',
    value: (st) => us(st.computeOutput.ns),
  },
];

/** Triton's per-model response cache counters; only versions whose responses are cached have them. */
const CACHE_COUNTERS: readonly Family<ModelStats>[] = [
  {
    name: 'nv_cache_num_hits_per_model',
    help: 'Requests answered from the response cache',
    value: (st) => st.cache?.hit.count,
  },
  {
    name: 'nv_cache_num_misses_per_model',
    help: 'Requests not found in the response cache',
    value: (st) => st.cache?.miss.count,
  },
  {
    name: 'nv_cache_hit_duration_per_model',
    help: 'Total time of response cache lookups that hit, in microseconds',
    value: (st) => st.cache && us(st.cache.hit.ns),
  },
  {
    name: 'nv_cache_miss_duration_per_model',
    help: 'Total time of response cache lookups that missed plus the insertions after them, in microseconds',
    value: (st) => st.cache && us(st.cache.miss.ns),
  },
];

const GAUGES: readonly Family<ModelSeries>[] = [
  {
    name: 'nv_inference_pending_request_count',
    help: 'Requests waiting in the queue, not yet executing',
    value: (s) => s.pending,
  },
  {
    name: 'nv_model_load_duration_secs',
    help: 'Seconds it took to load the model version',
    value: (s) => s.loadSeconds,
  },
  // Nereid's own (Triton has no instance health): named nereid_*, not nv_*.
  {
    name: 'nereid_model_instances_healthy',
    help: 'Instances of the model version able to run now (dead ones are being restarted)',
    value: (s) => s.healthyInstances,
  },
  {
    name: 'nereid_model_instances',
    help: 'Instances the model version has when every one is healthy',
    value: (s) => s.instances,
  },
];

const REASONS: readonly FailureReason[] = ['REJECTED', 'CANCELED', 'BACKEND', 'OTHER'];

/**
 * Registers the per-model counters and gauges. They hold no state: each scrape reads the cumulative totals of
 * ModelStats, so they never drift from the statistics extension, and a version no longer served leaves the next
 * scrape.
 */
export function registerModelMetrics(
  registry: Registry,
  source: MetricsSource,
  config: MetricsConfig,
  labels: ModelLabels,
): void {
  const samples = (value: (s: ModelSeries) => number | undefined) => (): Sample[] => {
    const out: Sample[] = [];
    for (const s of source.models()) {
      const v = value(s);
      if (v !== undefined) out.push({ labels: labels.of(s), value: v });
    }
    return out;
  };
  const counters = [...COUNTS, ...(config.counterLatencies ? LATENCY_COUNTERS : []), ...CACHE_COUNTERS];
  for (const f of counters) {
    registry.registerMetric(
      new ScrapedCounter(
        f.name,
        f.help,
        samples((s) => f.value(s.stats)),
      ),
    );
  }
  registry.registerMetric(
    new ScrapedCounter('nv_inference_request_failure', 'Requests that failed, by reason', () => {
      const out: Sample[] = [];
      for (const s of source.models()) {
        const base = labels.of(s);
        for (const reason of REASONS) out.push({ labels: { ...base, reason }, value: s.stats.failures[reason] });
      }
      return out;
    }),
  );
  for (const f of GAUGES) registry.registerMetric(new ScrapedGauge(f.name, f.help, samples(f.value)));
}
