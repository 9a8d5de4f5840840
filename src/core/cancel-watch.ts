/**
 * Watches AbortSignals for queued requests with one listener per signal, not one per request.
 *
 * Why: adding and removing an EventTarget listener for every request, plus an AbortController per request, cost
 * about a quarter of the main thread's time per `simple` request under load (measured). The HTTP front end now
 * gives all requests of one connection the same signal (aborted when the connection closes), so the listener is
 * added once per connection and scheduler; each request only enters and leaves a Set.
 *
 * Ownership: the listener closes over this watch (and so its scheduler) until the signal aborts or is collected;
 * a long-lived connection therefore keeps an unloaded model's scheduler reachable until it closes.
 */
export class CancelWatch<T> {
  readonly #watched = new WeakMap<AbortSignal, Set<T>>();
  readonly #onAbort: (item: T) => void;

  /** `onAbort` is called for every item still watched when its signal aborts. */
  constructor(onAbort: (item: T) => void) {
    this.#onAbort = onAbort;
  }

  watch(signal: AbortSignal | undefined, item: T): void {
    if (signal === undefined) return;
    let items = this.#watched.get(signal);
    if (items === undefined) {
      const set = new Set<T>();
      items = set;
      this.#watched.set(signal, set);
      signal.addEventListener(
        'abort',
        () => {
          const cancelled = [...set];
          set.clear();
          for (const it of cancelled) this.#onAbort(it);
        },
        { once: true },
      );
    }
    items.add(item);
  }

  unwatch(signal: AbortSignal | undefined, item: T): void {
    if (signal !== undefined) this.#watched.get(signal)?.delete(item);
  }
}
