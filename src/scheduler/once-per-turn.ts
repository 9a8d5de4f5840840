/**
 * `fn` run once at the end of this turn of the event loop (setImmediate), however often it is asked for: a
 * scheduler's pump, so that requests arriving in the same poll phase are seen together and can share a batch.
 */
export function oncePerTurn(fn: () => void): () => void {
  let queued = false;
  return () => {
    if (queued) return;
    queued = true;
    setImmediate(() => {
      queued = false;
      fn();
    });
  };
}
