import type { ExecuteRequest, ExecuteResult } from '../backends/backend.js';

/** Per-request scheduling hints (Triton's schedule_policy extension; honoured by the dynamic batcher). */
export interface ScheduleOptions {
  signal?: AbortSignal;
  /** 0 = the model's default level. */
  priority?: number;
  /** Queue timeout in microseconds, 0 = none. */
  timeoutUs?: number;
}

/**
 * Triton's scheduler shape: enqueue one request, get its result, stop. Implementations: direct (here),
 * dynamic batcher, and later sequence and ensemble schedulers.
 */
export interface Scheduler {
  /** Batch size the request counts as (its first dim when the model batches, else 1) is already in the shapes. */
  enqueue(request: ExecuteRequest, opts?: ScheduleOptions): Promise<ExecuteResult>;
  /** Requests queued but not executing. */
  readonly pending: number;
  /** Stop accepting, let queued and executing requests finish; idempotent. */
  stop(): Promise<void>;
}
