import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { describe, it } from 'node:test';
import type { ModelConfig } from '../../config/model-config.js';
import { InvalidArgError } from '../../core/errors.js';
import { gpuSessionConfig } from './capi/session-options.js';
import { GRAPH_LEVEL, planSession, providersFor, usesCudaGraphs } from './options-capi.js';

/** The mapping of Triton's onnxruntime options onto C API calls (pure); engine-observe.test.ts shows the effects. */

const params = (p: Record<string, string>): ModelConfig => ({
  parameters: Object.fromEntries(Object.entries(p).map(([k, v]) => [k, { string_value: v }])),
});
const gpu = (
  eas: Array<{ name: string; parameters?: Record<string, string> }>,
  extra: ModelConfig = {},
): ModelConfig => ({
  ...extra,
  optimization: { execution_accelerators: { gpu_execution_accelerator: eas } },
});
const GPU0 = { kind: 'KIND_GPU' as const, device: 0, name: 'm_0' };
const CPU = { kind: 'KIND_CPU' as const, device: -1, name: 'm_0' };

describe('planSession', () => {
  it('defaults: every graph optimization, the cores for one instance, nothing else set', () => {
    const p = planSession({});
    assert.equal(p.graphLevel, GRAPH_LEVEL.all);
    assert.equal(p.intraOpThreads, availableParallelism());
    assert.equal(p.interOpThreads, undefined);
    assert.equal(p.executionMode, undefined);
    assert.deepEqual([p.sessionConfig, p.runConfig, p.cpuProviders, p.warnings], [[], [], [], []]);
    assert.deepEqual(providersFor(p, CPU), []);
  });

  it('maps graph level -1/1/2/0 to basic/extended/disabled/all; refuses others naming the field', () => {
    const level = (l: number): number => planSession({ optimization: { graph: { level: l } } }).graphLevel;
    assert.deepEqual([level(-1), level(1), level(2), level(0)], [1, 2, 0, 99]);
    assert.throws(
      () => level(5),
      (e: unknown) => e instanceof InvalidArgError && /optimization\.graph\.level/.test(e.message),
    );
  });

  it('maps threads, execution mode, arena, pattern, the initializer allocator and arena shrinkage', () => {
    const p = planSession(
      params({
        intra_op_thread_count: '3',
        inter_op_thread_count: '2',
        execution_mode: '1',
        enable_mem_arena: '0',
        enable_mem_pattern: 'true',
        'session.use_device_allocator_for_initializers': 'yes',
        'memory.enable_memory_arena_shrinkage': 'cpu:0',
      }),
    );
    assert.deepEqual(
      [p.intraOpThreads, p.interOpThreads, p.executionMode, p.cpuMemArena, p.memPattern],
      [3, 2, 1, false, true],
    );
    assert.deepEqual(p.sessionConfig, [['session.use_device_allocator_for_initializers', '1']]);
    assert.deepEqual(p.runConfig, [['memory.enable_memory_arena_shrinkage', 'cpu:0']]);
    assert.deepEqual(p.warnings, []);
  });

  it('leaves thread counts of 0 to onnxruntime, as Triton does; shares cores between instances by default', () => {
    const p = planSession(params({ intra_op_thread_count: '0', inter_op_thread_count: '0' }));
    assert.deepEqual([p.intraOpThreads, p.interOpThreads], [undefined, undefined]);
    const four: ModelConfig = { instance_group: [{ kind: 'KIND_CPU', count: 4 }] };
    assert.equal(planSession(four).intraOpThreads, Math.max(1, Math.floor(availableParallelism() / 4)));
  });

  for (const [key, value] of [
    ['intra_op_thread_count', '1.5'],
    ['inter_op_thread_count', 'two'],
    ['intra_op_thread_count', '-1'],
    ['execution_mode', '7'],
    ['enable_mem_arena', 'maybe'],
    ['enable_mem_pattern', ''],
    ['session.use_device_allocator_for_initializers', '2'],
    ['memory.enable_memory_arena_shrinkage', 'all'],
    ['arena_extend_strategy', '3'],
    ['cudnn_conv_algo_search', '4'],
    ['gpu_mem_limit', '-5'],
    ['do_copy_in_default_stream', 'sometimes'],
  ]) {
    it(`BAD CONFIG - rejects ${key}=${JSON.stringify(value)} naming the parameter`, () => {
      assert.throws(
        () => planSession(params({ [key]: value })),
        (e: unknown) => e instanceof InvalidArgError && e.message.includes(`'${key}'`),
      );
    });
  }

  it('global thread pool: the env gets the backend-config counts, the model counts are ignored with a warning', () => {
    const p = planSession(params({ intra_op_thread_count: '1', inter_op_thread_count: '1' }), {
      'enable-global-threadpool': '1',
      intra_op_thread_count: '3',
      inter_op_thread_count: '2',
    });
    assert.deepEqual(p.globalThreadPool, { intraOpThreads: 3, interOpThreads: 2 });
    assert.deepEqual([p.intraOpThreads, p.interOpThreads], [undefined, undefined]);
    assert.equal(p.warnings.length, 2);
    assert.deepEqual(planSession({}, { 'enable-global-threadpool': 'true' }).globalThreadPool, {
      intraOpThreads: 0,
      interOpThreads: 0,
    });
    assert.equal(
      planSession(params({ intra_op_thread_count: '2' }), {
        'enable-global-threadpool': '0',
        intra_op_thread_count: '5',
      }).intraOpThreads,
      2,
    );
    assert.throws(
      () => planSession({}, { 'enable-global-threadpool': '1', intra_op_thread_count: 'x' }),
      (e: unknown) => e instanceof InvalidArgError && /onnxruntime,intra_op_thread_count/.test(e.message),
    );
  });

  it('KIND_GPU gets the CUDA provider on its device, with the deprecated parameters translated as Triton does', () => {
    const p = planSession(
      params({
        cudnn_conv_algo_search: '1',
        gpu_mem_limit: '4294967200',
        arena_extend_strategy: '1',
        do_copy_in_default_stream: '0',
      }),
    );
    const [cuda, ...rest] = providersFor(p, { ...GPU0, device: 3 });
    assert.equal(rest.length, 0);
    assert.equal(cuda.name, 'cuda');
    assert.deepEqual(Object.fromEntries(cuda.options), {
      cudnn_conv_algo_search: 'HEURISTIC',
      gpu_mem_limit: '4294967200',
      arena_extend_strategy: 'kSameAsRequested',
      do_copy_in_default_stream: '0',
      device_id: '3',
    });
    // KIND_CPU instances of the same model run without it.
    assert.deepEqual(providersFor(p, CPU), []);
  });

  it('every CUDA accelerator option reaches the provider (normalized), and wins over a deprecated parameter', () => {
    const p = planSession(
      gpu(
        [
          {
            name: 'cuda',
            parameters: {
              cudnn_conv_use_max_workspace: 'true',
              use_ep_level_unified_stream: '1',
              cudnn_conv_algo_search: 'DEFAULT',
              gpu_mem_limit: '1073741824',
              arena_extend_strategy: 'kNextPowerOfTwo',
              do_copy_in_default_stream: '1',
              tunable_op_enable: '0',
              prefer_nhwc: '0',
              use_tf32: '0',
              sdpa_kernel: '2',
            },
          },
        ],
        params({ gpu_mem_limit: '5' }),
      ),
    );
    const [cuda] = providersFor(p, GPU0);
    assert.deepEqual(Object.fromEntries(cuda.options), {
      gpu_mem_limit: '1073741824',
      cudnn_conv_use_max_workspace: '1',
      use_ep_level_unified_stream: '1',
      cudnn_conv_algo_search: 'DEFAULT',
      arena_extend_strategy: 'kNextPowerOfTwo',
      do_copy_in_default_stream: '1',
      tunable_op_enable: '0',
      prefer_nhwc: '0',
      use_tf32: '0',
      sdpa_kernel: '2',
      device_id: '0',
    });
  });

  it('enable_cuda_graph reaches the CUDA provider and marks the plan as replaying graphs; 0 does not', () => {
    const p = planSession(gpu([{ name: 'cuda', parameters: { enable_cuda_graph: 'true' } }]));
    assert.equal(Object.fromEntries(providersFor(p, GPU0)[0].options).enable_cuda_graph, '1');
    assert.equal(usesCudaGraphs(p), true);
    const off = planSession(gpu([{ name: 'cuda', parameters: { enable_cuda_graph: '0' } }]));
    assert.equal(Object.fromEntries(providersFor(off, GPU0)[0].options).enable_cuda_graph, '0');
    assert.equal(usesCudaGraphs(off), false);
    assert.throws(
      () => planSession(gpu([{ name: 'cuda', parameters: { enable_cuda_graph: 'maybe' } }])),
      (e: unknown) => e instanceof InvalidArgError && /enable_cuda_graph/.test(e.message),
    );
  });

  it('TensorRT comes first with its options mapped (precision_mode, max_workspace_size_bytes, cache), CUDA as fall-back', () => {
    const p = planSession(
      gpu([
        {
          name: 'tensorrt',
          parameters: {
            precision_mode: 'FP16',
            max_workspace_size_bytes: '1073741824',
            trt_engine_cache_enable: 'true',
            trt_engine_cache_path: '/tmp/trt',
            int8_calibration_table_name: 'calib.flatbuffers',
            int8_use_native_calibration_table: '0',
            trt_builder_optimization_level: '3',
          },
        },
      ]),
    );
    const [trt, cuda] = providersFor(p, { ...GPU0, device: 1 });
    assert.deepEqual([trt.name, cuda.name], ['tensorrt', 'cuda']);
    assert.deepEqual(Object.fromEntries(trt.options), {
      trt_fp16_enable: '1',
      trt_max_workspace_size: '1073741824',
      trt_engine_cache_enable: '1',
      trt_engine_cache_path: '/tmp/trt',
      trt_int8_calibration_table_name: 'calib.flatbuffers',
      trt_int8_use_native_calibration_table: '0',
      trt_builder_optimization_level: '3',
      device_id: '1',
    });
    const mode = (m: string): Record<string, string> =>
      Object.fromEntries(
        providersFor(planSession(gpu([{ name: 'tensorrt', parameters: { precision_mode: m } }])), GPU0)[0].options,
      );
    assert.equal(mode('INT8').trt_int8_enable, '1');
    assert.equal(mode('BF16').trt_bf16_enable, '1');
    assert.equal(mode('FP32').trt_fp16_enable, undefined);
  });

  for (const [label, config, pattern] of [
    [
      'an unknown TensorRT parameter',
      gpu([{ name: 'tensorrt', parameters: { trt_turbo: '1' } }]),
      /unknown parameter 'trt_turbo' is provided for TensorRT/,
    ],
    [
      'an unknown CUDA parameter',
      gpu([{ name: 'cuda', parameters: { cudnn_turbo: '1' } }]),
      /unknown parameter 'cudnn_turbo' is provided for CUDA/,
    ],
    ['a device_id CUDA parameter', gpu([{ name: 'cuda', parameters: { device_id: '1' } }]), /instance_group's gpus/],
    [
      'a bad precision mode',
      gpu([{ name: 'tensorrt', parameters: { precision_mode: 'FP8' } }]),
      /unsupported precision mode 'FP8'/,
    ],
    [
      'a bad TensorRT workspace size',
      gpu([{ name: 'tensorrt', parameters: { max_workspace_size_bytes: '1GB' } }]),
      /max_workspace_size_bytes/,
    ],
    [
      'a bad TensorRT boolean',
      gpu([{ name: 'tensorrt', parameters: { trt_engine_cache_enable: 'maybe' } }]),
      /trt_engine_cache_enable/,
    ],
    [
      'a bad CUDA algo search',
      gpu([{ name: 'cuda', parameters: { cudnn_conv_algo_search: 'FAST' } }]),
      /EXHAUSTIVE, HEURISTIC or DEFAULT/,
    ],
    ['an unknown GPU accelerator', gpu([{ name: 'rocm' }]), /unknown Execution Accelerator 'rocm'/],
    [
      'an unknown CPU accelerator',
      { optimization: { execution_accelerators: { cpu_execution_accelerator: [{ name: 'dnnl' }] } } },
      /unknown Execution Accelerator 'dnnl'/,
    ],
    [
      'an unknown OpenVINO parameter',
      {
        optimization: {
          execution_accelerators: { cpu_execution_accelerator: [{ name: 'openvino', parameters: { turbo: '1' } }] },
        },
      },
      /unknown parameter 'turbo' is provided for OpenVINO/,
    ],
  ] as const) {
    it(`BAD CONFIG - ${label} is a load error naming it`, () => {
      assert.throws(
        () => planSession(config as ModelConfig),
        (e: unknown) => e instanceof InvalidArgError && pattern.test(e.message),
      );
    });
  }

  it('OpenVINO applies to every instance with device_type CPU; a GPU accelerator is ignored on a CPU instance with one warning (as Triton)', () => {
    const p = planSession({
      instance_group: [{ kind: 'KIND_CPU' }],
      optimization: {
        execution_accelerators: {
          cpu_execution_accelerator: [{ name: 'openvino', parameters: { num_of_threads: '2' } }],
          gpu_execution_accelerator: [{ name: 'cuda' }],
        },
      },
    });
    assert.deepEqual(
      providersFor(p, GPU0).map((x) => x.name),
      ['cuda', 'openvino'],
    );
    // Triton ignores gpu_execution_accelerator on KIND_CPU: the CPU instance keeps only its CPU providers, the
    // KIND_GPU instance above still gets cuda (a provider that cannot load there fails the load).
    assert.deepEqual(
      providersFor(p, CPU).map((x) => x.name),
      ['openvino'],
    );
    assert.equal(p.warnings.filter((w) => /gpu_execution_accelerator \(cuda\) is ignored/.test(w)).length, 1);
    const mixed = planSession({
      instance_group: [
        { name: 'g', kind: 'KIND_GPU' },
        { name: 'c', kind: 'KIND_CPU' },
      ],
      optimization: { execution_accelerators: { gpu_execution_accelerator: [{ name: 'tensorrt' }] } },
    });
    assert.match(mixed.warnings.join('\n'), /\(tensorrt\) is ignored: the instances of group 'c' are KIND_CPU/);
    assert.deepEqual(
      providersFor(mixed, GPU0).map((x) => x.name),
      ['tensorrt', 'cuda'],
    );
    const gpuOnly = planSession({
      instance_group: [{ kind: 'KIND_GPU' }],
      optimization: { execution_accelerators: { gpu_execution_accelerator: [{ name: 'cuda' }] } },
    });
    assert.deepEqual(gpuOnly.warnings, []);
    const cpuOnly = planSession({
      optimization: {
        execution_accelerators: {
          cpu_execution_accelerator: [{ name: 'openvino', parameters: { num_of_threads: '2' } }],
        },
      },
    });
    assert.deepEqual(providersFor(cpuOnly, CPU), [
      {
        name: 'openvino',
        options: [
          ['device_type', 'CPU'],
          ['num_of_threads', '2'],
        ],
      },
    ]);
  });

  it('BAD CONFIG - a GPU arena shrinkage on a KIND_CPU instance, KIND_MODEL, and a KIND_GPU without a device', () => {
    const p = planSession(params({ 'memory.enable_memory_arena_shrinkage': 'cpu:0;gpu:0' }));
    assert.throws(() => providersFor(p, CPU), /names a GPU arena/);
    assert.doesNotThrow(() => providersFor(p, GPU0));
    assert.throws(() => providersFor(planSession({}), { ...CPU, kind: 'KIND_MODEL' }), /KIND_MODEL/);
    assert.throws(() => providersFor(planSession({}), { ...GPU0, device: -1 }), /needs a GPU id/);
  });
});

describe('gpuSessionConfig', () => {
  it("stops a GPU instance's own thread pools from spinning, unless the plan says otherwise or the pool is global", () => {
    const plan = planSession({});
    const cuda = providersFor(plan, GPU0);
    const off: Array<[string, string]> = [
      ['session.intra_op.allow_spinning', '0'],
      ['session.inter_op.allow_spinning', '0'],
    ];
    assert.deepEqual(gpuSessionConfig(cuda, [], false), off);
    assert.deepEqual(gpuSessionConfig(providersFor(plan, CPU), [], false), []);
    assert.deepEqual(gpuSessionConfig(cuda, [], true), []);
    assert.deepEqual(gpuSessionConfig(cuda, [['session.intra_op.allow_spinning', '1']], false), [off[1]]);
    const trt = providersFor(planSession(gpu([{ name: 'tensorrt' }])), GPU0);
    assert.deepEqual(gpuSessionConfig(trt, [], false), off);
  });
});
