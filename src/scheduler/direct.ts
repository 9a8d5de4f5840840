import type { EngineRequest, Instance } from '../backends/contract.js';
import { CancelWatch } from '../core/cancel-watch.js';
import { CancelledError } from '../core/errors.js';
import { Drain } from './drain.js';
import { BatchCancels, runBatch, type Member } from './run-batch.js';
import type { ScheduledResult, Scheduler, SchedulerContext, ScheduleOptions } from './scheduler.js';

/**
 * No batching: each request runs alone on the first free instance, in arrival order. Instances run
 * concurrently (each in its own thread or process, or awaiting), so N instances serve N requests at a time.
 */
export class DirectScheduler implements Scheduler {
  readonly #ctx: SchedulerContext;
  readonly #queue: Member[] = [];
  /** Queued requests whose signal aborts leave the queue and are answered CANCELLED. */
  readonly #cancels = new CancelWatch<Member>((item) => {
    const i = this.#queue.indexOf(item);
    if (i < 0) return;
    this.#queue.splice(i, 1);
    item.reject(new CancelledError('request was cancelled while queued'));
    this.#drain.check();
  });
  readonly #running = new BatchCancels();
  readonly #drain = new Drain(() => this.#queue.length);

  constructor(ctx: SchedulerContext) {
    this.#ctx = ctx;
    ctx.pool.on({ idle: () => this.#pump() });
  }

  get pending(): number {
    return this.#queue.length;
  }

  enqueue(request: EngineRequest, opts: ScheduleOptions = {}): Promise<ScheduledResult> {
    if (this.#drain.stopping) return this.#drain.refusal();
    const { signal, onResponse } = opts;
    if (signal?.aborted) return Promise.reject(new CancelledError('request was cancelled before it was scheduled'));
    return new Promise<ScheduledResult>((resolve, reject) => {
      const item: Member = { request, enqueuedAt: performance.now(), signal, onResponse, resolve, reject };
      this.#cancels.watch(signal, item);
      this.#queue.push(item);
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#queue.length > 0) {
      const instance = this.#ctx.pool.take();
      if (instance === undefined) return;
      const item = this.#queue.shift() as Member;
      this.#cancels.unwatch(item.signal, item);
      this.#run(instance, item);
    }
  }

  #run(instance: Instance, item: Member): void {
    this.#drain.begin();
    const freed = (): void => {
      this.#ctx.pool.give(instance);
      this.#pump();
    };
    void runBatch(instance, [item], this.#ctx, this.#running, (_m, answer) => answer(), freed).finally(() => {
      this.#drain.end();
      this.#pump();
    });
  }

  failQueued(err: Error): void {
    for (const item of this.#queue.splice(0)) {
      this.#cancels.unwatch(item.signal, item);
      item.reject(err);
    }
    this.#drain.check();
  }

  /** Stops accepting; what is queued still runs. Idempotent. */
  stop(): Promise<void> {
    return this.#drain.stop();
  }
}
