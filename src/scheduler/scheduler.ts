import type { EngineRequest, EngineResponse, ExecuteTimings } from '../backends/contract.js';
import type { Logger } from '../core/logger.js';
import type { ModelStats } from '../core/stats.js';
import type { InstancePool } from '../backends/runtime/pool.js';

/** Per-request scheduling hints (Triton's schedule_policy extension; honoured by the dynamic batcher). */
export interface ScheduleOptions {
  signal?: AbortSignal;
  /** 0 = the model's default level. */
  priority?: number;
  /** Queue timeout in microseconds, 0 = none. */
  timeoutUs?: number;
  /**
   * Decoupled models: called for every response as it arrives; the promise then settles at the final flag
   * with the last response (or none). A returned promise means the response is not taken yet (its client's
   * transport is full): the transport asks the engine to wait (backpressure) until it settles.
   */
  onResponse?: (response: EngineResponse) => void | Promise<void>;
  /** Sequence flags (the request's `sequence_start` / `sequence_end`); read by the sequence batcher only. */
  sequence?: { start: boolean; end: boolean };
}

/** A request's (final) response with the time it waited in the queue (for the statistics extension). */
export interface ScheduledResult extends EngineResponse {
  timings: ExecuteTimings;
  queueNs: number;
  /**
   * When its batch started (process.hrtime), where it ran in one: the trace's COMPUTE_START, the same instant for
   * every request of the batch, so that batches run one after another never overlap in the trace (a start derived
   * from each request's own queue time, whose clock starts a little apart from the pipeline's, could).
   */
  computeStart?: bigint;
  /** Rows of the batch the request ran in (its own batch size when run alone). */
  executedBatchSize: number;
}

/** What a scheduler is built from. */
export interface SchedulerContext {
  /** Statistics of the model version; the scheduler records one execution per batch it runs. */
  stats: ModelStats;
  /** The model's max_batch_size (0 = no batching). */
  maxBatchSize: number;
  /** The instances it dispatches to; it takes an idle one per batch and gives it back. */
  pool: InstancePool;
  /** Debug line per batch (model and version bound by the caller); defaults to no logging. */
  logger?: Logger;
}

/**
 * Triton's scheduler shape: enqueue one request, get its result, stop. Implementations: direct, dynamic batcher,
 * sequence batcher (`sequence/`) and ensemble (`ensemble/`).
 */
export interface Scheduler {
  /** `request.batchSize` is its first dim when the model batches, else 1. Inputs are handed over (see contract). */
  enqueue(request: EngineRequest, opts?: ScheduleOptions): Promise<ScheduledResult>;
  /** Requests queued but not executing. */
  readonly pending: number;
  /** The model has no healthy instance and is not expected back soon: fail what is queued with `err`. */
  failQueued(err: Error): void;
  /** Stop accepting, let queued and executing requests finish; idempotent. */
  stop(): Promise<void>;
}
