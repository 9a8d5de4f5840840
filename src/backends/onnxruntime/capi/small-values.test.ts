import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { check, ortApi, type Out, type Ptr } from './api.js';
import { SMALL_MAX_BYTES, SmallValues } from './small-values.js';

function cpuMemoryInfo(): Ptr {
  const out: Out = [null];
  check(ortApi().CreateCpuMemoryInfo(1, 0, out));
  return out[0] as Ptr;
}

describe('small values (OrtValues cached per name and shape)', () => {
  it('copies an input in: the request may change its memory afterwards, and a second shape gets a value of its own', () => {
    const small = new SmallValues(cpuMemoryInfo());
    try {
      const data = Int32Array.from({ length: 16 }, (_, i) => i);
      const a = small.input({ name: 'X', datatype: 'INT32', shape: [1, 16], data });
      assert.ok(a?.cached);
      data.fill(-1);
      assert.deepEqual(Array.from(new Int32Array((a.borrowed as Uint8Array).slice().buffer)).slice(0, 3), [0, 1, 2]);
      const again = small.input({ name: 'X', datatype: 'INT32', shape: [1, 16], data });
      assert.equal(again?.value, a.value, 'the same name and shape reuse the value');
      const other = small.input({ name: 'X', datatype: 'INT32', shape: [2, 8], data });
      assert.notEqual(other?.value, a.value);
    } finally {
      small.release();
    }
  });

  it('an answer copies its output out: the next run writing the cached memory does not change it', () => {
    const small = new SmallValues(cpuMemoryInfo());
    try {
      const buffer = small.output('Y', 'INT32', [1, 4])!;
      (buffer.tensor.data as Int32Array).set([1, 2, 3, 4]);
      const answer = SmallValues.copyOut(buffer);
      (buffer.tensor.data as Int32Array).set([9, 9, 9, 9]);
      assert.deepEqual(Array.from(answer.data as Int32Array), [1, 2, 3, 4]);
      assert.notEqual((answer.data as Int32Array).buffer, (buffer.tensor.data as Int32Array).buffer);
    } finally {
      small.release();
    }
  });

  it('BAD INPUT - leaves large, empty, BYTES and malformed tensors to the per-run path', () => {
    const small = new SmallValues(cpuMemoryInfo());
    try {
      const big = new Float32Array(SMALL_MAX_BYTES / 4 + 1);
      assert.equal(small.input({ name: 'X', datatype: 'FP32', shape: [big.length], data: big }), undefined);
      assert.equal(small.input({ name: 'X', datatype: 'FP32', shape: [0], data: new Float32Array(0) }), undefined);
      assert.equal(small.input({ name: 'S', datatype: 'BYTES', shape: [1], data: [new Uint8Array(1)] }), undefined);
      // Data that does not fit its shape: createInput answers it with its INVALID_ARG.
      assert.equal(small.input({ name: 'X', datatype: 'INT32', shape: [4], data: new Int32Array(3) }), undefined);
      assert.equal(small.output('Y', 'BYTES', [1]), undefined);
    } finally {
      small.release();
    }
  });
});
