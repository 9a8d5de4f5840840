/**
 * Per-model-version statistics, Triton's statistics extension shape, measured where the work happens:
 * schedulers record executions (one per batch), the server records requests. Read by the statistics
 * endpoints and the Prometheus metrics. Not thread-shared: everything runs on the main thread.
 */

/** Triton's StatisticDuration: how many, and their total nanoseconds. */
export interface Duration {
  count: number;
  ns: number;
}

export interface ComputeTimings {
  computeInputNs: number;
  computeInferNs: number;
  computeOutputNs: number;
}

export interface BatchStats {
  batch_size: number;
  compute_input: Duration;
  compute_infer: Duration;
  compute_output: Duration;
}

export type FailureReason = 'REJECTED' | 'CANCELED' | 'BACKEND' | 'OTHER';

const zero = (): Duration => ({ count: 0, ns: 0 });
const add = (d: Duration, ns: number): void => {
  d.count += 1;
  d.ns += ns;
};

export class ModelStats {
  /** Requests that succeeded / failed, with their end-to-end durations. */
  readonly success = zero();
  readonly fail = zero();
  readonly queue = zero();
  readonly computeInput = zero();
  readonly computeInfer = zero();
  readonly computeOutput = zero();
  /** Inferences: a request of batch size n counts n. */
  inferenceCount = 0;
  /** Model executions (batches). */
  executionCount = 0;
  /** Milliseconds since the epoch of the last request, 0 when none. */
  lastInference = 0;
  readonly failures: Record<FailureReason, number> = { REJECTED: 0, CANCELED: 0, BACKEND: 0, OTHER: 0 };
  readonly batches = new Map<number, BatchStats>();
  /**
   * Response cache hits (lookup time) and misses (lookup plus insertion time); undefined while the version has no
   * cache (Triton then reports zeros and exports no cache metrics for it).
   */
  cache: { hit: Duration; miss: Duration } | undefined;

  /** Turns on the cache counters (the loader does, for a version whose responses are cached). */
  enableCache(): void {
    this.cache ??= { hit: zero(), miss: zero() };
  }

  /** A request answered from the cache: a success, but no inference and no execution (Triton's counting). */
  recordCacheHit(totalNs: number, lookupNs: number): void {
    add(this.success, totalNs);
    if (this.cache) add(this.cache.hit, lookupNs);
    this.lastInference = Date.now();
  }

  /** A request that missed the cache; the request itself is recorded as usual. */
  recordCacheMiss(ns: number): void {
    if (this.cache) add(this.cache.miss, ns);
  }

  /** One execution of a batch of `batchSize` (recorded by the scheduler). */
  recordExecution(batchSize: number, t: ComputeTimings): void {
    this.executionCount += 1;
    let b = this.batches.get(batchSize);
    if (!b) {
      b = { batch_size: batchSize, compute_input: zero(), compute_infer: zero(), compute_output: zero() };
      this.batches.set(batchSize, b);
    }
    add(b.compute_input, t.computeInputNs);
    add(b.compute_infer, t.computeInferNs);
    add(b.compute_output, t.computeOutputNs);
  }

  /** One successful request: its end-to-end time, its time queued, and its batch's compute times. */
  recordSuccess(batchSize: number, totalNs: number, queueNs: number, t: ComputeTimings): void {
    add(this.success, totalNs);
    add(this.queue, queueNs);
    add(this.computeInput, t.computeInputNs);
    add(this.computeInfer, t.computeInferNs);
    add(this.computeOutput, t.computeOutputNs);
    this.inferenceCount += batchSize;
    this.lastInference = Date.now();
  }

  recordFailure(totalNs: number, reason: FailureReason): void {
    add(this.fail, totalNs);
    this.failures[reason] += 1;
    this.lastInference = Date.now();
  }
}
