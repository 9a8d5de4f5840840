import { availableParallelism } from 'node:os';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ModelConfig } from '../../config/model-config.js';
import { InvalidArgError, UnsupportedError } from '../../core/errors.js';
import { instanceCount, sessionOptionsFor } from './options.js';

const params = (p: Record<string, string>): ModelConfig => ({
  parameters: Object.fromEntries(Object.entries(p).map(([k, v]) => [k, { string_value: v }])),
});

describe('sessionOptionsFor', () => {
  it('defaults to all graph optimizations on the CPU EP with every core for a single instance', () => {
    const { session, run, warnings } = sessionOptionsFor({});
    assert.deepEqual(session, {
      graphOptimizationLevel: 'all',
      executionProviders: ['cpu'],
      intraOpNumThreads: availableParallelism(),
    });
    assert.deepEqual(run, {});
    assert.deepEqual(warnings, []);
  });

  it('maps graph level -1/1/2 to basic/extended/disabled', () => {
    const level = (l: number): string =>
      sessionOptionsFor({ optimization: { graph: { level: l } } }).session.graphOptimizationLevel;
    assert.equal(level(-1), 'basic');
    assert.equal(level(1), 'extended');
    assert.equal(level(2), 'disabled');
    assert.equal(level(0), 'all');
  });

  it('BAD CONFIG - rejects graph level 5 naming optimization.graph.level', () => {
    assert.throws(
      () => sessionOptionsFor({ optimization: { graph: { level: 5 } } }),
      (e: unknown) => e instanceof InvalidArgError && /optimization\.graph\.level/.test(e.message),
    );
  });

  it('maps thread counts, execution mode, arena, mem pattern and the device-allocator session entry', () => {
    const { session } = sessionOptionsFor(
      params({
        intra_op_thread_count: '3',
        inter_op_thread_count: '2',
        execution_mode: '1',
        enable_mem_arena: '0',
        enable_mem_pattern: 'true',
        'session.use_device_allocator_for_initializers': '1',
      }),
    );
    assert.equal(session.intraOpNumThreads, 3);
    assert.equal(session.interOpNumThreads, 2);
    assert.equal(session.executionMode, 'parallel');
    assert.equal(session.enableCpuMemArena, false);
    assert.equal(session.enableMemPattern, true);
    assert.deepEqual(session.extra, { session: { use_device_allocator_for_initializers: '1' } });
    assert.equal(sessionOptionsFor(params({ execution_mode: '0' })).session.executionMode, 'sequential');
  });

  it('leaves thread counts of 0 to ORT, as Triton does', () => {
    const { session } = sessionOptionsFor(params({ intra_op_thread_count: '0', inter_op_thread_count: '0' }));
    assert.equal(session.intraOpNumThreads, undefined);
    assert.equal(session.interOpNumThreads, undefined);
  });

  for (const [key, value] of [
    ['intra_op_thread_count', '1.5'],
    ['inter_op_thread_count', 'two'],
    ['intra_op_thread_count', '-1'],
    ['execution_mode', '7'],
    ['enable_mem_arena', 'maybe'],
    ['enable_mem_pattern', ''],
    ['arena_extend_strategy', '3'],
    ['memory.enable_memory_arena_shrinkage', 'all'],
  ]) {
    it(`BAD CONFIG - rejects ${key}=${JSON.stringify(value)} naming the parameter`, () => {
      assert.throws(
        () => sessionOptionsFor(params({ [key]: value })),
        (e: unknown) => e instanceof InvalidArgError && e.message.includes(`'${key}'`),
      );
    });
  }

  it('passes memory.enable_memory_arena_shrinkage verbatim as a run config entry, with a warning', () => {
    const { run, warnings } = sessionOptionsFor(params({ 'memory.enable_memory_arena_shrinkage': 'cpu:0' }));
    assert.deepEqual(run, { extra: { memory: { enable_memory_arena_shrinkage: 'cpu:0' } } });
    assert.match(warnings.join('\n'), /run config entries/);
  });

  it('BAD CONFIG - refuses arena shrinkage of a GPU arena', () => {
    assert.throws(
      () => sessionOptionsFor(params({ 'memory.enable_memory_arena_shrinkage': 'cpu:0;gpu:0' })),
      UnsupportedError,
    );
  });

  it('accepts the deprecated GPU parameters and warns that they are ignored on CPU', () => {
    const { session, warnings } = sessionOptionsFor(
      params({
        cudnn_conv_algo_search: '1',
        gpu_mem_limit: '4294967200',
        arena_extend_strategy: '1',
        do_copy_in_default_stream: '0',
      }),
    );
    assert.deepEqual(session, {
      graphOptimizationLevel: 'all',
      executionProviders: ['cpu'],
      intraOpNumThreads: availableParallelism(),
    });
    assert.equal(warnings.length, 4);
    for (const key of [
      'cudnn_conv_algo_search',
      'gpu_mem_limit',
      'arena_extend_strategy',
      'do_copy_in_default_stream',
    ]) {
      assert.ok(
        warnings.some((w) => w.includes(`'${key}'`)),
        key,
      );
    }
  });

  it('with the global thread pool on, ignores model thread counts and applies the backend-config ones', () => {
    const config = params({ intra_op_thread_count: '1', inter_op_thread_count: '1' });
    const { session, warnings } = sessionOptionsFor(config, {
      'enable-global-threadpool': '1',
      intra_op_thread_count: '3',
      inter_op_thread_count: '2',
    });
    assert.equal(session.intraOpNumThreads, 3);
    assert.equal(session.interOpNumThreads, 2);
    assert.equal(warnings.length, 2);
    const noCounts = sessionOptionsFor(config, { 'enable-global-threadpool': 'true' }).session;
    assert.equal(noCounts.intraOpNumThreads, availableParallelism(), 'no count anywhere: the default budget');
  });

  it('shares the cores between instances when no intra-op thread count is given; 0 leaves it to ORT', () => {
    const cores = availableParallelism();
    const four = { instance_group: [{ kind: 'KIND_CPU' as const, count: 4 }] };
    assert.equal(sessionOptionsFor(four).session.intraOpNumThreads, Math.max(1, Math.floor(cores / 4)));
    const zero = { ...four, parameters: { intra_op_thread_count: { string_value: '0' } } };
    assert.equal(sessionOptionsFor(zero).session.intraOpNumThreads, undefined);
  });

  it('with the global thread pool off, backend-config thread counts do not override the model', () => {
    const { session } = sessionOptionsFor(params({ intra_op_thread_count: '2' }), {
      'enable-global-threadpool': '0',
      intra_op_thread_count: '5',
    });
    assert.equal(session.intraOpNumThreads, 2);
  });

  it('BAD CONFIG - rejects a bad backend-config thread count naming it', () => {
    assert.throws(
      () => sessionOptionsFor({}, { 'enable-global-threadpool': '1', intra_op_thread_count: 'x' }),
      (e: unknown) => e instanceof InvalidArgError && /onnxruntime,intra_op_thread_count/.test(e.message),
    );
  });

  for (const [field, name] of [
    ['gpu_execution_accelerator', 'tensorrt'],
    ['gpu_execution_accelerator', 'cuda'],
    ['cpu_execution_accelerator', 'openvino'],
  ] as const) {
    it(`BAD CONFIG - refuses execution accelerator '${name}' instead of running on CPU`, () => {
      const config: ModelConfig = {
        optimization: { execution_accelerators: { [field]: [{ name, parameters: { precision_mode: 'FP16' } }] } },
      };
      assert.throws(
        () => sessionOptionsFor(config),
        (e: unknown) =>
          e instanceof UnsupportedError &&
          e.message.includes(`execution accelerator '${name}' is not available in this build`) &&
          e.message.includes(`optimization.execution_accelerators.${field}`),
      );
    });
  }

  it('BAD CONFIG - refuses an unknown accelerator name', () => {
    const config: ModelConfig = {
      optimization: { execution_accelerators: { cpu_execution_accelerator: [{ name: 'x' }] } },
    };
    assert.throws(() => sessionOptionsFor(config), InvalidArgError);
  });
});

describe('instanceCount', () => {
  it('sums counts over groups, one instance by default', () => {
    assert.equal(instanceCount({}), 1);
    assert.equal(instanceCount({ instance_group: [{ kind: 'KIND_CPU', count: 2 }, { kind: 'KIND_AUTO' }] }), 3);
  });

  it('BAD CONFIG - refuses KIND_GPU with a hint to use KIND_CPU', () => {
    assert.throws(
      () => instanceCount({ instance_group: [{ kind: 'KIND_GPU', count: 1 }] }),
      (e: unknown) =>
        e instanceof UnsupportedError &&
        /KIND_GPU is not supported by this build/.test(e.message) &&
        /KIND_CPU/.test(e.message),
    );
  });
});
