import { errorFromData, errorToData } from '../core/errors.js';
import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import { UnavailableError } from '../core/errors.js';
import type { SyncMethod } from './methods.js';
import type { WireError } from './wire.js';

/**
 * Synchronous calls from a front-end thread to the main thread, for the facade methods the protocols call without
 * awaiting (health, metadata, statistics, settings: InferenceServerApi returns them directly). The calling thread
 * posts the call on a port of its own and sleeps in Atomics.wait until the main thread has posted the answer and
 * raised the flag; then it takes the answer with receiveMessageOnPort. It blocks only its own thread, for one turn
 * of the main thread's event loop; infer's model lookup is cached (proxy.ts), so no inference request waits here.
 *
 * Threading: `SyncCaller` lives in the front-end thread, `answerSyncCalls` on the main thread; the flag is one
 * Int32 in a SharedArrayBuffer both hold: 0 while a call is pending, 1 once an answer was posted.
 */

/** How long a front-end thread waits for the main thread before answering UNAVAILABLE. */
const SYNC_TIMEOUT_MS = 30_000;

type SyncCall = [number, SyncMethod, unknown[]];
type SyncAnswer = [number, true, unknown] | [number, false, WireError];

export class SyncCaller {
  readonly #port: MessagePort;
  readonly #flag: Int32Array;
  readonly #timeoutMs: number;
  #seq = 0;

  constructor(port: MessagePort, flag: SharedArrayBuffer, timeoutMs = SYNC_TIMEOUT_MS) {
    this.#port = port;
    this.#flag = new Int32Array(flag);
    this.#timeoutMs = timeoutMs;
  }

  call<T>(method: SyncMethod, args: unknown[]): T {
    const seq = ++this.#seq;
    Atomics.store(this.#flag, 0, 0);
    const call: SyncCall = [seq, method, args];
    this.#port.postMessage(call);
    const deadline = performance.now() + this.#timeoutMs;
    for (;;) {
      const got = receiveMessageOnPort(this.#port);
      if (got !== undefined) {
        const answer = got.message as SyncAnswer;
        // An answer to an earlier call that timed out: dropped.
        if (answer[0] !== seq) continue;
        if (answer[1]) return answer[2] as T;
        throw errorFromData(answer[2]);
      }
      // The flag may still be raised by a late answer to an earlier call: lower it and look again, so the wait
      // below sleeps rather than spins.
      if (Atomics.load(this.#flag, 0) !== 0) {
        Atomics.store(this.#flag, 0, 0);
        continue;
      }
      const left = deadline - performance.now();
      if (left <= 0) {
        throw new UnavailableError(`the main thread did not answer '${method}' within ${this.#timeoutMs} ms`);
      }
      Atomics.wait(this.#flag, 0, 0, left);
    }
  }
}

/** Main thread: answers the calls arriving on `port` with `handle`, raising the flag after each answer. */
export function answerSyncCalls(
  port: MessagePort,
  flag: SharedArrayBuffer,
  handle: (method: SyncMethod, args: unknown[]) => unknown,
): void {
  const cell = new Int32Array(flag);
  port.on('message', ([seq, method, args]: SyncCall) => {
    let answer: SyncAnswer;
    try {
      answer = [seq, true, handle(method, args)];
    } catch (err) {
      answer = [seq, false, errorToData(err)];
    }
    try {
      port.postMessage(answer);
    } catch (err) {
      // A value that cannot be cloned is a bug here, not the caller's: it gets INTERNAL instead of waiting out.
      port.postMessage([seq, false, errorToData(err)] satisfies SyncAnswer);
    }
    Atomics.store(cell, 0, 1);
    Atomics.notify(cell, 0);
  });
}
