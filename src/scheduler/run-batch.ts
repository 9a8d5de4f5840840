import type { EngineRequest, EngineResponse, Instance, Responder } from '../backends/contract.js';
import { placeRequests } from '../backends/device-placement.js';
import { CancelWatch } from '../core/cancel-watch.js';
import { CancelledError, InternalError, NereidError } from '../core/errors.js';
import type { ScheduledResult, SchedulerContext, ScheduleOptions } from './scheduler.js';

/** A queued request as every scheduler keeps it. */
export interface Member {
  request: EngineRequest;
  signal?: AbortSignal;
  onResponse?: ScheduleOptions['onResponse'];
  /** `performance.now()` at enqueue, ms. */
  enqueuedAt: number;
  resolve(r: ScheduledResult): void;
  reject(e: unknown): void;
  /** Runs the request again in a later batch (the engine rescheduled it); only the iterative sequence batcher can. */
  reschedule?(): void;
}

/** How a scheduler delivers an answer (the dynamic batcher holds them back for preserve_ordering). */
export type Settle = (m: Member, answer: () => void) => void;

const NEVER = new AbortController().signal;

/** A batch of several requests in flight: its signal aborts once every member has been cancelled. */
interface Running {
  left: number;
  readonly controller: AbortController;
}

/**
 * Watches the signals of members of running batches, for one scheduler. One listener per distinct signal for the
 * scheduler's life (members of one HTTP connection share theirs), never one per batch: adding an EventTarget
 * listener per member per batch cost a third of the main thread under load (measured), and listeners that were
 * never removed piled up on long-lived connections.
 */
export class BatchCancels {
  readonly #batchOf = new Map<Member, Running>();
  readonly #watch = new CancelWatch<Member>((m) => {
    const running = this.#batchOf.get(m);
    if (running !== undefined && --running.left === 0) running.controller.abort();
  });

  /** The signal `execute` gets for `members`: a member's own when alone, else one that aborts when all did. */
  start(members: readonly Member[]): AbortSignal {
    if (members.length === 1) return members[0].signal ?? NEVER;
    const running: Running = { left: members.length, controller: new AbortController() };
    for (const m of members) {
      this.#batchOf.set(m, running);
      this.#watch.watch(m.signal, m);
    }
    return running.controller.signal;
  }

  end(members: readonly Member[]): void {
    if (members.length === 1) return;
    for (const m of members) {
      this.#watch.unwatch(m.signal, m);
      this.#batchOf.delete(m);
    }
  }
}

/**
 * Runs one batch on `instance` and answers each member: its final response (or error) when the execution
 * settles; a member whose client went away meanwhile is answered CANCELLED (the run may have finished anyway).
 * Decoupled members get each response through `onResponse` and settle at their final flag, which may come after
 * the execution returned.
 *
 * `freed` runs once, as soon as the execution settles and before any member is answered: the scheduler gives the
 * instance back and starts its next batch there, so the engine computes batch N+1 while the answers of batch N are
 * written to their sockets. Answering first kept an instance from its queue for every response's write (about 30
 * HTTP answers of 196 KB after each BERT batch; on the H200, TensorRT at concurrency 64: 4,557 → 4,744 seq/s, with
 * the instance still idle 43 % of the time for other reasons, see bench/results/tensorrt-bert-base-fp16.md).
 */
// Long: one batch's state (last responses, errors, final flags) is shared by the responder the engine calls and by
// the settling after execute; it stays locals of one function, read in execution order, on the hot path of every
// batch rather than fields of a per-batch object whose methods would be spread apart.
export async function runBatch(
  instance: Instance,
  members: readonly Member[],
  ctx: SchedulerContext,
  cancels: BatchCancels,
  settle: Settle,
  freed?: () => void,
): Promise<void> {
  const started = performance.now();
  const computeStart = process.hrtime.bigint();
  let free = freed;
  const release = (): void => {
    const f = free;
    free = undefined;
    f?.();
  };
  const rows = members.reduce((n, m) => n + m.request.batchSize, 0);
  const n = members.length;
  const last: (EngineResponse | undefined)[] = new Array(n);
  const errors: (Error | undefined)[] = new Array(n);
  const final: boolean[] = new Array(n).fill(false);
  const rescheduled: boolean[] = new Array(n).fill(false);
  let executed = false;
  let timings = { computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 };

  const answer = (i: number): void => {
    const m = members[i];
    const err = errors[i];
    // An answer that is not delivered gives its lent memory back here (engine-side views, core/lease.ts).
    if (err !== undefined || m.signal?.aborted || rescheduled[i]) last[i]?.lease?.release();
    if (err !== undefined) return settle(m, () => m.reject(err));
    if (m.signal?.aborted) return settle(m, () => m.reject(new CancelledError('request was cancelled')));
    if (rescheduled[i]) return settle(m, () => rescheduleOrFail(m, instance.name, i));
    const r = last[i] ?? { outputs: [] };
    const queueNs = Math.round((started - m.enqueuedAt) * 1e6);
    settle(m, () => m.resolve({ ...r, timings, queueNs, computeStart, executedBatchSize: rows }));
  };

  const sendTaken = (i: number, response: EngineResponse | Error | null, opts: { final: boolean }) => {
    let taken: void | Promise<void> = undefined;
    if (i < 0 || i >= n || final[i]) {
      if (response !== null && !(response instanceof Error)) response.lease?.release();
      return;
    }
    if (response instanceof Error) {
      errors[i] = NereidError.from(response);
      final[i] = true;
    } else {
      if (response !== null) {
        last[i]?.lease?.release();
        last[i] = response;
        taken = members[i].onResponse?.(response);
      }
      final[i] = opts.final;
    }
    // A decoupled request finishing after its execution returned is answered now.
    if (final[i] && executed) answer(i);
    return taken;
  };
  const responder: Responder = {
    send(i, response, opts) {
      void sendTaken(i, response, opts);
    },
    sendTaken,
    reschedule(i) {
      if (i < 0 || i >= n || final[i]) return;
      rescheduled[i] = true;
      final[i] = true;
      if (executed) answer(i);
    },
  };

  const signal = cancels.start(members);
  try {
    // Device tensors stay on the device only for an instance that takes that device; others get host copies.
    const requests = placeRequests(
      members.map((m) => m.request),
      instance.deviceMemory,
    );
    timings = await instance.execute(requests, responder, signal);
    ctx.stats.recordExecution(rows, timings);
    executed = true;
    release();
    for (let i = 0; i < n; i++) {
      if (final[i]) answer(i);
      else if (members[i].onResponse === undefined) {
        errors[i] = new InternalError(`instance ${instance.name} returned without answering request ${i} of its batch`);
        final[i] = true;
        answer(i);
      }
    }
  } catch (err) {
    executed = true;
    release();
    const e = NereidError.from(err);
    for (let i = 0; i < n; i++) {
      if (final[i]) answer(i);
      else {
        errors[i] = e;
        final[i] = true;
        answer(i);
      }
    }
  } finally {
    release();
    cancels.end(members);
  }
}

/** A member the engine released for rescheduling: queued again, or failed where its scheduler cannot do that. */
function rescheduleOrFail(m: Member, instance: string, i: number): void {
  if (m.reschedule !== undefined) return m.reschedule();
  m.reject(
    new InternalError(
      `instance ${instance} released request ${i} of its batch for rescheduling, but only a model with sequence_batching { iterative_sequence: true } reschedules requests`,
    ),
  );
}
