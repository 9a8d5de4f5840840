import { timeoutReason } from './errors.js';

/**
 * One AbortSignal per call from the caller's signal and the timeout. Written by hand rather than with
 * AbortSignal.any + AbortSignal.timeout so the timer and the listener are released as soon as the call ends (a
 * long-lived caller signal would otherwise collect one listener per call), and so it runs on older browsers too.
 */

/** A call's signal and the function that releases its timer and listener; call `dispose` when the call settles. */
export interface CallSignal {
  signal: AbortSignal;
  dispose(): void;
}

/** Builds the call signal; `timeoutMs` undefined or ≤ 0 means no timeout. */
export function callSignal(signal: AbortSignal | undefined, timeoutMs: number | undefined): CallSignal {
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const onAbort = (): void => controller.abort(signal?.reason);
  if (signal?.aborted) {
    controller.abort(signal.reason);
  } else {
    signal?.addEventListener('abort', onAbort, { once: true });
    if (timeoutMs !== undefined && timeoutMs > 0) {
      timer = setTimeout(() => controller.abort(timeoutReason(timeoutMs)), timeoutMs);
    }
  }
  return {
    signal: controller.signal,
    dispose: () => {
      if (timer !== undefined) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    },
  };
}
