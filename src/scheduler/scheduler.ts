import type { ExecuteRequest, ExecuteResult } from '../backends/backend.js';
import type { Logger } from '../core/logger.js';
import type { ModelStats } from '../core/stats.js';

/** Per-request scheduling hints (Triton's schedule_policy extension; honoured by the dynamic batcher). */
export interface ScheduleOptions {
  signal?: AbortSignal;
  /** 0 = the model's default level. */
  priority?: number;
  /** Queue timeout in microseconds, 0 = none. */
  timeoutUs?: number;
}

/** A request's result with the time it waited in the queue (for the statistics extension). */
export interface ScheduledResult extends ExecuteResult {
  queueNs: number;
  /** Size of the batch the request ran in (its own batch size when run alone). */
  executedBatchSize: number;
}

/** What a scheduler is built from. */
export interface SchedulerContext {
  /** Statistics of the model version; the scheduler records one execution per batch it runs. */
  stats: ModelStats;
  /** The model's max_batch_size (0 = no batching). */
  maxBatchSize: number;
  /** Debug line per batch (model and version bound by the caller); defaults to no logging. */
  logger?: Logger;
}

/**
 * Triton's scheduler shape: enqueue one request, get its result, stop. Implementations: direct (here),
 * dynamic batcher, and later sequence and ensemble schedulers.
 */
export interface Scheduler {
  /** `batchSize` is the request's first dim when the model batches, else 1. */
  enqueue(request: ExecuteRequest, batchSize: number, opts?: ScheduleOptions): Promise<ScheduledResult>;
  /** Requests queued but not executing. */
  readonly pending: number;
  /** Stop accepting, let queued and executing requests finish; idempotent. */
  stop(): Promise<void>;
}
