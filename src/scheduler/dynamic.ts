import { performance } from 'node:perf_hooks';
import { oncePerTurn } from './once-per-turn.js';
import type { EngineRequest, Instance } from '../backends/contract.js';
import type { ModelDynamicBatching } from '../config/model-config.js';
import { CancelWatch } from '../core/cancel-watch.js';
import { CancelledError, UnavailableError } from '../core/errors.js';
import { Drain } from './drain.js';
import { canMerge } from './batch.js';
import { BatchCancels, runBatch, type Member } from './run-batch.js';
import { PriorityQueues, type QueueEntry } from './queue.js';
import type { ScheduledResult, Scheduler, SchedulerContext, ScheduleOptions } from './scheduler.js';

/** Batcher settings, read once from the model config. */
export interface DynamicBatcherOptions {
  batching: ModelDynamicBatching;
  /** Inputs declared `allow_ragged_batch`: their shapes need not match to share a batch. */
  raggedInputs?: ReadonlySet<string>;
}

interface Item extends QueueEntry, Member {
  /** preserve_ordering: the answer, held until every earlier request has been answered. */
  answer?: () => void;
  /** preserve_ordering: left the queue without running (its error went out at once). */
  skipped?: boolean;
}

/** What the policy decided for the queue head: run these now, or wait until `until` (ms). */
type Plan = { run: Item[] } | { wait: number } | null;

/**
 * Triton's dynamic batcher. Requests wait in priority queues; whenever an instance is free, ONE pump
 * (run on enqueue, on completion, on abort and on its single timer) takes the longest compatible run of
 * queued requests up to max_batch_size, applying Triton's preferred-size and queue-delay rules, and
 * executes it as one batch. The timer, when set, is for the earliest of the batch delay and the next
 * queue timeout, so timeouts fire on time even while every instance is busy.
 *
 * Threading: everything here runs on the main thread; the instances do the work elsewhere (worker
 * threads), so the pump stays short: O(queue) per batch.
 */
export class DynamicBatcher implements Scheduler {
  readonly #ctx: SchedulerContext;
  readonly #queue: PriorityQueues<Item>;
  readonly #ragged: ReadonlySet<string>;
  readonly #maxBatch: number;
  readonly #preferred: ReadonlySet<number>;
  /** Largest preferred size (max_batch_size when none): past it the batch is "full enough". */
  readonly #maxPreferred: number;
  readonly #delayMs: number;
  /** Arrival order of unanswered requests (preserve_ordering only); `#head` skips answered ones. */
  readonly #order: Item[] | undefined;
  #head = 0;
  #timer: NodeJS.Timeout | undefined;
  #immediate: NodeJS.Immediate | undefined;
  #timerAt = Infinity;
  /** The pump, once per turn of the event loop however often asked (once-per-turn.ts). */
  readonly #schedulePump = oncePerTurn(() => this.#pump());
  readonly #running = new BatchCancels();
  readonly #drain: Drain;
  /** A queued request whose signal aborts leaves the queue and is answered CANCELLED. */
  readonly #cancels = new CancelWatch<Item>((item) => {
    if (this.#queue.remove(item)) this.#fail(item, new CancelledError('request was cancelled while queued'));
    this.#schedulePump();
  });

  constructor(ctx: SchedulerContext, opts: DynamicBatcherOptions) {
    this.#ctx = ctx;
    // The rate limiter's wake-up pumps at once: its priority order depends on who takes first.
    ctx.pool.on({ idle: () => this.#schedulePump(), wake: () => this.#pump() });
    this.#queue = new PriorityQueues<Item>(opts.batching);
    this.#drain = new Drain(() => this.#queue.size);
    this.#ragged = opts.raggedInputs ?? new Set();
    this.#maxBatch = Math.max(1, ctx.maxBatchSize);
    const preferred = (opts.batching.preferred_batch_size ?? []).filter((n) => n > 0 && n <= this.#maxBatch);
    this.#preferred = new Set(preferred);
    this.#maxPreferred = preferred.length > 0 ? Math.max(...preferred) : this.#maxBatch;
    this.#delayMs = (opts.batching.max_queue_delay_microseconds ?? 0) / 1000;
    this.#order = opts.batching.preserve_ordering ? [] : undefined;
  }

  get pending(): number {
    return this.#queue.size;
  }

  enqueue(request: EngineRequest, opts: ScheduleOptions = {}): Promise<ScheduledResult> {
    if (this.#drain.stopping) return this.#drain.refusal();
    const { signal, onResponse } = opts;
    if (signal?.aborted) return Promise.reject(new CancelledError('request was cancelled before it was scheduled'));
    let level: number;
    try {
      level = this.#queue.levelFor(opts.priority);
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise<ScheduledResult>((resolve, reject) => {
      const item: Item = {
        request,
        batchSize: request.batchSize,
        enqueuedAt: performance.now(),
        level,
        deadline: 0,
        signal,
        onResponse,
        resolve,
        reject,
      };
      try {
        this.#queue.push(item, level, opts.timeoutUs);
      } catch (err) {
        reject(err);
        return;
      }
      this.#order?.push(item);
      this.#cancels.watch(signal, item);
      this.#schedulePump();
    });
  }

  #pump(): void {
    const now = performance.now();
    for (const it of this.#queue.expire(now)) this.#fail(it, new UnavailableError('Request timeout expired'));
    let waitUntil = Infinity;
    while (this.#ctx.pool.idle > 0 && this.#queue.size > 0) {
      const plan = this.#plan(now);
      if (plan === null) break;
      if ('wait' in plan) {
        waitUntil = plan.wait;
        break;
      }
      const instance = this.#ctx.pool.take();
      if (instance === undefined) break;
      this.#dispatch(plan.run, instance);
    }
    this.#arm(Math.min(waitUntil, this.#queue.nextDeadline()));
    this.#drain.check();
  }

  /** Triton's GetDynamicBatch: the batch to run now, or how long to wait for a better one. */
  #plan(now: number): Plan {
    const run: Item[] = [];
    let rows = 0;
    let best = 0;
    let sendNow = false;
    for (const it of this.#queue.ordered()) {
      if (run.length > 0) {
        // Growing past every preferred size: what we have is the best we can do without waiting.
        if (rows + it.batchSize > this.#maxPreferred && best === 0) best = run.length;
        if (rows + it.batchSize > this.#maxBatch || !canMerge(run[0].request, it.request, this.#ragged)) {
          sendNow = true;
          break;
        }
      }
      run.push(it);
      rows += it.batchSize;
      if (this.#preferred.has(rows)) best = run.length;
    }
    if (run.length === 0) return null;
    // A request with device tensors never joins others (batch.ts): waiting for a bigger batch would only delay it.
    if (run[0].request.device !== undefined) return { run };
    // After stop() nothing new arrives, so there is nothing to wait for.
    const delayExceeded = this.#drain.stopping || now - this.#queue.oldest() >= this.#delayMs;
    if (best > 0 && !delayExceeded) return { run: run.slice(0, best) };
    if (sendNow || delayExceeded || rows >= this.#maxPreferred) return { run };
    return { wait: this.#queue.oldest() + this.#delayMs };
  }

  #dispatch(run: Item[], instance: Instance): void {
    for (const it of run) {
      this.#queue.remove(it);
      this.#cancels.unwatch(it.signal, it);
    }
    this.#drain.begin();
    const logger = this.#ctx.logger;
    if (logger !== undefined && (logger.level === 'debug' || logger.level === 'trace')) {
      const rows = run.reduce((n, it) => n + it.batchSize, 0);
      logger.debug(
        {
          instance: instance.name,
          requests: run.length,
          batchSize: rows,
          queueMs: +(performance.now() - run[0].enqueuedAt).toFixed(3),
        },
        `executing batch of ${rows} (${run.length} requests)`,
      );
    }
    const freed = (): void => {
      this.#ctx.pool.give(instance);
      this.#pump();
    };
    const settle = (it: Member, answer: () => void): void => this.#settle(it as Item, answer);
    void runBatch(instance, run, this.#ctx, this.#running, settle, freed).finally(() => {
      this.#drain.end();
      this.#pump();
    });
  }

  failQueued(err: Error): void {
    for (const it of [...this.#queue.ordered()]) {
      this.#queue.remove(it);
      this.#fail(it, err);
    }
    this.#drain.check();
  }

  /** Answers a request that ran; with preserve_ordering, only once every earlier request is answered. */
  #settle(it: Item, answer: () => void): void {
    if (!this.#order) return answer();
    it.answer = answer;
    this.#flushOrder();
  }

  /** Answers a request that never ran (timeout, cancel, shutdown): at once, ordering or not. */
  #fail(it: Item, err: unknown): void {
    this.#cancels.unwatch(it.signal, it);
    it.reject(err);
    if (this.#order) {
      it.skipped = true;
      this.#flushOrder();
    }
  }

  #flushOrder(): void {
    const order = this.#order as Item[];
    while (this.#head < order.length) {
      const it = order[this.#head];
      if (it.answer) it.answer();
      else if (!it.skipped) break;
      this.#head++;
    }
    // Compact now and then so the array does not grow without bound.
    if (this.#head > 1024 && this.#head * 2 > order.length) {
      order.splice(0, this.#head);
      this.#head = 0;
    }
  }

  /**
   * Keeps at most one timer, for the earliest moment the pump has something to do. Node timers have 1 ms
   * resolution, so the last sub-millisecond stretch of a wait (all of a `max_queue_delay_microseconds` below
   * 1000) is polled with setImmediate instead: a 100 µs delay must not become 1–2 ms. A pump that wakes early
   * re-arms for what is left.
   */
  #arm(at: number): void {
    if (at === this.#timerAt) return;
    if (this.#timer) clearTimeout(this.#timer);
    if (this.#immediate) clearImmediate(this.#immediate);
    this.#timer = undefined;
    this.#immediate = undefined;
    this.#timerAt = at;
    if (at === Infinity) return;
    const fire = (): void => {
      this.#timer = undefined;
      this.#immediate = undefined;
      this.#timerAt = Infinity;
      this.#pump();
    };
    const ms = at - performance.now();
    if (ms < 1) this.#immediate = setImmediate(fire);
    else this.#timer = setTimeout(fire, Math.floor(ms));
  }

  /** Stops accepting; queued requests still run (batched, without waiting for the delay); idempotent. */
  stop(): Promise<void> {
    const done = this.#drain.stop();
    this.#pump();
    return done;
  }
}
