import type { ModelDynamicBatching, ModelQueuePolicy } from '../config/model-config.js';
import { InvalidArgError, UnavailableError } from '../core/errors.js';

/**
 * Triton's PriorityQueue (core `scheduler_utils.cc`): one FIFO per priority level, each with its
 * ModelQueuePolicy (size cap, timeout, REJECT/DELAY), walked from level 1 (highest) down. Pure data
 * structure: the batcher owns the clock and calls `expire()` before it looks at the queue.
 */

/** What the queue tracks of a request; the batcher's item extends it. */
export interface QueueEntry {
  /** Rows the request brings (a request of batch size n counts n). */
  batchSize: number;
  /** `performance.now()` at enqueue, ms. */
  enqueuedAt: number;
  /** Priority level it was queued at (0 when the model has no levels). */
  level: number;
  /** When its queue timeout fires, ms; 0 = never. Cleared once a DELAY timeout has moved it. */
  deadline: number;
}

interface Level<T> {
  policy: Required<ModelQueuePolicy>;
  /** Requests still within their timeout, FIFO. */
  live: T[];
  /** DELAY-expired requests: served after every live request of the level (Triton's delayed_queue_). */
  delayed: T[];
}

function policyOf(p: ModelQueuePolicy | undefined): Required<ModelQueuePolicy> {
  return {
    timeout_action: p?.timeout_action ?? 'REJECT',
    default_timeout_microseconds: p?.default_timeout_microseconds ?? 0,
    allow_timeout_override: p?.allow_timeout_override ?? false,
    max_queue_size: p?.max_queue_size ?? 0,
  };
}

export class PriorityQueues<T extends QueueEntry> {
  readonly #levels = new Map<number, Level<T>>();
  /** Levels in serving order (ascending: 1 is the highest priority). */
  readonly #order: number[];
  readonly #maxLevel: number;
  readonly #defaultLevel: number;
  #size = 0;

  constructor(config: ModelDynamicBatching) {
    this.#maxLevel = config.priority_levels ?? 0;
    this.#defaultLevel = this.#maxLevel > 0 ? (config.default_priority_level ?? 0) : 0;
    const levels = this.#maxLevel > 0 ? Array.from({ length: this.#maxLevel }, (_, i) => i + 1) : [0];
    for (const l of levels) {
      const own = config.priority_queue_policy?.[String(l)];
      this.#levels.set(l, { policy: policyOf(own ?? config.default_queue_policy), live: [], delayed: [] });
    }
    this.#order = levels;
  }

  /** Requests queued, all levels. */
  get size(): number {
    return this.#size;
  }

  /**
   * The level a request's `priority` parameter maps to. 0 (or absent) is the model's default level.
   * A model without priority levels ignores the parameter, as Triton does; with levels, a value above
   * `priority_levels` is refused (Triton silently uses the default level; we say so instead).
   */
  levelFor(priority: number | undefined): number {
    if (this.#maxLevel === 0) return 0;
    if (priority === undefined || priority === 0) return this.#defaultLevel;
    if (priority > this.#maxLevel) {
      throw new InvalidArgError(
        `priority ${priority} is out of range: this model has priority_levels ${this.#maxLevel} (1 is the highest, 0 the default level ${this.#defaultLevel})`,
      );
    }
    return priority;
  }

  /**
   * Queues `item` at `level`, setting its deadline from the level's policy. Triton's rule for the
   * request's `timeout` parameter: used only with allow_timeout_override, and only when shorter than the
   * policy's default — it can shorten the wait, never lengthen it (and with no default timeout there is
   * nothing to shorten). Throws UNAVAILABLE "Exceeds maximum queue size" when the level is full.
   */
  push(item: T, level: number, timeoutUs: number | undefined): void {
    const q = this.#levels.get(level) as Level<T>;
    const { policy } = q;
    if (policy.max_queue_size > 0 && q.live.length + q.delayed.length >= policy.max_queue_size) {
      throw new UnavailableError('Exceeds maximum queue size');
    }
    let us = policy.default_timeout_microseconds;
    if (policy.allow_timeout_override && timeoutUs !== undefined && timeoutUs !== 0 && timeoutUs < us) us = timeoutUs;
    item.level = level;
    item.deadline = us > 0 ? item.enqueuedAt + us / 1000 : 0;
    q.live.push(item);
    this.#size++;
  }

  /** Removes `item` wherever it is; false when it was not queued (already taken or expired). */
  remove(item: T): boolean {
    const q = this.#levels.get(item.level);
    if (!q) return false;
    for (const list of [q.live, q.delayed]) {
      const i = list.indexOf(item);
      if (i >= 0) {
        list.splice(i, 1);
        this.#size--;
        return true;
      }
    }
    return false;
  }

  /**
   * Applies timeouts at `now`: REJECT-policy requests past their deadline leave the queue and are
   * returned (the caller answers them); DELAY-policy ones move behind their level's live requests.
   */
  expire(now: number): T[] {
    const rejected: T[] = [];
    for (const l of this.#order) {
      const q = this.#levels.get(l) as Level<T>;
      if (q.live.length === 0) continue;
      const keep: T[] = [];
      for (const it of q.live) {
        if (it.deadline === 0 || now < it.deadline) keep.push(it);
        else if (q.policy.timeout_action === 'DELAY') {
          it.deadline = 0;
          q.delayed.push(it);
        } else rejected.push(it);
      }
      if (keep.length !== q.live.length) q.live = keep;
    }
    this.#size -= rejected.length;
    return rejected;
  }

  /** The earliest pending deadline (ms), or Infinity: the pump's timer must fire then. */
  nextDeadline(): number {
    let next = Infinity;
    for (const q of this.#levels.values())
      for (const it of q.live) if (it.deadline > 0 && it.deadline < next) next = it.deadline;
    return next;
  }

  /** Serving order: level 1 first; within a level, live requests FIFO, then delayed ones. */
  *ordered(): Generator<T> {
    for (const l of this.#order) {
      const q = this.#levels.get(l) as Level<T>;
      yield* q.live;
      yield* q.delayed;
    }
  }

  /** Enqueue time of the oldest queued request (Triton measures the batch delay from it), or Infinity. */
  oldest(): number {
    let t = Infinity;
    for (const q of this.#levels.values()) {
      if (q.live.length > 0 && q.live[0].enqueuedAt < t) t = q.live[0].enqueuedAt;
      for (const it of q.delayed) if (it.enqueuedAt < t) t = it.enqueuedAt;
    }
    return t;
  }

  /** Removes every queued request and returns them (shutdown). */
  drain(): T[] {
    const all = [...this.ordered()];
    for (const q of this.#levels.values()) {
      q.live = [];
      q.delayed = [];
    }
    this.#size = 0;
    return all;
  }
}
