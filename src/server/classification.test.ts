import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { classify } from './classification.js';

const text = (d: unknown): string[] => (d as Uint8Array[]).map((b) => new TextDecoder().decode(b));

describe('classification', () => {
  it('returns the top k per batch item as value:index:label, highest first', () => {
    const t = {
      name: 'P',
      datatype: 'FP32' as const,
      shape: [2, 3],
      data: new Float32Array([0.1, 0.7, 0.2, 0.5, 0.25, 0.25]),
    };
    const out = classify(t, 2, true, ['a', 'b', 'c']);
    assert.deepEqual(out.shape, [2, 2]);
    assert.equal(out.datatype, 'BYTES');
    assert.deepEqual(text(out.data), ['0.700000:1:b', '0.200000:2:c', '0.500000:0:a', '0.250000:1:b']);
  });

  it('prints integers plainly, omits labels when there are none, and caps k at the class count', () => {
    const t = { name: 'O', datatype: 'INT32' as const, shape: [3], data: new Int32Array([5, 9, 1]) };
    const out = classify(t, 10, false, undefined);
    assert.deepEqual(out.shape, [3]);
    assert.deepEqual(text(out.data), ['9:1', '5:0', '1:2']);
  });

  it('BAD CALL - refuses a BYTES output', () => {
    const t = { name: 'S', datatype: 'BYTES' as const, shape: [1], data: [new Uint8Array(1)] };
    assert.throws(() => classify(t, 1, false, undefined), /classification needs a numeric output/);
  });
});
