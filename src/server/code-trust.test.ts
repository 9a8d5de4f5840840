import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { codeInLoadRequest, refuseCodeInLoadRequest } from './code-trust.js';

const files = (...names: string[]) => new Map(names.map((n) => [n, new Uint8Array(1)]));

describe('code in load requests', () => {
  it('finds code files, files for code-running backends and interpreter/library settings', () => {
    assert.equal(codeInLoadRequest(undefined, files('1/model.py')), 'file:1/model.py');
    assert.equal(codeInLoadRequest(undefined, files('1/model.pt')), 'file:1/model.pt');
    assert.equal(codeInLoadRequest(undefined, files('1/libcustom.so')), 'file:1/libcustom.so');
    assert.match(codeInLoadRequest({ backend: 'python' }, files('1/weights.bin')) ?? '', /'python' backend/);
    assert.match(
      codeInLoadRequest({ platform: 'pytorch_libtorch' }, files('1/anything')) ?? '',
      /executes its model file/,
    );
    assert.equal(
      codeInLoadRequest({ parameters: { EXECUTION_ENV_PATH: { string_value: '/tmp/env' } } }, files()),
      'parameter EXECUTION_ENV_PATH',
    );
    assert.equal(
      codeInLoadRequest({ model_operations: { op_library_filename: ['/x.so'] } }, files()),
      'model_operations.op_library_filename',
    );
  });

  it('REGRESSION a versioned shared library (file:1/libx.so.1) counts as code', () => {
    for (const f of ['1/libx.so.1', '1/libx.so.1.2.3', '1/LIBX.SO.10'])
      assert.equal(codeInLoadRequest(undefined, files(f)), `file:${f}`);
    assert.equal(codeInLoadRequest(undefined, files('1/model.solid')), undefined);
  });

  it('REGRESSION accelerator options naming library or cache paths count as code', () => {
    const gpu = (parameters: Record<string, string>) => ({
      optimization: { execution_accelerators: { gpu_execution_accelerator: [{ name: 'tensorrt', parameters }] } },
    });
    for (const key of ['trt_extra_plugin_lib_paths', 'trt_engine_cache_path', 'trt_timing_cache_path']) {
      assert.match(codeInLoadRequest(gpu({ [key]: '/tmp/x' }), files()) ?? '', new RegExp(`parameter ${key}`));
    }
    const openvino = {
      optimization: {
        execution_accelerators: {
          cpu_execution_accelerator: [{ name: 'openvino', parameters: { cache_dir: '/tmp' } }],
        },
      },
    };
    assert.match(codeInLoadRequest(openvino, files()) ?? '', /'openvino' parameter cache_dir/);
    assert.equal(codeInLoadRequest(gpu({ precision_mode: 'FP16' }), files()), undefined);
  });

  it('lets ONNX files and plain configs through', () => {
    assert.equal(codeInLoadRequest({ backend: 'onnxruntime' }, files('1/model.onnx')), undefined);
    assert.equal(codeInLoadRequest({ backend: 'python', max_batch_size: 4 }, files()), undefined);
  });

  it('BAD CALL - refuses code unless allowed, naming the flag', () => {
    assert.throws(
      () => refuseCodeInLoadRequest('m', undefined, files('1/model.py'), false),
      /failed to load 'm': the load request carries code \(file:1\/model.py\).*--allow-code-in-load-requests/,
    );
    refuseCodeInLoadRequest('m', undefined, files('1/model.py'), true);
  });
});
