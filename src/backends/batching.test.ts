import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InternalError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { batchOutputNames, joinInputs, splitOutputs } from './batching.js';
import type { EngineRequest } from './contract.js';

/** A request of `rows` rows of `cols` INT32 values, every value `value`. */
const req = (rows: number, value: number, cols = 2, outputs = ['OUTPUT0']): EngineRequest => ({
  inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [rows, cols], data: new Int32Array(rows * cols).fill(value) }],
  outputs,
  batchSize: rows,
});

const int32 = (t: Tensor): number[] => [...(t.data as Int32Array)];

describe('joinInputs', () => {
  it('concatenates inputs into one fresh buffer of exactly the batch, shape [rows, ...dims]', () => {
    const a = req(2, 1);
    const c = req(1, 2);
    const [batch] = joinInputs([a, c]);
    assert.deepEqual(batch.shape, [3, 2]);
    assert.deepEqual(int32(batch), [1, 1, 1, 1, 2, 2]);
    const data = batch.data as Int32Array;
    assert.notEqual(data.buffer, (a.inputs[0].data as Int32Array).buffer, 'a copy, not a request’s buffer');
    assert.equal(data.byteLength, data.buffer.byteLength, 'one allocation of exactly the batch');
  });

  it('joins views that already lie back to back in one buffer without a copy (the worker transport packs them so)', () => {
    const packed = new Int32Array([1, 1, 2, 2, 2, 2]);
    const a: EngineRequest = { ...req(1, 0), inputs: [{ ...req(1, 0).inputs[0], data: packed.subarray(0, 2) }] };
    const b: EngineRequest = {
      ...req(2, 0),
      inputs: [{ ...req(2, 0).inputs[0], data: packed.subarray(2, 6) }],
    };
    const [batch] = joinInputs([a, b]);
    assert.equal((batch.data as Int32Array).buffer, packed.buffer);
    assert.deepEqual(int32(batch), [1, 1, 2, 2, 2, 2]);
    assert.deepEqual(batch.shape, [3, 2]);
  });

  it('passes a batch of one through untouched', () => {
    const a = req(2, 5);
    const [t] = joinInputs([a]);
    assert.equal(t, a.inputs[0]);
  });

  it('finds inputs by name when requests list them in another order; BYTES and ragged inputs join flat', () => {
    const bytes = (s: string) => new TextEncoder().encode(s);
    const r1: EngineRequest = {
      inputs: [
        { name: 'X', datatype: 'INT32', shape: [1, 3], data: new Int32Array([1, 2, 3]) },
        { name: 'S', datatype: 'BYTES', shape: [1, 1], data: [bytes('a')] },
      ],
      outputs: [],
      batchSize: 1,
    };
    const r2: EngineRequest = {
      inputs: [
        { name: 'S', datatype: 'BYTES', shape: [1, 1], data: [bytes('b')] },
        { name: 'X', datatype: 'INT32', shape: [1, 1], data: new Int32Array([4]) },
      ],
      outputs: [],
      batchSize: 1,
    };
    const [x, s] = joinInputs([r1, r2], new Set(['X']));
    assert.deepEqual([x.name, x.shape, int32(x)], ['X', [4], [1, 2, 3, 4]], 'ragged: all elements back to back');
    assert.deepEqual(s.shape, [2, 1]);
    assert.deepEqual(
      (s.data as Uint8Array[]).map((b) => new TextDecoder().decode(b)),
      ['a', 'b'],
    );
  });

  it('BAD CALL - a request of the batch without an input of the first is INTERNAL', () => {
    const other: EngineRequest = { ...req(1, 0), inputs: [{ ...req(1, 0).inputs[0], name: 'OTHER' }] };
    assert.throws(() => joinInputs([req(1, 0), other]), InternalError);
  });
});

describe('splitOutputs', () => {
  const batchOutput = (rows: number): Tensor => ({
    name: 'OUTPUT0',
    datatype: 'INT32',
    shape: [rows, 2],
    data: Int32Array.from({ length: rows * 2 }, (_, i) => i),
  });

  it('answers each request with its own rows, as views of the one output allocation', () => {
    const out = batchOutput(3);
    const [ra, rc] = splitOutputs([req(2, 0), req(1, 0)], [out]);
    assert.deepEqual(ra.outputs[0].shape, [2, 2]);
    assert.deepEqual(int32(ra.outputs[0]), [0, 1, 2, 3]);
    assert.deepEqual(rc.outputs[0].shape, [1, 2]);
    assert.deepEqual(int32(rc.outputs[0]), [4, 5]);
    const buffer = (out.data as Int32Array).buffer;
    assert.equal((ra.outputs[0].data as Int32Array).buffer, buffer);
    assert.equal((rc.outputs[0].data as Int32Array).buffer, buffer);
  });

  it('gives each request only the outputs it asked for, in its order', () => {
    const y: Tensor = { name: 'Y', datatype: 'INT32', shape: [2], data: new Int32Array([7, 8]) };
    const x: Tensor = { name: 'X', datatype: 'INT32', shape: [2], data: new Int32Array([5, 6]) };
    const rs = splitOutputs([req(1, 0, 2, ['Y', 'X']), req(1, 0, 2, ['X'])], [x, y]);
    assert.deepEqual(
      rs.map((r) => r.outputs.map((t) => [t.name, ...int32(t)])),
      [
        [
          ['Y', 7],
          ['X', 5],
        ],
        [['X', 6]],
      ],
    );
    assert.deepEqual(batchOutputNames([req(1, 0, 2, ['Y', 'X']), req(1, 0, 2, ['X', 'Z'])]), ['Y', 'X', 'Z']);
  });

  it('BAD MODEL - an output that lost the batch dimension, or is missing, is INTERNAL naming it', () => {
    assert.throws(
      () => splitOutputs([req(2, 0), req(1, 0)], [batchOutput(2)]),
      (e: unknown) => e instanceof InternalError && /output 'OUTPUT0' has 2 rows for a batch of 3/.test(e.message),
    );
    assert.throws(
      () => splitOutputs([req(1, 0)], []),
      (e: unknown) => e instanceof InternalError && /no output 'OUTPUT0'/.test(e.message),
    );
  });
});
