/**
 * Triton's `--model-load-thread-count`: at most this many models load at once (Triton's load thread pool, default
 * 4). A load takes a slot before it reads anything and gives it back when it is done; an ensemble gives its slot
 * back before it waits for its composing models, so a limit of 1 cannot deadlock on them. First come, first served.
 */
export const DEFAULT_MODEL_LOAD_THREAD_COUNT = 4;

export class LoadSlots {
  #free: number;
  readonly #waiting: Array<() => void> = [];

  constructor(count = DEFAULT_MODEL_LOAD_THREAD_COUNT) {
    this.#free = count;
  }

  /** Resolves with the slot's release, once one is free; calling the release more than once is harmless. */
  async acquire(): Promise<() => void> {
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      // The slot passes straight to the next waiter; otherwise it is free again.
      const next = this.#waiting.shift();
      if (next) next();
      else this.#free++;
    };
  }
}
