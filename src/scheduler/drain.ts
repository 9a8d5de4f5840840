import { UnavailableError } from '../core/errors.js';

/**
 * The stop of a scheduler, written once (direct, dynamic, sequence, ensemble): `stop()` stops accepting and resolves
 * once nothing is queued and nothing runs; it is idempotent (every call gets the same promise). The scheduler counts
 * its running batches with `begin()` / `end()`, says how many requests wait through `queued`, and calls `check()`
 * wherever its queue may have emptied (a cancel, a timeout, `failQueued`, the end of its pump). What it still
 * accepts after the stop is its own rule (the sequence batcher lets started sequences go on): a request it
 * accepts while draining is queued or running, so the drain waits for it too. Threading: the main thread.
 */
export class Drain {
  readonly #queued: () => number;
  #running = 0;
  #stopping = false;
  #done: Promise<void> | undefined;
  #resolve: (() => void) | undefined;

  /** `queued`: the requests waiting, not yet in a batch. */
  constructor(queued: () => number) {
    this.#queued = queued;
  }

  /** Whether stop() was called: the scheduler refuses new work (see `refusal()`) and stops waiting for batches. */
  get stopping(): boolean {
    return this.#stopping;
  }

  /** What a stopped scheduler answers a request it no longer takes (Triton's UNAVAILABLE while unloading). */
  refusal(): Promise<never> {
    return Promise.reject(new UnavailableError('model is being unloaded'));
  }

  /** A batch (or ensemble run) started. */
  begin(): void {
    this.#running++;
  }

  /** It settled; resolves the stop if it was the last work. */
  end(): void {
    this.#running--;
    this.check();
  }

  /** Resolves the stop if stopping and idle; returns whether it is drained (the scheduler may then drop its timer). */
  check(): boolean {
    if (!this.#stopping || this.#running > 0 || this.#queued() > 0) return false;
    this.#resolve?.();
    return true;
  }

  /** Stops accepting; resolves once drained. The caller pumps next, so queued work runs without waiting. */
  stop(): Promise<void> {
    this.#stopping = true;
    this.#done ??= new Promise<void>((resolve) => (this.#resolve = resolve));
    this.check();
    return this.#done;
  }
}
