import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MessageChannel, Worker } from 'node:worker_threads';
import { NotFoundError, UnavailableError } from '../core/errors.js';
import { SyncCaller } from './sync-call.js';

/**
 * The caller sleeps on this (main) thread while a real worker thread answers with answerSyncCalls, as the main
 * thread answers front-end threads in the server. The caller's timeout (1 s) is far above an answer's normal time
 * (well under 1 ms), so load does not make an answer late; the late answer of the timeout test is held back by a
 * flag the test raises, not by a clock.
 */
const ANSWERER = `
import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then(async (tsx) => {
  tsx.register();
  const { workerData } = await import('node:worker_threads');
  const { answerSyncCalls } = await import(${JSON.stringify(new URL('./sync-call.ts', import.meta.url).href)});
  const { NotFoundError } = await import(${JSON.stringify(new URL('../core/errors.ts', import.meta.url).href)});
  answerSyncCalls(workerData.port, workerData.flag, (method, args) => {
    if (method === 'modelReady') return { args };
    if (method === 'modelMetadata') throw new NotFoundError('unknown model ' + args[0]);
    if (method === 'isReady') {
      Atomics.wait(new Int32Array(workerData.release), 0, 0);
      return 'late';
    }
    return method;
  });
});`;

describe('SyncCaller', () => {
  let worker: Worker;
  let caller: SyncCaller;
  const release = new Int32Array(new SharedArrayBuffer(4));
  before(() => {
    const { port1, port2 } = new MessageChannel();
    const flag = new SharedArrayBuffer(4);
    worker = new Worker(ANSWERER, {
      eval: true,
      workerData: { port: port2, flag, release: release.buffer },
      transferList: [port2],
    });
    caller = new SyncCaller(port1, flag, 1000);
  });
  after(() => worker.terminate());

  it('returns the answer of the other thread synchronously', () => {
    // The first call also waits for the answering thread to start (tsx): retried until it answers.
    let first: unknown;
    for (let i = 0; i < 100 && first === undefined; i++) {
      try {
        first = caller.call('isLive', []);
      } catch (err) {
        assert.ok(err instanceof UnavailableError);
      }
    }
    assert.equal(first, 'isLive');
    assert.deepEqual(caller.call('modelReady', ['m', '2']), { args: ['m', '2'] });
  });

  it('rethrows the error class and message raised on the other thread', () => {
    assert.throws(
      () => caller.call('modelMetadata', ['x']),
      (err: unknown) => err instanceof NotFoundError && err.message === 'unknown model x',
    );
  });

  it('BAD CALL - times out as UNAVAILABLE, then drops the late answer instead of returning it to the next call', () => {
    assert.throws(() => caller.call('isReady', []), UnavailableError);
    // Now the late answer ('late') is sent, before the next call's: it must be skipped.
    Atomics.store(release, 0, 1);
    Atomics.notify(release, 0);
    let next: unknown;
    for (let i = 0; i < 10 && next === undefined; i++) {
      try {
        next = caller.call('metadata', []);
      } catch (err) {
        assert.ok(err instanceof UnavailableError);
      }
    }
    assert.equal(next, 'metadata');
  });
});
