import type { Logger } from '../../core/logger.js';
import type { RowItem } from './rows.js';
import { correlationText, type CorrelationId, type StoredState } from './tensors.js';

/**
 * Who holds which sequence slot: the slots of each instance ("lane"), the sequences that accept requests, and the
 * backlog of sequences waiting for a slot (FIFO). The sequence batcher (batcher.ts) forms batches from the heads of
 * the slots' queues; this module decides when a slot is taken and when it is given back.
 *
 * Idle reaping follows Triton's reaper: a sequence's idle clock is the arrival of its last request, in a slot or in
 * the backlog. One idle past `max_sequence_idle_microseconds` in a slot gives its slot back once the requests it
 * already queued have run; one idle in the backlog with nothing queued (its client sent START and went away) is
 * dropped from the backlog at once, so it never takes a slot only to sit out the idle time again — which is how
 * 3,000 abandoned STARTs held a one-slot model for minutes (issue 22, item 7). A backlogged sequence that still has
 * requests queued keeps its place; it is reaped as soon as it holds a slot and its requests have run.
 *
 * Threading: main thread only, called from the batcher's pump.
 */

export interface Item extends RowItem {
  readonly seq: Seq;
  /** Request timeout while the sequence is in the backlog (ms since time origin), 0 = none. */
  readonly deadline: number;
}

/** A queue marker: the sequence has ended (idle, or its END request left without running); free the slot. */
export const RELEASE = Symbol('release');
export type Entry = Item | typeof RELEASE;

export interface Seq {
  readonly key: string;
  readonly id: CorrelationId;
  readonly queue: Entry[];
  /** The lane and slot it holds; undefined while in the backlog. */
  lane: Lane | undefined;
  slot: number;
  /** Implicit states; undefined until its first request runs (or when the model has none). */
  states: Map<string, StoredState> | undefined;
  /** performance.now() of its last request (Triton's idle clock). */
  lastArrival: number;
  /** Its START request left the queue without running: the next request it runs starts it. */
  pendingStart: boolean;
}

export interface Lane {
  readonly name: string;
  readonly slots: (Seq | undefined)[];
  busy: boolean;
}

export interface SlotOptions {
  readonly laneNames: readonly string[];
  readonly slotsPerInstance: number;
  readonly idleUs: number;
  /** Sequences that may wait for a slot; a new sequence beyond them is refused. */
  readonly maxBacklog: number;
  readonly logger?: Logger;
}

const hasWork = (seq: Seq): boolean => seq.queue.some((e) => e !== RELEASE);

export class SequenceSlots {
  readonly lanes: Lane[];
  /** Sequences that accept requests (started, not ended, not reaped), by correlation key. */
  readonly active = new Map<string, Seq>();
  #backlog: Seq[] = [];
  readonly #opts: SlotOptions;

  constructor(opts: SlotOptions) {
    this.#opts = opts;
    this.lanes = opts.laneNames.map((name) => ({
      name,
      slots: new Array<Seq | undefined>(opts.slotsPerInstance).fill(undefined),
      busy: false,
    }));
  }

  /** Every sequence that holds a slot or waits for one. */
  sequences(): Seq[] {
    return [...this.lanes.flatMap((l) => l.slots.filter((s): s is Seq => s !== undefined)), ...this.#backlog];
  }

  /**
   * Whether a new sequence would have to wait behind `maxBacklog` others. Sequences that are gone (nothing queued,
   * no longer active) are dropped first; they are only skipped lazily otherwise.
   */
  backlogFull(): boolean {
    if (this.#backlog.length < this.#opts.maxBacklog) return false;
    this.#backlog = this.#backlog.filter((s) => hasWork(s) || this.active.get(s.key) === s);
    return this.#backlog.length >= this.#opts.maxBacklog;
  }

  get backlogLength(): number {
    return this.#backlog.length;
  }

  /** A new sequence takes the free slot with the lowest index (spreading sequences over instances), else waits. */
  assign(seq: Seq): void {
    for (let s = 0; s < this.#opts.slotsPerInstance; s++) {
      for (const lane of this.lanes) {
        if (lane.slots[s] === undefined) {
          this.#place(seq, lane, s);
          return;
        }
      }
    }
    this.#backlog.push(seq);
  }

  #place(seq: Seq, lane: Lane, slot: number): void {
    lane.slots[slot] = seq;
    seq.lane = lane;
    seq.slot = slot;
  }

  /** Frees a slot and gives it to the first backlogged sequence that still has something to do. */
  release(lane: Lane, slot: number): void {
    const seq = lane.slots[slot];
    if (seq !== undefined) seq.lane = undefined;
    lane.slots[slot] = undefined;
    while (this.#backlog.length > 0) {
      const next = this.#backlog.shift() as Seq;
      // A backlogged sequence with nothing queued that no longer accepts requests is gone.
      if (!hasWork(next) && this.active.get(next.key) !== next) continue;
      this.#place(next, lane, slot);
      return;
    }
  }

  /**
   * Reaps the sequences idle past the limit (see the module comment); returns when the next one falls due.
   * Reaping in a slot only queues a RELEASE: `releaseEnded` frees the slot.
   */
  reapIdle(now: number): number {
    const idleMs = this.#opts.idleUs / 1000;
    let next = Infinity;
    let gone: Set<Seq> | undefined;
    for (const [key, seq] of this.active) {
      const due = seq.lastArrival + idleMs;
      if (due > now) {
        next = Math.min(next, due);
        continue;
      }
      const backlogged = seq.lane === undefined;
      // Waiting for a slot with requests queued: it is reaped once it holds a slot and they have run.
      if (backlogged && hasWork(seq)) continue;
      this.active.delete(key);
      if (backlogged) (gone ??= new Set()).add(seq);
      else seq.queue.push(RELEASE);
      this.#opts.logger?.debug(
        {
          correlationId: correlationText(seq.id),
          idleMs: Math.round(now - seq.lastArrival),
          limitMs: idleMs,
          where: backlogged ? 'backlog' : 'slot',
        },
        `sequence ${correlationText(seq.id)} exceeded max_sequence_idle_microseconds; ${backlogged ? 'it leaves the backlog' : 'its slot is released'}`,
      );
    }
    if (gone !== undefined) this.#backlog = this.#backlog.filter((s) => !gone.has(s));
    return next;
  }

  /**
   * A backlogged sequence whose request timeout expires is refused as a whole (Triton): `refuse` answers each of
   * its queued requests. Returns when the next timeout falls due.
   */
  expireBacklog(now: number, refuse: (item: Item) => void): number {
    let next = Infinity;
    for (const seq of [...this.#backlog]) {
      let due = Infinity;
      for (const e of seq.queue) if (e !== RELEASE && e.deadline > 0) due = Math.min(due, e.deadline);
      if (due > now) {
        next = Math.min(next, due);
        continue;
      }
      this.#backlog.splice(this.#backlog.indexOf(seq), 1);
      if (this.active.get(seq.key) === seq) this.active.delete(seq.key);
      for (const e of seq.queue.splice(0)) if (e !== RELEASE) refuse(e);
    }
    return next;
  }

  /** Frees the slots whose sequence has ended at the head of its queue; true if any was freed. */
  releaseEnded(lane: Lane): boolean {
    let freed = false;
    for (let s = 0; s < lane.slots.length; s++) {
      let seq = lane.slots[s];
      while (seq !== undefined && seq.queue[0] === RELEASE) {
        seq.queue.shift();
        this.release(lane, s);
        freed = true;
        seq = lane.slots[s];
      }
    }
    return freed;
  }
}
