import type { BackendInstance, ExecuteRequest, ExecuteResult } from '../backends/backend.js';
import { CancelledError, UnavailableError } from '../core/errors.js';
import { CancelWatch } from './cancel-watch.js';
import type { ScheduledResult, Scheduler, SchedulerContext, ScheduleOptions } from './scheduler.js';

interface Pending {
  request: ExecuteRequest;
  batchSize: number;
  enqueuedAt: bigint;
  signal?: AbortSignal;
  resolve(r: ScheduledResult): void;
  reject(e: unknown): void;
}

/**
 * No batching: each request runs alone on the first free instance, in arrival order. Instances run
 * concurrently (each owns a worker thread), so N instances serve N requests at a time.
 */
export class DirectScheduler implements Scheduler {
  readonly #idle: BackendInstance[];
  readonly #ctx: SchedulerContext;
  readonly #queue: Pending[] = [];
  /** Queued requests whose signal aborts leave the queue and are answered CANCELLED. */
  readonly #cancels = new CancelWatch<Pending>((item) => {
    const i = this.#queue.indexOf(item);
    if (i < 0) return;
    this.#queue.splice(i, 1);
    item.reject(new CancelledError('request was cancelled while queued'));
    this.#checkDrained();
  });
  #inflight = 0;
  #stopped = false;
  #drained: (() => void) | undefined;

  constructor(instances: readonly BackendInstance[], ctx: SchedulerContext) {
    this.#idle = [...instances];
    this.#ctx = ctx;
  }

  get pending(): number {
    return this.#queue.length;
  }

  enqueue(request: ExecuteRequest, batchSize: number, opts: ScheduleOptions = {}): Promise<ScheduledResult> {
    if (this.#stopped) return Promise.reject(new UnavailableError('model is being unloaded'));
    const { signal } = opts;
    if (signal?.aborted) return Promise.reject(new CancelledError('request was cancelled before it was scheduled'));
    return new Promise<ScheduledResult>((resolve, reject) => {
      const item: Pending = { request, batchSize, enqueuedAt: process.hrtime.bigint(), signal, resolve, reject };
      this.#cancels.watch(signal, item);
      this.#queue.push(item);
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#idle.length > 0 && this.#queue.length > 0) {
      const item = this.#queue.shift() as Pending;
      const instance = this.#idle.shift() as BackendInstance;
      this.#cancels.unwatch(item.signal, item);
      this.#inflight++;
      const queueNs = Number(process.hrtime.bigint() - item.enqueuedAt);
      instance
        .execute(item.request)
        .then((r: ExecuteResult) => {
          this.#ctx.stats.recordExecution(item.batchSize, r.timings);
          item.resolve({ ...r, queueNs, executedBatchSize: item.batchSize });
        }, item.reject)
        .finally(() => {
          this.#inflight--;
          this.#idle.push(instance);
          this.#pump();
          this.#checkDrained();
        });
    }
  }

  #checkDrained(): void {
    if (this.#stopped && this.#inflight === 0 && this.#queue.length === 0) this.#drained?.();
  }

  stop(): Promise<void> {
    this.#stopped = true;
    if (this.#inflight === 0 && this.#queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const prev = this.#drained;
      this.#drained = () => {
        prev?.();
        resolve();
      };
    });
  }
}
