import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { completeConfig } from './autocomplete.js';
import type { ModelSignature } from './contract.js';

const opts = { autoComplete: true, defaultMaxBatchSize: 4, warn: () => {} };
const batchable: ModelSignature = {
  inputs: [{ name: 'X', datatype: 'FP32', dims: [-1, 3] }],
  outputs: [{ name: 'Y', datatype: 'FP32', dims: [-1, 2] }],
};

describe('auto-complete (onnxruntime rules)', () => {
  it('fills inputs, outputs, default-max-batch-size and an empty dynamic_batching when every tensor batches', () => {
    const c = completeConfig({ name: 'm' }, batchable, 'm', opts);
    assert.equal(c.max_batch_size, 4);
    assert.deepEqual(c.input, [{ name: 'X', data_type: 'TYPE_FP32', dims: [3] }]);
    assert.deepEqual(c.output, [{ name: 'Y', data_type: 'TYPE_FP32', dims: [2] }]);
    assert.deepEqual(c.dynamic_batching, {});
  });

  it('leaves max_batch_size 0 when a tensor has a fixed first dim, and keeps full dims', () => {
    const sig: ModelSignature = { ...batchable, outputs: [{ name: 'Y', datatype: 'FP32', dims: [1, 2] }] };
    const c = completeConfig({}, sig, 'm', opts);
    assert.equal(c.max_batch_size ?? 0, 0);
    assert.deepEqual(c.input?.[0].dims, [-1, 3]);
    assert.equal(c.dynamic_batching, undefined);
  });

  it('fills only the missing side and a scalar becomes dims [1] with reshape []', () => {
    const sig: ModelSignature = { inputs: batchable.inputs, outputs: [{ name: 'S', datatype: 'INT64', dims: [-1] }] };
    const c = completeConfig(
      { max_batch_size: 2, input: [{ name: 'X', data_type: 'TYPE_FP32', dims: [3] }] },
      sig,
      'm',
      opts,
    );
    assert.deepEqual(c.output, [{ name: 'S', data_type: 'TYPE_INT64', dims: [1], reshape: { shape: [] } }]);
  });

  it('BAD CONFIG - non-zero max_batch_size on a model that cannot batch', () => {
    const sig: ModelSignature = {
      inputs: [{ name: 'X', datatype: 'FP32', dims: [3] }],
      outputs: [{ name: 'Y', datatype: 'FP32', dims: [3] }],
    };
    assert.throws(
      () => completeConfig({ max_batch_size: 8 }, sig, 'm', opts),
      /does not support batching .* max_batch_size: 8/,
    );
  });

  it('BAD CONFIG - an input the model lacks, or a model input the config lacks', () => {
    const full = { max_batch_size: 4, output: [{ name: 'Y', data_type: 'TYPE_FP32' as const, dims: [2] }] };
    assert.throws(
      () =>
        completeConfig({ ...full, input: [{ name: 'Z', data_type: 'TYPE_FP32', dims: [3] }] }, batchable, 'm', opts),
      /declares input 'Z', but the model file's inputs are \['X'\]/,
    );
    assert.throws(
      () => completeConfig({ ...full, input: [] }, batchable, 'm', { ...opts, autoComplete: false }),
      /needs input\(s\) \['X'\]/,
    );
  });
});

describe('auto-complete leaves complete configs alone', () => {
  it('adds no dynamic_batching when the config already declares every input and output (Triton skips auto-complete)', () => {
    const c = completeConfig(
      {
        max_batch_size: 8,
        input: [{ name: 'X', data_type: 'TYPE_FP32', dims: [3] }],
        output: [{ name: 'Y', data_type: 'TYPE_FP32', dims: [2] }],
      },
      batchable,
      'm',
      opts,
    );
    assert.equal(c.dynamic_batching, undefined);
  });
});
