import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defaultBackends } from '../backends/index.js';
import { codeInLoadRequest, refuseCodeInLoadRequest } from './code-trust.js';

// The server's own backends: which of them run their model file is what their descriptors say.
const B = defaultBackends();

const files = (...names: string[]) => new Map(names.map((n) => [n, new Uint8Array(1)]));

describe('code in load requests', () => {
  it('finds code files, files for code-running backends and interpreter/library settings', () => {
    assert.equal(codeInLoadRequest(undefined, files('1/model.py'), B), 'file:1/model.py');
    assert.equal(codeInLoadRequest(undefined, files('1/model.pt'), B), 'file:1/model.pt');
    assert.equal(codeInLoadRequest(undefined, files('1/libcustom.so'), B), 'file:1/libcustom.so');
    assert.equal(codeInLoadRequest(undefined, files('1/model.plan'), B), 'file:1/model.plan');
    assert.match(
      codeInLoadRequest({ platform: 'tensorrt_plan' }, files('1/engine.bin'), B) ?? '',
      /executes its model file/,
    );
    assert.match(codeInLoadRequest({ backend: 'tensorrt' }, files('1/engine.bin'), B) ?? '', /'tensorrt' backend/);
    assert.match(codeInLoadRequest({ backend: 'python' }, files('1/weights.bin'), B) ?? '', /'python' backend/);
    assert.match(
      codeInLoadRequest({ platform: 'pytorch_libtorch' }, files('1/anything'), B) ?? '',
      /executes its model file/,
    );
    assert.equal(
      codeInLoadRequest({ parameters: { EXECUTION_ENV_PATH: { string_value: '/tmp/env' } } }, files(), B),
      'parameter EXECUTION_ENV_PATH',
    );
    assert.equal(
      codeInLoadRequest({ model_operations: { op_library_filename: ['/x.so'] } }, files(), B),
      'model_operations.op_library_filename',
    );
  });

  it("asks the backends' descriptors which backends run their model file", () => {
    const runs = { ...B[0], name: 'custom', platforms: [], executesModelFile: true };
    assert.match(codeInLoadRequest({ backend: 'custom' }, files('1/weights.bin'), [runs]) ?? '', /'custom' backend/);
    assert.equal(codeInLoadRequest({ backend: 'custom' }, files('1/weights.bin'), B), undefined);
  });

  it('REGRESSION a versioned shared library (file:1/libx.so.1) counts as code', () => {
    for (const f of ['1/libx.so.1', '1/libx.so.1.2.3', '1/LIBX.SO.10'])
      assert.equal(codeInLoadRequest(undefined, files(f), B), `file:${f}`);
    assert.equal(codeInLoadRequest(undefined, files('1/model.solid'), B), undefined);
  });

  it('REGRESSION accelerator options naming library or cache paths count as code', () => {
    const gpu = (parameters: Record<string, string>) => ({
      optimization: { execution_accelerators: { gpu_execution_accelerator: [{ name: 'tensorrt', parameters }] } },
    });
    for (const key of ['trt_extra_plugin_lib_paths', 'trt_engine_cache_path', 'trt_timing_cache_path']) {
      assert.match(codeInLoadRequest(gpu({ [key]: '/tmp/x' }), files(), B) ?? '', new RegExp(`parameter ${key}`));
    }
    const openvino = {
      optimization: {
        execution_accelerators: {
          cpu_execution_accelerator: [{ name: 'openvino', parameters: { cache_dir: '/tmp' } }],
        },
      },
    };
    assert.match(codeInLoadRequest(openvino, files(), B) ?? '', /'openvino' parameter cache_dir/);
    assert.equal(codeInLoadRequest(gpu({ precision_mode: 'FP16' }), files(), B), undefined);
  });

  it('lets ONNX files and plain configs through', () => {
    assert.equal(codeInLoadRequest({ backend: 'onnxruntime' }, files('1/model.onnx'), B), undefined);
    assert.equal(codeInLoadRequest({ backend: 'python', max_batch_size: 4 }, files(), B), undefined);
  });

  it('BAD CALL - refuses code unless allowed, naming the flag', () => {
    assert.throws(
      () => refuseCodeInLoadRequest('m', undefined, files('1/model.py'), false, B),
      /failed to load 'm': the load request carries code \(file:1\/model.py\).*--allow-code-in-load-requests/,
    );
    refuseCodeInLoadRequest('m', undefined, files('1/model.py'), true, B);
  });
});
