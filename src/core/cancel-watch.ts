/**
 * Watches AbortSignals for queued requests with one listener per signal, not one per request.
 *
 * Why: adding and removing an EventTarget listener for every request, plus an AbortController per request, cost
 * about a quarter of the main thread's time per `simple` request under load (measured). The HTTP front end now
 * gives all requests of one connection the same signal (aborted when the connection closes), so the listener is
 * added once per connection; each request only enters and leaves a Set.
 *
 * One listener per signal for the whole process, shared by every watch (every scheduler, every model version): a
 * listener per watch grew by one on each keep-alive connection at every reload (MaxListenersExceededWarning after ten
 * reloads) and kept each unloaded model's scheduler reachable until the connection closed. Now an entry lives only
 * while its request is watched, and a retired watch leaves nothing on the signal.
 */

/**
 * Per signal: each watch with its watched items (one item may be watched by two watches, e.g. a scheduler and the
 * batch it runs). A watch whose last item leaves is removed, so nothing of a retired watch stays on the signal.
 */
type Watchers = Map<CancelWatch<never>, Set<unknown>>;
const registry = new WeakMap<AbortSignal, Watchers>();

function watchersOf(signal: AbortSignal): Watchers {
  let watchers = registry.get(signal);
  if (watchers === undefined) {
    const map: Watchers = new Map();
    watchers = map;
    registry.set(signal, map);
    signal.addEventListener(
      'abort',
      () => {
        const cancelled = [...map].map(([w, items]) => [w, [...items]] as const);
        map.clear();
        for (const [w, items] of cancelled) for (const item of items) w.onAbort(item as never);
      },
      { once: true },
    );
  }
  return watchers;
}

export class CancelWatch<T> {
  /** Called for every item still watched when its signal aborts. */
  readonly onAbort: (item: T) => void;

  constructor(onAbort: (item: T) => void) {
    this.onAbort = onAbort;
  }

  watch(signal: AbortSignal | undefined, item: T): void {
    if (signal === undefined) return;
    const watchers = watchersOf(signal);
    const self = this as unknown as CancelWatch<never>;
    let items = watchers.get(self);
    if (items === undefined) {
      items = new Set();
      watchers.set(self, items);
    }
    items.add(item);
  }

  unwatch(signal: AbortSignal | undefined, item: T): void {
    if (signal === undefined) return;
    const watchers = registry.get(signal);
    const self = this as unknown as CancelWatch<never>;
    const items = watchers?.get(self);
    if (items === undefined) return;
    items.delete(item);
    if (items.size === 0) watchers?.delete(self);
  }
}
