import { performance } from 'node:perf_hooks';
import { oncePerTurn } from '../once-per-turn.js';
import type { EngineRequest, Instance } from '../../backends/contract.js';
import { CancelWatch } from '../../core/cancel-watch.js';
import { CancelledError, InvalidArgError, UnavailableError } from '../../core/errors.js';
import { Drain } from '../drain.js';
import { BatchCancels, runBatch, type Member } from '../run-batch.js';
import type { ScheduledResult, Scheduler, SchedulerContext, ScheduleOptions } from '../scheduler.js';
import { planDirect, planOldest, type Head, type Plan } from './plan.js';
import { MAX_BACKLOG_PARAM, type SequenceSpec } from './spec.js';
import { paddingRow, sequenceRow } from './rows.js';
import { RELEASE, SequenceSlots, type Item, type Lane, type Seq } from './slots.js';
import { correlationKey, correlationText, type CorrelationId } from './tensors.js';

/**
 * Triton's sequence batcher. Each request names a sequence (its correlation id); a sequence is bound to one
 * sequence slot of one instance from its START to its END, so its requests run in order on the same instance,
 * one at a time. Sequences that find every slot taken wait in the backlog (FIFO) for a slot to free up.
 *
 * Per instance ("lane"), batches are formed from the head request of each slot: `direct` keeps every sequence in
 * the row of its slot (padding rows where a slot has nothing ready), `oldest` forms a dynamic batch of the oldest
 * heads. The batcher adds the control inputs (START/END/READY/CORRID) and the implicit state inputs to every row,
 * asks for the state outputs, and keeps each sequence's state here between its requests, whatever engine runs it.
 *
 * A sequence idle (no new request) for `max_sequence_idle_microseconds` loses its slot, or its place in the backlog
 * (slots.ts); a later request without START is refused. A new sequence that would wait behind the backlog's limit
 * (`max_sequence_backlog`, spec.ts) is refused UNAVAILABLE rather than queued. Threading: main thread only; one pump (on enqueue, on batch completion, on its one timer).
 */

export interface SequenceBatcherOptions {
  spec: SequenceSpec;
  /** Inputs declared `allow_ragged_batch`: their shapes need not match to share a batch. */
  raggedInputs?: ReadonlySet<string>;
}

export class SequenceBatcher implements Scheduler {
  readonly #ctx: SchedulerContext;
  readonly #running = new BatchCancels();
  readonly #spec: SequenceSpec;
  readonly #ragged: ReadonlySet<string>;
  readonly #slots: SequenceSlots;
  readonly #stateOutputs: readonly string[];
  #queued = 0;
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Infinity;
  /** The pump, once per turn of the event loop however often asked (once-per-turn.ts). */
  readonly #schedulePump = oncePerTurn(() => this.#pump());
  /** Counts the lanes' batches; waits for the sequences already started (they may go on after stop). */
  readonly #drain = new Drain(() => this.#queued);
  readonly #cancels = new CancelWatch<Item>((item) =>
    this.#drop(item, new CancelledError('request was cancelled while queued')),
  );

  constructor(ctx: SchedulerContext, opts: SequenceBatcherOptions) {
    this.#ctx = ctx;
    this.#spec = opts.spec;
    this.#ragged = opts.raggedInputs ?? new Set();
    this.#slots = new SequenceSlots({
      laneNames: ctx.pool.names,
      slotsPerInstance: opts.spec.slotsPerInstance,
      idleUs: opts.spec.idleUs,
      maxBacklog: opts.spec.maxBacklog,
      logger: ctx.logger,
    });
    this.#stateOutputs = opts.spec.states.map((s) => s.outputName);
    // The rate limiter's wake-up pumps at once: its priority order depends on who takes first.
    ctx.pool.on({ idle: () => this.#schedulePump(), wake: () => this.#pump() });
  }

  get pending(): number {
    return this.#queued;
  }

  enqueue(request: EngineRequest, opts: ScheduleOptions = {}): Promise<ScheduledResult> {
    const spec = this.#spec;
    const model = spec.modelName;
    // An iterative sequence is one request: its START and END are implied (Triton fills the controls itself).
    const start = spec.iterative || (opts.sequence?.start ?? false);
    const end = spec.iterative || (opts.sequence?.end ?? false);
    const id = request.correlationId as CorrelationId;
    const invalid = invalidRequest(spec, request);
    if (invalid !== undefined) return Promise.reject(invalid);
    if (opts.signal?.aborted) {
      return Promise.reject(new CancelledError('request was cancelled before it was scheduled'));
    }
    const key = correlationKey(id);
    let seq = this.#slots.active.get(key);
    if (seq === undefined && !start) {
      return Promise.reject(
        new InvalidArgError(
          `inference request for sequence ${correlationText(id)} to model '${model}' must specify the START flag on the first request of the sequence`,
        ),
      );
    }
    if (this.#drain.stopping && start) {
      return Promise.reject(
        new UnavailableError('Server is stopping, scheduler for model has stopped accepting new inference requests'),
      );
    }
    if (seq !== undefined && start) {
      this.#ctx.logger?.warn(
        `sequence ${correlationText(id)} for model '${model}' has a conflict. The previous sequence did not end before this sequence start. Previous sequence will be terminated early.`,
      );
    }
    if (seq === undefined && this.#slots.backlogFull()) {
      return Promise.reject(
        new UnavailableError(
          `inference request for sequence ${correlationText(id)} to model '${model}' was refused: every sequence slot is taken and ${this.#slots.backlogLength} sequences already wait for one (the backlog limit, model parameter '${MAX_BACKLOG_PARAM}'); retry later`,
        ),
      );
    }
    const now = performance.now();
    if (seq === undefined) {
      seq = { key, id, queue: [], lane: undefined, slot: -1, states: undefined, lastArrival: now, pendingStart: false };
      this.#slots.active.set(key, seq);
      this.#slots.assign(seq);
    }
    const target = seq;
    return new Promise<ScheduledResult>((resolve, reject) => {
      const timeoutUs = opts.timeoutUs ?? 0;
      const item: Item = {
        request,
        seq: target,
        start,
        end,
        deadline: timeoutUs > 0 ? now + timeoutUs / 1000 : 0,
        enqueuedAt: now,
        signal: opts.signal,
        onResponse: opts.onResponse,
        resolve,
        reject,
      };
      target.lastArrival = now;
      target.queue.push(item);
      this.#queued++;
      // After its END, the id may start a new sequence; this one finishes what it has queued.
      if (end) this.#slots.active.delete(key);
      this.#cancels.watch(opts.signal, item);
      this.#schedulePump();
    });
  }

  /** Removes a queued request (cancelled, timed out, failed) and answers it with `err`. */
  #drop(item: Item, err: Error): void {
    const queue = item.seq.queue;
    const i = queue.indexOf(item);
    if (i < 0) return;
    queue.splice(i, 1);
    this.#queued--;
    this.#cancels.unwatch(item.signal, item);
    if (item.start) item.seq.pendingStart = true;
    // Its END will never run: the slot must still be freed once the requests before it are done.
    if (item.end) queue.splice(i, 0, RELEASE);
    item.reject(err);
    this.#schedulePump();
  }

  #pump(): void {
    const now = performance.now();
    let next = this.#settle(now);
    for (const lane of this.#slots.lanes) {
      if (lane.busy) continue;
      const plan = this.#plan(lane, now);
      if (plan === null) continue;
      if ('wait' in plan) {
        next = Math.min(next, plan.wait);
        continue;
      }
      // The lane's instance is dead and restarting: the pool's idle event pumps again when it is back.
      const instance = this.#ctx.pool.take(lane.name);
      if (instance === undefined) continue;
      this.#dispatch(lane, instance, plan.rows);
    }
    this.#arm(next);
    this.#checkDrained();
  }

  /**
   * Reaps idle sequences and frees ended slots until nothing changes: a freed slot goes to a backlogged sequence,
   * which may itself be overdue (Triton's idle clock runs in the backlog too). Returns the next due time.
   */
  #settle(now: number): number {
    const slots = this.#slots;
    for (;;) {
      const next = slots.reapIdle(now);
      let freed = false;
      for (const lane of slots.lanes) freed = slots.releaseEnded(lane) || freed;
      if (!freed)
        return Math.min(
          next,
          slots.expireBacklog(now, (e) => this.#refuseExpired(e)),
        );
    }
  }

  #refuseExpired(e: Item): void {
    this.#queued--;
    this.#cancels.unwatch(e.signal, e);
    e.reject(new UnavailableError('timeout of the corresponding sequence has been expired'));
  }

  #plan(lane: Lane, now: number): Plan {
    const spec = this.#spec;
    const heads: (Head | undefined)[] = lane.slots.map((seq, slot) => {
      const e = seq?.queue[0];
      return e === undefined || e === RELEASE ? undefined : { slot, enqueuedAt: e.enqueuedAt, request: e.request };
    });
    if (spec.strategy === 'direct') {
      return planDirect(
        heads,
        {
          delayMs: spec.delayUs / 1000,
          minUtilization: spec.minSlotUtilization,
          maxBatchSize: spec.maxBatchSize,
          ragged: this.#ragged,
        },
        now,
      );
    }
    return planOldest(
      heads.filter((h): h is Head => h !== undefined),
      {
        delayMs: spec.delayUs / 1000,
        preferred: spec.preferred,
        maxBatchSize: spec.maxBatchSize,
        ragged: this.#ragged,
        stopping: this.#drain.stopping,
      },
      now,
    );
  }

  #dispatch(lane: Lane, instance: Instance, rows: readonly (number | null)[]): void {
    const items: (Item | null)[] = rows.map((s) => {
      if (s === null) return null;
      const seq = lane.slots[s] as Seq;
      const item = seq.queue.shift() as Item;
      this.#queued--;
      this.#cancels.unwatch(item.signal, item);
      return item;
    });
    const proto = items.find((i): i is Item => i !== null) as Item;
    const members = items.map((item, k): Member =>
      item === null
        ? paddingRow(this.#spec, this.#stateOutputs, proto)
        : this.#spec.iterative
          ? this.#iterativeRow(lane, rows[k] as number, item)
          : sequenceRow(this.#spec, this.#stateOutputs, item),
    );
    // An END frees its slot as soon as it is in a batch (Triton): the next sequence runs in a later batch. An
    // iterative sequence keeps it until its request is answered (#iterativeRow).
    rows.forEach((s, k) => {
      if (s !== null && items[k]?.end && !this.#spec.iterative) this.#slots.release(lane, s);
    });
    // A slot given to a backlogged sequence here needs its idle clock watched: the next pump arms it.
    if (items.some((i) => i?.end)) this.#schedulePump();
    lane.busy = true;
    this.#drain.begin();
    this.#ctx.logger?.debug(
      { instance: instance.name, rows: members.length, requests: items.filter((i) => i !== null).length },
      `executing sequence batch of ${members.length}`,
    );
    void runBatch(instance, members, this.#ctx, this.#running, (_m, answer) => answer()).finally(() => {
      lane.busy = false;
      this.#ctx.pool.give(instance);
      // Before the pump, whose drain check then drops the timer.
      this.#drain.end();
      this.#pump();
    });
  }

  /**
   * A row of an iterative sequence: the model may release it for rescheduling, and it then goes back to the head of
   * its sequence's queue (START no longer set) and keeps its slot; answered, it frees the slot.
   */
  #iterativeRow(lane: Lane, slot: number, item: Item): Member {
    const row = sequenceRow(this.#spec, this.#stateOutputs, item);
    const free = (): void => {
      if (lane.slots[slot] !== item.seq) return;
      this.#slots.release(lane, slot);
      this.#schedulePump();
    };
    return {
      ...row,
      resolve: (r) => {
        free();
        row.resolve(r);
      },
      reject: (e) => {
        free();
        row.reject(e);
      },
      reschedule: () => {
        if (item.signal?.aborted) {
          free();
          item.reject(new CancelledError('request was cancelled'));
          return;
        }
        const again: Item = { ...item, start: false, enqueuedAt: performance.now() };
        item.seq.queue.unshift(again);
        this.#queued++;
        this.#cancels.watch(again.signal, again);
        this.#schedulePump();
      },
    };
  }

  /** One timer for the earliest of: a batch delay, an idle sequence, a backlog timeout. */
  #arm(at: number): void {
    if (at === this.#timerAt) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = at;
    if (at === Infinity) return;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.#timerAt = Infinity;
        this.#pump();
      },
      Math.max(0, Math.ceil(at - performance.now())),
    );
    // Idle sequences must not keep a process alive.
    this.#timer.unref();
  }

  failQueued(err: Error): void {
    for (const seq of this.#slots.sequences()) {
      for (const e of [...seq.queue]) if (e !== RELEASE) this.#drop(e, err);
    }
    this.#checkDrained();
  }

  /** Drained: nothing is left to wake up for (idle sequences must not hold the stop). */
  #checkDrained(): void {
    if (this.#drain.check()) this.#arm(Infinity);
  }

  /**
   * Stops accepting new sequences; sequences already started may go on (Triton lets in-flight sequences
   * finish). Resolves once nothing is queued or running; idempotent.
   */
  stop(): Promise<void> {
    const done = this.#drain.stop();
    this.#pump();
    return done;
  }
}

/** The checks of a request before it joins a sequence, with Triton's words; undefined when it may. */
function invalidRequest(spec: SequenceSpec, request: EngineRequest): InvalidArgError | undefined {
  const model = spec.modelName;
  const id = request.correlationId;
  if (spec.maxBatchSize > 0 && request.batchSize > 1) {
    return new InvalidArgError(
      `inference request to model '${model}' must specify batch-size 1 due to requirements of sequence batcher`,
    );
  }
  if (id === undefined || id === 0n || id === '') {
    return new InvalidArgError(
      `inference request to model '${model}' must specify a non-zero or non-empty correlation ID`,
    );
  }
  const corrid = spec.corrid;
  if (corrid && (typeof id === 'string') !== (corrid.datatype === 'BYTES')) {
    return new InvalidArgError(
      `sequence batching control '${corrid.name}' data-type is '${typeof id === 'string' ? 'BYTES' : 'UINT64'}', but model '${model}' expects '${corrid.datatype}'`,
    );
  }
  return undefined;
}
