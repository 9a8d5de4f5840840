import { CancelledError } from './errors.js';

/**
 * Waits for `p` unless `signal` aborts first; then rejects CANCELLED with `message` while `p` goes on (the caller
 * stops waiting; the work is not undone). `onAbort` runs once when the caller gives up.
 */
export function abortable<T>(p: Promise<T>, signal: AbortSignal, message: string, onAbort?: () => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const abort = (): void => {
      onAbort?.();
      reject(new CancelledError(message));
    };
    if (signal.aborted) return abort();
    signal.addEventListener('abort', abort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort));
  });
}
