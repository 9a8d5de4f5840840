import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { ModelConfig } from '../../config/model-config.js';
import { InvalidArgError } from '../../core/errors.js';
import { missingProviderLibrary, NVINFER } from './capi/providers.js';
import { planSession, providersFor } from './options-capi.js';
import { providerPathBase, resolveTensorrtPaths, withTensorrtPaths } from './provider-paths.js';

/**
 * onnxruntime's TensorRT execution provider as seed 003 configures it: each Triton parameter → the provider option
 * onnxruntime 1.30 takes (OrtTensorRTProviderOptionsV2 keys), bad values refused INVALID_ARG naming the parameter,
 * relative cache paths taken from the version folder and kept inside the model folder, and the libraries checked
 * before onnxruntime is asked. The same refusals over the server: test/integration/onnxruntime-tensorrt-provider.
 */

const trt = (parameters: Record<string, string>): ModelConfig => ({
  optimization: { execution_accelerators: { gpu_execution_accelerator: [{ name: 'tensorrt', parameters }] } },
});
const GPU0 = { kind: 'KIND_GPU' as const, device: 0, name: 'm_0' };
const optionsOf = (parameters: Record<string, string>): Record<string, string> =>
  Object.fromEntries(providersFor(planSession(trt(parameters)), GPU0)[0].options);

describe("onnxruntime's TensorRT provider options (seed 003)", () => {
  // [Triton parameter, value, onnxruntime option, its value]
  const table: Array<[string, string, string, string]> = [
    ['precision_mode', 'FP16', 'trt_fp16_enable', '1'],
    ['precision_mode', 'fp16', 'trt_fp16_enable', '1'],
    ['precision_mode', 'BF16', 'trt_bf16_enable', '1'],
    ['precision_mode', 'INT8', 'trt_int8_enable', '1'],
    ['max_workspace_size_bytes', '1073741824', 'trt_max_workspace_size', '1073741824'],
    ['max_workspace_size_bytes', '18446744073709551615', 'trt_max_workspace_size', '18446744073709551615'],
    [
      'int8_calibration_table_name',
      'calibration.flatbuffers',
      'trt_int8_calibration_table_name',
      'calibration.flatbuffers',
    ],
    ['int8_use_native_calibration_table', '1', 'trt_int8_use_native_calibration_table', '1'],
    ['trt_engine_cache_enable', 'true', 'trt_engine_cache_enable', '1'],
    ['trt_engine_cache_path', '/var/cache/trt', 'trt_engine_cache_path', '/var/cache/trt'],
    ['trt_engine_cache_prefix', 'bert', 'trt_engine_cache_prefix', 'bert'],
    ['trt_timing_cache_enable', 'on', 'trt_timing_cache_enable', '1'],
    ['trt_timing_cache_path', '/var/cache/timing', 'trt_timing_cache_path', '/var/cache/timing'],
    ['trt_force_timing_cache', '1', 'trt_force_timing_cache', '1'],
    ['trt_builder_optimization_level', '5', 'trt_builder_optimization_level', '5'],
    ['trt_max_partition_iterations', '10', 'trt_max_partition_iterations', '10'],
    ['trt_min_subgraph_size', '2', 'trt_min_subgraph_size', '2'],
    ['trt_layer_norm_fp32_fallback', 'yes', 'trt_layer_norm_fp32_fallback', '1'],
    ['trt_detailed_build_log', '0', 'trt_detailed_build_log', '0'],
    ['trt_auxiliary_streams', '-1', 'trt_auxiliary_streams', '-1'],
    ['trt_cuda_graph_enable', '1', 'trt_cuda_graph_enable', '1'],
    ['trt_profile_min_shapes', 'x:1x8', 'trt_profile_min_shapes', 'x:1x8'],
  ];
  for (const [key, value, option, expected] of table) {
    it(`maps ${key}=${value} to ${option}=${expected}`, () => {
      assert.equal(optionsOf({ [key]: value })[option], expected);
    });
  }

  it('FP32 (the default) sets no precision flag; TensorRT comes before its CUDA fall-back, both on the device', () => {
    const o = optionsOf({ precision_mode: 'FP32' });
    assert.equal(o.trt_fp16_enable, undefined);
    assert.equal(o.trt_int8_enable, undefined);
    const providers = providersFor(planSession(trt({})), { ...GPU0, device: 2 });
    assert.deepEqual(
      providers.map((p) => [p.name, Object.fromEntries(p.options).device_id]),
      [
        ['tensorrt', '2'],
        ['cuda', '2'],
      ],
    );
  });

  for (const [key, value, pattern] of [
    ['precision_mode', 'FP8', /unsupported precision mode 'FP8' \(FP32, FP16, BF16 or INT8\)/],
    ['max_workspace_size_bytes', '-1', /max_workspace_size_bytes': expected a byte count/],
    ['max_workspace_size_bytes', '1e9', /max_workspace_size_bytes': expected a byte count/],
    ['max_workspace_size_bytes', '18446744073709551616', /expected a byte count/],
    ['trt_engine_cache_enable', 'maybe', /trt_engine_cache_enable': expected a boolean/],
    ['trt_builder_optimization_level', '6', /trt_builder_optimization_level': expected an integer from 0 to 5/],
    ['trt_builder_optimization_level', 'high', /trt_builder_optimization_level': expected an integer/],
    ['trt_min_subgraph_size', '0', /expected an integer from 1/],
    ['int8_calibration_table_name', '../../etc/passwd', /expected a file name inside trt_engine_cache_path/],
    ['trt_engine_cache_prefix', 'a/b', /trt_engine_cache_prefix': expected a file name/],
    ['trt_engine_cache_prefix', '..', /expected a file name/],
    ['trt_cache_enable', '1', /unknown parameter 'trt_cache_enable' is provided for TensorRT Execution Accelerator/],
  ] as const) {
    it(`BAD CONFIG - ${key}=${value} is INVALID_ARG naming the parameter`, () => {
      assert.throws(
        () => planSession(trt({ [key]: value })),
        (e: unknown) => e instanceof InvalidArgError && pattern.test(e.message),
      );
    });
  }
});

describe('TensorRT provider paths', () => {
  const ver = '/repo/m/1';
  const resolved = (parameters: Record<string, string>): { o: Record<string, string>; folders: readonly string[] } => {
    const r = resolveTensorrtPaths(planSession(trt(parameters)).gpuProviders, ver);
    return { o: Object.fromEntries(r.providers[0].options), folders: r.folders };
  };

  it('a relative cache path is taken from the version folder, and may climb within it', () => {
    const r = resolved({ trt_engine_cache_enable: '1', trt_engine_cache_path: 'trt-cache' });
    assert.equal(r.o.trt_engine_cache_path, '/repo/m/1/trt-cache');
    assert.deepEqual(r.folders, ['/repo/m/1/trt-cache']);
    assert.equal(resolved({ trt_engine_cache_path: 'a/../b' }).o.trt_engine_cache_path, '/repo/m/1/b');
  });

  it('an enabled cache without a path gets the version folder (never the working directory); timing follows it', () => {
    const r = resolved({ trt_engine_cache_enable: '1', trt_timing_cache_enable: '1' });
    assert.equal(r.o.trt_engine_cache_path, ver);
    assert.equal(r.o.trt_timing_cache_path, ver);
    const t = resolved({ trt_engine_cache_enable: '1', trt_engine_cache_path: 'c', trt_timing_cache_enable: '1' });
    assert.equal(t.o.trt_timing_cache_path, '/repo/m/1/c');
    assert.equal(resolved({ int8_calibration_table_name: 'calib' }).o.trt_engine_cache_path, ver);
    assert.equal(resolved({}).o.trt_engine_cache_path, undefined, 'no cache: no folder');
  });

  it("an absolute path (the operator's repository config) is kept; plugin lists and EP-context paths resolve too", () => {
    const r = resolved({
      trt_engine_cache_path: '/var/cache/trt',
      trt_ep_context_file_path: 'ctx.onnx',
      trt_extra_plugin_lib_paths: 'plugins/a.so; /opt/b.so',
    });
    assert.equal(r.o.trt_engine_cache_path, '/var/cache/trt');
    assert.equal(r.o.trt_ep_context_file_path, '/repo/m/1/ctx.onnx');
    assert.equal(r.o.trt_extra_plugin_lib_paths, '/repo/m/1/plugins/a.so;/opt/b.so');
  });

  // A folder the versions share would serve one version's engine to another (same file name, same graph).
  for (const [key, value] of [
    ['trt_engine_cache_path', '../shared'],
    ['trt_timing_cache_path', '../../elsewhere'],
    ['trt_ep_context_file_path', '../ctx.onnx'],
    ['trt_extra_plugin_lib_paths', 'a.so;../b.so'],
  ]) {
    it(`BAD CONFIG - a relative ${key} leaving the version folder is INVALID_ARG`, () => {
      assert.throws(
        () => resolved({ [key]: value }),
        (e: unknown) =>
          e instanceof InvalidArgError &&
          e.message.includes(`'${key}': '${value.split(';').pop()}' leaves the version folder`) &&
          /must stay within model directory/.test(e.message),
      );
    });
  }

  it('the version folder is the one holding the model file; a plan without TensorRT is left alone', () => {
    assert.equal(providerPathBase('/repo/m', 3, '/repo/m/3/model.onnx'), '/repo/m/3');
    assert.equal(providerPathBase('/x/m.onnx', 1, '/x/v/m.onnx'), '/x/v');
    const plan = planSession({});
    assert.equal(
      withTensorrtPaths(plan, { modelDir: '/repo/m', version: 1, modelPath: '/repo/m/1/model.onnx' }).plan,
      plan,
    );
  });
});

describe('TensorRT provider libraries, checked before onnxruntime is asked', () => {
  const dirs: string[] = [];
  after(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  const dirWith = async (files: string[]): Promise<string> => {
    const d = await mkdtemp(join(tmpdir(), 'nereid-trt-libs-'));
    dirs.push(d);
    for (const f of files) await writeFile(join(d, f), '');
    return d;
  };
  const SHARED = 'libonnxruntime_providers_shared.so';
  const TRT = 'libonnxruntime_providers_tensorrt.so';
  const CUDA = 'libonnxruntime_providers_cuda.so';

  it('names the provider library missing beside libonnxruntime, the CUDA one included', async () => {
    const loads = (): boolean => true;
    assert.equal(missingProviderLibrary('tensorrt', await dirWith([]), loads), SHARED);
    assert.equal(missingProviderLibrary('tensorrt', await dirWith([SHARED, CUDA]), loads), TRT);
    assert.equal(missingProviderLibrary('tensorrt', await dirWith([SHARED, TRT]), loads), CUDA);
    assert.equal(missingProviderLibrary('cuda', await dirWith([SHARED, TRT]), loads), CUDA);
  });

  it("then TensorRT's libnvinfer.so.10, looked up by name as the provider will", async () => {
    const all = await dirWith([SHARED, TRT, CUDA]);
    const asked: string[] = [];
    const none = (name: string): boolean => (asked.push(name), false);
    assert.equal(missingProviderLibrary('tensorrt', all, none), NVINFER);
    assert.deepEqual(asked, ['libnvinfer.so.10']);
    assert.equal(
      missingProviderLibrary('tensorrt', all, () => true),
      undefined,
    );
    assert.equal(missingProviderLibrary('cuda', all, none), undefined, 'the CUDA provider does not need TensorRT');
  });
});
