import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { noopLogger } from '../core/logger.js';
import { FACADE_METHODS, type InferenceServerApi } from '../server/api.js';
import { InferenceServer } from '../server/server.js';
import { FrontEndHost, type Poster } from './host.js';
import { isFacadeMethod } from './methods.js';
import { ProxyServerApi } from './proxy.js';
import type { SyncCaller } from './sync-call.js';
import { Tag } from './wire.js';

/**
 * Every row of FACADE_METHODS crosses: the proxy of a front-end thread forwards it under its own name, and the main
 * thread's host answers it from the real facade. Iterating the table, a method the table names but one side does
 * not carry fails here; a method of the interface the table lacks does not compile (server/api.ts).
 */

type Callable = Record<string, (...args: unknown[]) => unknown>;

const rows = Object.entries(FACADE_METHODS);
const ports: MessagePort[] = [];
after(() => {
  for (const p of ports) p.close();
});

function channel(): [MessagePort, MessagePort] {
  const { port1, port2 } = new MessageChannel();
  ports.push(port1, port2);
  return [port1, port2];
}

/** The proxy's sync calls, recorded instead of crossing (a SyncCaller blocks the thread that runs this test). */
function recordingProxy(): { proxy: ProxyServerApi; calls: [string, unknown[]][]; port: MessagePort } {
  const calls: [string, unknown[]][] = [];
  const sync = {
    call(method: string, args: unknown[]): unknown {
      calls.push([method, args]);
      return method === 'checkModel'
        ? { name: 'm', version: 1, maxBatchSize: 0, inputs: [], decoupled: false }
        : method;
    },
  };
  const [here, there] = channel();
  return { proxy: new ProxyServerApi(here, sync as unknown as SyncCaller), calls, port: there };
}

/** A facade whose every table method records how it was called and answers its own name. */
function recordingApi(): { api: InferenceServerApi; calls: [string, unknown[]][] } {
  const calls: [string, unknown[]][] = [];
  const api: Callable = {};
  for (const [method, kind] of rows) {
    api[method] = (...args: unknown[]): unknown => {
      calls.push([method, args]);
      if (method === 'checkModel') return { name: 'm', version: 1, maxBatchSize: 0, inputs: [], decoupled: false };
      return kind === 'async' ? Promise.resolve(method) : method;
    };
  }
  return { api: api as unknown as InferenceServerApi, calls };
}

function nextMessage(port: MessagePort): Promise<unknown[]> {
  return new Promise((resolve) => port.once('message', resolve));
}

describe('FACADE_METHODS', () => {
  it('names only methods the server implements', () => {
    for (const [method] of rows) {
      assert.equal(typeof (InferenceServer.prototype as unknown as Callable)[method], 'function', method);
    }
  });

  it('is forwarded by the front-end proxy, row by row, under its own name', async () => {
    for (const [method, kind] of rows) {
      if (kind !== 'sync' && kind !== 'async') continue;
      const { proxy, calls, port } = recordingProxy();
      const call = (proxy as unknown as Callable)[method];
      assert.equal(typeof call, 'function', `the proxy has no '${method}'`);
      if (kind === 'sync') {
        call.call(proxy, 'm', '1');
        assert.equal(calls.length, 1, method);
        assert.equal(calls[0][0], method);
        continue;
      }
      // An async row: a CALL message carrying the method, its options without the signal, the signal as an id.
      const signal = new AbortController().signal;
      const sent = nextMessage(port);
      const answer = call.call(proxy, 'm', { signal, flag: true }) as Promise<unknown>;
      const [tag, batch] = await sent;
      assert.equal(tag, Tag.BATCH);
      const [msg] = batch as unknown[][];
      assert.equal(msg[0], Tag.CALL);
      assert.equal(msg[3], method);
      assert.notEqual(msg[2], 0, 'the signal crosses as an id');
      assert.deepEqual(msg[4], ['m', { flag: true }]);
      proxy.handle([Tag.REPLY, msg[1], true, method]);
      assert.equal(await answer, method);
      assert.equal(calls.length, 0, `'${method}' went the sync way`);
    }
  });

  it('is answered by the main thread host from the facade, row by row', async () => {
    const { api, calls } = recordingApi();
    const [syncHere, syncThere] = channel();
    const replies: unknown[][] = [];
    let replied: (() => void) | undefined;
    const poster: Poster = {
      postMessage(value) {
        replies.push(...((value as unknown[])[1] as unknown[][]));
        replied?.();
      },
    };
    const host = new FrontEndHost(api, poster, { port: syncHere, flag: new SharedArrayBuffer(4) }, noopLogger);
    let seq = 0;
    for (const [method, kind] of rows) {
      if (kind === 'sync') {
        const answer = nextMessage(syncThere);
        syncThere.postMessage([++seq, method, ['m', '1']]);
        const [got, ok, value] = await answer;
        assert.deepEqual([got, ok], [seq, true], method);
        if (method !== 'checkModel') assert.equal(value, method);
        assert.deepEqual(calls.pop(), [method, ['m', '1']]);
      } else if (kind === 'async') {
        const answered = new Promise<void>((resolve) => (replied = resolve));
        host.handle([Tag.CALL, ++seq, 7, method, ['m', { flag: true }]]);
        await answered;
        assert.deepEqual(replies.pop(), [Tag.REPLY, seq, true, method]);
        const [name, args] = calls.pop() ?? [];
        assert.equal(name, method);
        const [first, opts] = args as [string, { flag: boolean; signal: AbortSignal }];
        assert.equal(first, 'm');
        assert.equal(opts.flag, true);
        assert.ok(opts.signal instanceof AbortSignal, `'${method}' is given the host's signal`);
      }
    }
    assert.equal(calls.length, 0);
  });

  it('refuses, on the host, a name that is no row of its kind', async () => {
    const { api, calls } = recordingApi();
    const [syncHere, syncThere] = channel();
    const host = new FrontEndHost(
      api,
      { postMessage() {} },
      { port: syncHere, flag: new SharedArrayBuffer(4) },
      noopLogger,
    );
    for (const name of ['infer', 'close', 'loadModel', 'constructor', 'toString']) {
      const answer = nextMessage(syncThere);
      syncThere.postMessage([1, name, []]);
      const [, ok, err] = await answer;
      assert.equal(ok, false, name);
      assert.match(JSON.stringify(err), /unknown call/);
    }
    assert.ok(host);
    assert.equal(calls.length, 0);
    assert.equal(isFacadeMethod('isLive', 'async'), false);
    assert.equal(isFacadeMethod('loadModel', 'async'), true);
  });
});
