import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ModelConfig } from '../../config/model-config.js';
import { InvalidArgError } from '../../core/errors.js';
import { noopLogger } from '../../core/logger.js';
import { pytorchBackend } from './backend.js';
import { backendOptions, modelOptions } from './options.js';

const withParams = (p: Record<string, string>): ModelConfig => ({
  name: 'm',
  parameters: Object.fromEntries(Object.entries(p).map(([k, v]) => [k, { string_value: v }])),
});

describe('pytorch backend options', () => {
  it("reads Triton's parameters: booleans in their usual spellings, thread counts as integers", () => {
    const o = modelOptions(
      withParams({
        DISABLE_OPTIMIZED_EXECUTION: 'true',
        INFERENCE_MODE: 'True',
        ENABLE_CACHE_CLEANING: '1',
        ENABLE_WEIGHT_SHARING: 'on',
        ENABLE_JIT_EXECUTOR: 'false',
        ENABLE_JIT_PROFILING: 'no',
        ENABLE_TENSOR_FUSER: 'off',
        INTRA_OP_THREAD_COUNT: '4',
        INTER_OP_THREAD_COUNT: '0',
        SOMETHING_ELSE: 'the model’s own',
      }),
    );
    assert.deepEqual(o, {
      disable_optimized_execution: true,
      inference_mode: true,
      cache_cleaning: true,
      weight_sharing: true,
      jit_executor: false,
      jit_profiling: false,
      tensor_fuser: false,
      nvfuser: undefined,
      intra_op_threads: 4,
      inter_op_threads: 0,
    });
  });

  it('leaves what is unset to torch (undefined switches, 0 threads)', () => {
    const o = modelOptions({ name: 'm' });
    assert.equal(o.jit_executor, undefined);
    assert.equal(o.intra_op_threads, 0);
    assert.equal(o.inference_mode, false);
  });

  it('BAD CONFIG - a bad boolean or count names the parameter and the value', () => {
    assert.throws(
      () => modelOptions(withParams({ INFERENCE_MODE: 'maybe' })),
      (e: unknown) => e instanceof InvalidArgError && /parameter INFERENCE_MODE is "maybe"/.test(e.message),
    );
    assert.throws(
      () => modelOptions(withParams({ INTRA_OP_THREAD_COUNT: '-1' })),
      /INTRA_OP_THREAD_COUNT=-1: expected an integer >= 0/,
    );
    assert.throws(() => modelOptions(withParams({ INTER_OP_THREAD_COUNT: 'two' })), /expected an integer/);
  });

  it('BAD CONFIG - an unknown --backend-config key lists the known ones', () => {
    assert.throws(() => backendOptions({ 'no-such': '1' }), /pytorch,no-such: unknown key; .*python-executable/);
    assert.equal(backendOptions({ 'start-timeout-seconds': '5' }).startTimeoutMs, 5000);
    assert.equal(backendOptions({ 'default-max-batch-size': '4' }).pythonExecutable, undefined);
  });

  it('BAD CONFIG - auto-complete refuses a config without inputs or outputs, saying what to declare', async () => {
    const b = pytorchBackend({ kinds: ['KIND_CPU'] });
    const ctx = {
      modelName: 'm',
      modelPath: '/x/1/model.pt',
      backendConfig: {},
      autoComplete: true,
      logger: noopLogger,
    };
    await assert.rejects(
      b.autoComplete({ name: 'm' }, ctx),
      (e: unknown) =>
        e instanceof InvalidArgError &&
        /every input and every output with name, data_type and dims/.test(e.message) &&
        /INPUT__0/.test(e.message),
    );
    await assert.rejects(
      b.autoComplete({ name: 'm', input: [{ name: 'x', data_type: 'TYPE_FP32', dims: [1] }] }, ctx),
      /must declare max_batch_size and every output/,
    );
    const full: ModelConfig = {
      name: 'm',
      input: [{ name: 'x', data_type: 'TYPE_FP32', dims: [1] }],
      output: [{ name: 'y', data_type: 'TYPE_FP32', dims: [1] }],
    };
    assert.deepEqual(await b.autoComplete(full, { ...ctx, autoComplete: false }), full);
  });

  it('describes itself as Triton does: pytorch_libtorch, model.pt', () => {
    const b = pytorchBackend({ kinds: ['KIND_CPU'] });
    assert.deepEqual([b.name, b.platforms, b.defaultModelFilename], ['pytorch', ['pytorch_libtorch'], 'model.pt']);
    assert.ok(b.datatypes.includes('BYTES') && !b.datatypes.includes('UINT32'));
  });
});
