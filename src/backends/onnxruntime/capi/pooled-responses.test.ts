import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EngineRequest, EngineResponse } from '../../contract.js';
import { splitOutputs } from '../../batching.js';
import { OutputPool, type PooledBuffer } from './output-pool.js';
import { lendPooled } from './pooled-responses.js';

const request = (viewsOk: boolean): EngineRequest => ({ inputs: [], outputs: ['Y'], batchSize: 1, viewsOk });

/** A batch of 3 rows' output Y in a pooled buffer (TEST DOUBLE memory), row r holding r+1 in each of its 4 floats. */
function batch(pool: OutputPool): { pooled: PooledBuffer; responses: EngineResponse[]; requests: EngineRequest[] } {
  const pooled = pool.take(48) as PooledBuffer;
  const y = new Float32Array(pooled.view.buffer, pooled.view.byteOffset, 12);
  for (let i = 0; i < 12; i++) y[i] = Math.floor(i / 4) + 1;
  const requests = [request(true), request(false), request(true)];
  const responses = splitOutputs(requests, [{ name: 'Y', datatype: 'FP32', shape: [3, 4], data: y }]);
  return { pooled, responses, requests };
}

describe('lendPooled (a batch answered from one pooled buffer)', () => {
  it('viewers share one lease, the others get copies; the buffer is back only after the last viewer released', () => {
    const pool = new OutputPool({ alloc: (n) => new Uint8Array(n), free: () => undefined }, 1 << 20);
    const { pooled, responses, requests } = batch(pool);
    const out = lendPooled(requests, responses, pooled, pool);
    const memory = pooled.view.buffer;
    const inPool = (r: EngineResponse): boolean => (r.outputs[0].data as Float32Array).buffer === memory;
    assert.deepEqual(out.map(inPool), [true, false, true], 'viewers read the pooled bytes, a non-viewer owns its own');
    assert.deepEqual([...(out[1].outputs[0].data as Float32Array)], [2, 2, 2, 2]);
    assert.equal(out[1].lease, undefined);
    out[0].lease!.release();
    out[0].lease!.release(); // a second release of one share changes nothing
    assert.equal(pool.stats().lentBytes, pooled.view.byteLength, 'one viewer still reads it');
    const other = pool.take(48) as PooledBuffer;
    assert.ok(other.view.buffer !== memory, 'a buffer a viewer can still read is not handed out');
    out[2].lease!.release();
    assert.equal(pool.stats().lentBytes, other.view.byteLength, 'only the other take is lent now');
  });

  it('without a viewer the outputs are copied and the buffer is back at once', () => {
    const pool = new OutputPool({ alloc: (n) => new Uint8Array(n), free: () => undefined }, 1 << 20);
    const { pooled, responses } = batch(pool);
    const out = lendPooled([request(false), request(false), request(false)], responses, pooled, pool);
    assert.equal(pool.stats().lentBytes, 0);
    assert.deepEqual(
      out.map((r) => [...(r.outputs[0].data as Float32Array)]),
      [
        [1, 1, 1, 1],
        [2, 2, 2, 2],
        [3, 3, 3, 3],
      ],
    );
    // The buffer is free again: the next take gets it, and the copies do not change when it is overwritten.
    const again = pool.take(48) as PooledBuffer;
    assert.ok(again.view.buffer === pooled.view.buffer);
    again.view.fill(0);
    assert.deepEqual([...(out[2].outputs[0].data as Float32Array)], [3, 3, 3, 3]);
  });
});
