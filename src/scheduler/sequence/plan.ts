import type { EngineRequest } from '../../backends/contract.js';
import { canMerge } from '../batch.js';

/**
 * How one instance's next batch is formed from the requests at the head of its sequence slots (pure: the
 * batcher owns the clock and the queues). One request per slot per batch, so the requests of a sequence run one
 * after another, in order.
 */

/** The request at the head of a slot's queue. */
export interface Head {
  readonly slot: number;
  /** `performance.now()` at enqueue, ms. */
  readonly enqueuedAt: number;
  readonly request: EngineRequest;
}

/** Run these slots now (`null`: a padding row), or wait until `wait` (ms). */
export type Plan = { rows: (number | null)[] } | { wait: number } | null;

export interface DirectOptions {
  /** max_queue_delay_microseconds in ms (0: never wait). */
  delayMs: number;
  /** minimum_slot_utilization: the share of max_batch_size that must be ready to run before the delay. */
  minUtilization: number;
  maxBatchSize: number;
  ragged: ReadonlySet<string>;
}

/**
 * Triton's direct strategy: a batch holds slots 0..highest ready slot in their positions, so a model that keeps
 * per-row state sees each sequence in the same row every time. A slot with nothing queued, or whose request
 * cannot share the batch (different shapes), is a padding row (READY false). With a delay and a minimum
 * utilization, a batch waits for enough ready slots until the oldest request has waited the delay.
 */
export function planDirect(heads: readonly (Head | undefined)[], opts: DirectOptions, now: number): Plan {
  let highest = -1;
  let ready = 0;
  let oldest = Infinity;
  let rep: Head | undefined;
  heads.forEach((h, s) => {
    if (h === undefined) return;
    rep ??= h;
    highest = s;
    ready++;
    oldest = Math.min(oldest, h.enqueuedAt);
  });
  if (rep === undefined) return null;
  if (opts.delayMs > 0 && opts.minUtilization > 0) {
    const enough = ready / Math.max(1, opts.maxBatchSize) >= opts.minUtilization;
    if (!enough && now - oldest < opts.delayMs) return { wait: oldest + opts.delayMs };
  }
  const first = rep;
  const rows: (number | null)[] = [];
  for (let s = 0; s <= highest; s++) {
    const h = heads[s];
    rows.push(h !== undefined && (h === first || canMerge(first.request, h.request, opts.ragged)) ? s : null);
  }
  return { rows };
}

export interface OldestOptions {
  delayMs: number;
  /** Preferred batch sizes, ascending (Triton's default: max_batch_size). */
  preferred: readonly number[];
  maxBatchSize: number;
  ragged: ReadonlySet<string>;
  /** The batcher is stopping: nothing new will come, so never wait. */
  stopping: boolean;
}

/**
 * Triton's oldest strategy: a dynamic batch over the candidate sequences, oldest request first, at most one
 * request per sequence, with the dynamic batcher's preferred-size and delay rules.
 */
export function planOldest(heads: readonly Head[], opts: OldestOptions, now: number): Plan {
  if (heads.length === 0) return null;
  const sorted = [...heads].sort((a, b) => a.enqueuedAt - b.enqueuedAt);
  const cap = Math.max(1, opts.maxBatchSize);
  const run: Head[] = [];
  let blocked = false;
  for (const h of sorted) {
    if (run.length === cap) {
      blocked = true;
      break;
    }
    if (run.length > 0 && !canMerge(run[0].request, h.request, opts.ragged)) {
      blocked = true;
      continue;
    }
    run.push(h);
  }
  const maxPreferred = opts.preferred.length > 0 ? opts.preferred[opts.preferred.length - 1] : cap;
  let best = 0;
  for (const p of opts.preferred) if (p <= run.length) best = p;
  const oldest = sorted[0].enqueuedAt;
  const delayExceeded = opts.stopping || now - oldest >= opts.delayMs;
  const rows = (n: number): Plan => ({ rows: run.slice(0, n).map((h) => h.slot) });
  if (best > 0 && !delayExceeded) return rows(best);
  if (delayExceeded || blocked || run.length >= maxPreferred) return rows(run.length);
  return { wait: oldest + opts.delayMs };
}
