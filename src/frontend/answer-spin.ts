import { availableParallelism } from 'node:os';
import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads';

/**
 * A front-end thread's brief wait for its answers before its event loop sleeps.
 *
 * With front-end threads, a request crosses to the main thread and its answer back: the thread posts, its loop
 * goes to sleep in epoll, and the answer's arrival wakes it. On a VM that wake-up is a large part of an otherwise
 * idle request's latency (concurrency 1 over HTTP: ~1.5x the p50 of no front-end threads). So right after the
 * thread posted requests while answers are due, it polls its port (`receiveMessageOnPort`) for up to SPIN_NS and
 * handles what arrived itself, as the 'message' event would have.
 *
 * Bounded in CPU: a spin lasts at most SPIN_NS and ends at the first answer; only with requests in flight; and
 * after MISSES_TO_REST spins in a row that saw nothing (the main thread is busy, or the model slow), the thread
 * rests from spinning for REST_POSTS posts, so a thread whose answers take long spends at most MISSES_TO_REST
 * spins per REST_POSTS + MISSES_TO_REST posts. While spinning the thread reads no socket; the bound keeps what it
 * delays to SPIN_NS. Only with SPIN_MIN_CORES cores or more (where `nereid serve` starts front-end threads by
 * itself): on fewer, a spinning thread takes the core the main thread needs to produce the answer. Measured on the
 * 2-core machine (concurrency 1, HTTP binary, 2 threads, 3 interleaved rounds): no gain beyond noise from spins of
 * 30 or 150 µs over none (p50 578 / 403 / 421 µs); the answers that came within a spin came within 3–8 µs (the main
 * thread was awake), the rest after more than 150 µs (it slept, or waited for a core).
 * Threading: one per front-end thread, on that thread.
 */

/** Longest spin, ns: the main thread's turn for a short request (wake-up, infer, post back) fits in it. */
export const SPIN_NS = 150_000;
/** Spins in a row that saw nothing before the thread rests from spinning. */
export const MISSES_TO_REST = 4;
/** Posts without spinning after MISSES_TO_REST misses. */
export const REST_POSTS = 256;
/** Fewer cores than this: no spinning (see above). */
export const SPIN_MIN_CORES = 4;

export class AnswerSpin {
  readonly #port: MessagePort;
  readonly #handle: (msg: unknown[]) => void;
  readonly #waiting: () => boolean;
  readonly #enabled: boolean;
  #misses = 0;
  #rest = 0;
  /** Test hook: spins that got an answer, and those that did not. */
  readonly counts = { hits: 0, misses: 0 };

  /**
   * `handle`: what the port's 'message' listener does with a message; `waiting`: whether answers are due (requests
   * in flight).
   */
  constructor(
    port: MessagePort,
    handle: (msg: unknown[]) => void,
    waiting: () => boolean,
    cores = availableParallelism(),
  ) {
    this.#port = port;
    this.#handle = handle;
    this.#waiting = waiting;
    this.#enabled = cores >= SPIN_MIN_CORES;
  }

  /** The thread just posted: wait briefly for an answer, and handle every message that is there by then. */
  afterPost(): void {
    if (!this.#enabled) return;
    if (this.#rest > 0) {
      this.#rest--;
      return;
    }
    if (!this.#waiting()) return;
    const deadline = process.hrtime.bigint() + BigInt(SPIN_NS);
    let got = receiveMessageOnPort(this.#port);
    while (got === undefined && process.hrtime.bigint() < deadline) got = receiveMessageOnPort(this.#port);
    if (got === undefined) {
      this.counts.misses++;
      if (++this.#misses >= MISSES_TO_REST) {
        this.#misses = 0;
        this.#rest = REST_POSTS;
      }
      return;
    }
    this.counts.hits++;
    this.#misses = 0;
    while (got !== undefined) {
      this.#handle(got.message as unknown[]);
      got = receiveMessageOnPort(this.#port);
    }
  }
}
