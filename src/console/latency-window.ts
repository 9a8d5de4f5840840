import type { InferenceObserver, RequestTimings } from '../metrics/observer.js';

/** Samples kept per model: at 10k req/s the last ~0.4 s, at 100 req/s the last 40 s; enough for a 1 s chart tick. */
const CAPACITY = 4096;

/** A fixed ring of (time, total, queue) per model; written on the request path, so O(1) and allocation-free. */
class Samples {
  readonly at = new Float64Array(CAPACITY);
  readonly totalUs = new Float64Array(CAPACITY);
  readonly queueUs = new Float64Array(CAPACITY);
  count = 0;

  add(now: number, t: RequestTimings): void {
    const i = this.count++ % CAPACITY;
    this.at[i] = now;
    this.totalUs[i] = t.totalNs / 1000;
    this.queueUs[i] = t.queueNs / 1000;
  }
}

/** Percentiles of one model over a recent window, in microseconds. */
export interface LatencySummary {
  model: string;
  /** Successful requests in the window (as kept: at most the ring's capacity). */
  count: number;
  p50_us: number;
  p90_us: number;
  p99_us: number;
  queue_p50_us: number;
  queue_p99_us: number;
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/**
 * Request latencies for the console's charts. Triton's statistics keep totals only (a mean per interval); the
 * percentiles need each request's time, which the server hands its observer once per successful request (on the
 * main thread). Failed requests are not counted, as in Triton's latency summaries.
 */
export class LatencyWindow implements InferenceObserver {
  readonly #models = new Map<string, Samples>();
  readonly #now: () => number;

  constructor(now: () => number = () => performance.now()) {
    this.#now = now;
  }

  requestSucceeded(model: string, _version: number, timings: RequestTimings): void {
    let s = this.#models.get(model);
    if (s === undefined) this.#models.set(model, (s = new Samples()));
    s.add(this.#now(), timings);
  }

  /** Per model, the requests of the last `windowMs`; models without one are left out. */
  summary(windowMs: number): LatencySummary[] {
    const since = this.#now() - windowMs;
    const out: LatencySummary[] = [];
    for (const [model, s] of this.#models) {
      const kept = Math.min(s.count, CAPACITY);
      const total: number[] = [];
      const queue: number[] = [];
      for (let k = 0; k < kept; k++) {
        if (s.at[k] < since) continue;
        total.push(s.totalUs[k]);
        queue.push(s.queueUs[k]);
      }
      if (total.length === 0) continue;
      const t = Float64Array.from(total).sort();
      const q = Float64Array.from(queue).sort();
      out.push({
        model,
        count: t.length,
        p50_us: percentile(t, 50),
        p90_us: percentile(t, 90),
        p99_us: percentile(t, 99),
        queue_p50_us: percentile(q, 50),
        queue_p99_us: percentile(q, 99),
      });
    }
    return out.sort((a, b) => a.model.localeCompare(b.model));
  }
}

/** One observer that hands each request to several (the metrics endpoint's and the console's). */
export function fanOutObserver(observers: readonly InferenceObserver[]): InferenceObserver {
  if (observers.length === 1) return observers[0];
  return {
    requestSucceeded(model, version, timings) {
      for (const o of observers) o.requestSucceeded(model, version, timings);
    },
  };
}
