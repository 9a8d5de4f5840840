import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import koffi from 'koffi';
import type { InferRequest, InferResponse } from '../core/inference.js';
import { noopLogger } from '../core/logger.js';
import { registerAddressable } from '../native/addressable.js';
import type { InferenceServerApi, InferOptions } from '../server/api.js';
import { FrontEndHost } from './host.js';
import { ProxyServerApi } from './proxy.js';
import type { SyncCaller } from './sync-call.js';

/**
 * Lent outputs through a front-end thread: the host (main thread) and the proxy (front-end thread) over real
 * MessageChannels, against a facade whose response views native memory registered as addressable, as an engine's
 * shared-memory block is (runtime/process/shm.ts). A large output must reach the thread as a view of that same
 * memory (no copy on the main thread), its lease held until the thread gives it back; a small one is copied and its
 * lease given back once posted.
 */

const ports: MessagePort[] = [];
const memory: unknown[] = [];
after(() => {
  for (const p of ports) p.close();
  for (const m of memory) koffi.free(m);
});

/** `bytes` of native memory, registered as addressable, as a Float32Array. */
function nativeFloats(bytes: number): Float32Array {
  const ptr = koffi.alloc('uint8_t', bytes);
  memory.push(ptr);
  const buffer = koffi.view(ptr, bytes);
  registerAddressable(buffer, koffi.address(ptr));
  return new Float32Array(buffer);
}

/** A facade answering every infer with `output`, lent (with a counted lease) when the caller asked for views. */
function lendingApi(
  output: Float32Array,
  datatype: 'FP32' | 'BYTES' = 'FP32',
): { api: InferenceServerApi; released: () => number; views: boolean[] } {
  let released = 0;
  const views: boolean[] = [];
  const api = {
    checkModel: () => ({ name: 'm', version: 1, maxBatchSize: 0, inputs: [], decoupled: false }),
    infer(_r: InferRequest, opts: InferOptions = {}): Promise<InferResponse> {
      views.push(opts.views === true);
      const out = { name: 'OUT', datatype, shape: [output.length] };
      if (opts.views !== true)
        return Promise.resolve({ model: 'm', version: '1', outputs: [{ ...out, data: output.slice() }] });
      let done = false;
      const lease = { release: () => void (done || ((done = true), released++)) };
      return Promise.resolve({ model: 'm', version: '1', outputs: [{ ...out, data: output }], lease });
    },
  };
  return { api: api as unknown as InferenceServerApi, released: () => released, views };
}

function connect(api: InferenceServerApi): { host: FrontEndHost; proxy: ProxyServerApi } {
  const { port1: hostPort, port2: threadPort } = new MessageChannel();
  const { port1: syncHere } = new MessageChannel();
  ports.push(hostPort, threadPort, syncHere);
  const host = new FrontEndHost(api, hostPort, { port: syncHere, flag: new SharedArrayBuffer(4) }, noopLogger);
  hostPort.on('message', (m: unknown[]) => host.handle(m));
  const sync = { call: () => ({ name: 'm', version: 1, maxBatchSize: 0, inputs: [], decoupled: false, token: 0 }) };
  const proxy = new ProxyServerApi(threadPort, sync as unknown as SyncCaller);
  threadPort.on('message', (m: unknown[]) => proxy.handle(m));
  return { host, proxy };
}

const request: InferRequest = { model: 'm', inputs: [] };
/** Enough turns of both event loops for a message to cross and be handled. */
const crossed = () => new Promise((r) => setTimeout(r, 20));

describe('lent outputs through a front-end thread', () => {
  it('a large output reaches the thread as a view of the engine memory; its lease waits for the thread', async () => {
    const source = nativeFloats(256 * 1024).fill(1.5);
    const { api, released } = lendingApi(source);
    const { host, proxy } = connect(api);
    const response = await proxy.infer(request, { views: true });
    const got = response.outputs[0].data as Float32Array;
    assert.equal(got.length, source.length);
    assert.equal(got[12345], 1.5);
    // The same memory, not a copy: what the engine writes there shows through the thread's view.
    source[12345] = 7;
    assert.equal(got[12345], 7, 'the main thread copied the output');
    assert.equal(released(), 0, 'the lease is held while the thread may read');
    assert.equal(host.lent, 1);
    assert.ok(response.lease, 'the thread got the lease to give back');
    response.lease.release();
    response.lease.release();
    await crossed();
    assert.equal(released(), 1, 'given back once the thread said so, once');
    assert.equal(host.lent, 0);
  });

  it('a small lent output is copied into the post, and its lease given back once posted', async () => {
    const source = nativeFloats(1024).fill(2.5);
    const { api, released } = lendingApi(source);
    const { host, proxy } = connect(api);
    const response = await proxy.infer(request, { views: true });
    assert.equal(response.lease, undefined, 'nothing to give back');
    assert.equal(released(), 1);
    assert.equal(host.lent, 0);
    source[3] = 9;
    assert.equal((response.outputs[0].data as Float32Array)[3], 2.5, 'a copy');
  });

  it('a caller that did not ask for views gets none (the host asks the facade without)', async () => {
    const source = nativeFloats(256 * 1024).fill(3);
    const { api, views } = lendingApi(source);
    const { proxy } = connect(api);
    const response = await proxy.infer(request);
    assert.deepEqual(views, [false]);
    assert.equal(response.lease, undefined);
  });

  it('FAULT - the thread dies holding a lent output: the host gives the lease back', async () => {
    const source = nativeFloats(256 * 1024);
    const { api, released } = lendingApi(source);
    const { host, proxy } = connect(api);
    const response = await proxy.infer(request, { views: true });
    assert.ok(response.lease);
    assert.equal(released(), 0);
    host.fail(new Error('front-end thread exited') as never);
    assert.equal(released(), 1);
    assert.equal(host.lent, 0);
  });

  it('FAULT - a lent result the thread cannot read fails its request and gives the lease back', async () => {
    // Bytes that are no BYTES tensor (no valid length prefixes): the thread's unpacking throws.
    const source = nativeFloats(256 * 1024).fill(1e30);
    const { api, released } = lendingApi(source, 'BYTES');
    const { host, proxy } = connect(api);
    const outcome = proxy.infer(request, { views: true }).then(
      () => 'answered',
      (err: Error) => err.message,
    );
    const settled = await Promise.race([
      outcome,
      crossed()
        .then(() => crossed())
        .then(() => 'hung'),
    ]);
    assert.notEqual(settled, 'hung', 'the request was never answered');
    assert.notEqual(settled, 'answered');
    await crossed();
    assert.equal(released(), 1, 'the lease went back');
    assert.equal(host.lent, 0);
  });
});
