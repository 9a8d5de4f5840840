import { Arena, Tag } from './wire.js';

/**
 * Messages to the other thread, posted together once per turn of the event loop as `[BATCH, messages, arena]`: a
 * batch's answers (the main thread) or the requests read in one poll phase (a front-end thread) cross in one
 * postMessage, their small tensors in one transferred arena buffer (wire.ts). Each postMessage has a fixed cost on
 * both sides (locking, waking the other loop, one 'message' event), and each transferred buffer another: measured on
 * Node 24 with `simple`-sized messages, 4.0 µs of main-thread CPU per request one by one, 3.0 eight at a time with a
 * buffer per tensor, 1.4 eight at a time with one arena.
 *
 * Order is kept (one FIFO per thread pair). A message that cannot be cloned fails alone: its `onFail` is called
 * and the others are sent. Threading: one Outbox per sending side of a port.
 */
export class Outbox {
  readonly #post: (msg: unknown, transfer: ArrayBuffer[]) => void;
  readonly #afterFlush: (() => void) | undefined;
  /** Where the messages being packed now put their small tensors; taken when the post goes out. */
  readonly arena = new Arena();
  #msgs: unknown[][] = [];
  #transfers: (ArrayBuffer[] | undefined)[] = [];
  #fails: (((err: unknown) => void) | undefined)[] = [];
  #posted: (() => void)[] = [];
  #scheduled = false;

  /** `afterFlush`: called once what was waiting went out (a front-end thread's spin for its answers). */
  constructor(post: (msg: unknown, transfer: ArrayBuffer[]) => void, afterFlush?: () => void) {
    this.#post = post;
    this.#afterFlush = afterFlush;
  }

  /**
   * Queues `msg` (packed against `this.arena`) with the buffers it transfers besides the arena. `onPosted` runs once
   * the post went out (or failed): the memory the arena copied from at the post may be given back then.
   */
  send(msg: unknown[], transfer?: ArrayBuffer[], onFail?: (err: unknown) => void, onPosted?: () => void): void {
    this.#msgs.push(msg);
    this.#transfers.push(transfer);
    this.#fails.push(onFail);
    if (onPosted !== undefined) this.#posted.push(onPosted);
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /** Posts what is waiting now. */
  flush(): void {
    this.#scheduled = false;
    const msgs = this.#msgs;
    const transfers = this.#transfers;
    const fails = this.#fails;
    const posted = this.#posted;
    if (msgs.length === 0) return;
    this.#msgs = [];
    this.#transfers = [];
    this.#fails = [];
    this.#posted = [];
    const arena = this.arena.empty ? undefined : this.arena.take();
    const all = transfers.flatMap((t) => t ?? []);
    try {
      this.#post([Tag.BATCH, msgs, arena], arena ? [arena, ...all] : all);
    } catch {
      // One message could not be cloned, and nothing was sent: each goes on its own (with a copy of the arena), so
      // only that one fails.
      msgs.forEach((m, i) => {
        const own = arena?.slice(0);
        try {
          this.#post([Tag.BATCH, [m], own], own ? [own, ...(transfers[i] ?? [])] : (transfers[i] ?? []));
        } catch (err) {
          fails[i]?.(err);
        }
      });
    }
    for (const p of posted) p();
    this.#afterFlush?.();
  }
}
