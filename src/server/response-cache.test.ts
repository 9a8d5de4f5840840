import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Tensor } from '../core/tensor.js';
import { BLS_DEPTH_PARAM } from '../backends/python/bls.js';
import { cacheKey, ResponseCache } from './response-cache.js';

const out = (x: number): Tensor[] => [{ name: 'Y', datatype: 'FP32', shape: [1], data: new Float32Array([x]) }];
const y = (t: readonly Tensor[] | undefined) => (t?.[0].data as Float32Array | undefined)?.[0];

describe('ResponseCache generations', () => {
  it('keeps the entries of two loads of one version apart, and forgets one without the other', () => {
    const c = new ResponseCache(1 << 16);
    const oldLoad = {};
    const newLoad = {};
    assert.equal(c.insert(c.slot(oldLoad, 'k'), out(1)), 'inserted');
    assert.equal(c.lookup(c.slot(newLoad, 'k')), undefined, 'the same key of another load is another entry');
    c.insert(c.slot(newLoad, 'k'), out(2));
    c.forget(oldLoad);
    assert.equal(c.lookup(c.slot(oldLoad, 'k')), undefined);
    assert.equal(y(c.lookup(c.slot(newLoad, 'k'))), 2);
    assert.equal(c.counters().entries, 1);
  });

  it('refuses an answer whose slot was taken before its load was forgotten, and holds no bytes for it', () => {
    const c = new ResponseCache(1 << 16);
    const load = {};
    const inFlight = c.slot(load, 'k');
    c.forget(load);
    assert.equal(c.insert(inFlight, out(1)), 'stale');
    assert.equal(c.lookup(inFlight), undefined);
    assert.deepEqual([c.counters().entries, c.counters().bytes], [0, 0]);
    // A slot taken after the forget stores again (an ensemble whose step was reloaded keeps caching).
    assert.equal(c.insert(c.slot(load, 'k'), out(3)), 'inserted');
    assert.equal(y(c.lookup(c.slot(load, 'k'))), 3);
  });

  it('an eviction leaves nothing of the entry in its load, so a forget after it frees no bytes twice', () => {
    const one = ResponseCache.sizeOf('0/k', out(0));
    const c = new ResponseCache(one + 8);
    const a = {};
    const b = {};
    c.insert(c.slot(a, 'k'), out(1));
    c.insert(c.slot(b, 'k'), out(2));
    assert.equal(c.counters().evictions, 1);
    c.forget(a);
    assert.deepEqual([c.counters().entries, c.counters().bytes], [1, ResponseCache.sizeOf('1/k', out(2))]);
  });
});

describe('cacheKey and BLS calls', () => {
  it('REGRESSION a BLS call hits the entries of client calls: the depth the server adds is not part of the key', () => {
    const t: Tensor = { name: 'X', datatype: 'INT32', shape: [1], data: new Int32Array([1]) } as Tensor;
    const req = { inputs: [t], outputs: ['Y'], batchSize: 1 };
    assert.equal(cacheKey('m', 1, req, { [BLS_DEPTH_PARAM]: 2 }), cacheKey('m', 1, req, {}));
    assert.equal(cacheKey('m', 1, req, { k: 'v', [BLS_DEPTH_PARAM]: 1 }), cacheKey('m', 1, req, { k: 'v' }));
    assert.notEqual(cacheKey('m', 1, req, { k: 'v' }), cacheKey('m', 1, req, {}));
  });
});
