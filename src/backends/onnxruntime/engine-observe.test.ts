import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { branchesModel, intermediatesModel } from '../../../test/fixtures/capi-models.js';
import { foldableModel, matmulModel, readNodeOps, writeModel } from '../../../test/fixtures/onnx-builder.js';
import { Collected, never, open, params, request, type Opened } from '../../../test/helpers/capi-engine.js';
import type { ModelConfig } from '../../config/model-config.js';
import type { Tensor } from '../../core/tensor.js';
import type { BackendConfig } from '../contract.js';
import { envReferences } from './capi/env.js';

/**
 * Triton's options observed in onnxruntime itself, not in our mapping: the graph level through the optimized graph
 * onnxruntime writes, thread counts and the global pool through the threads the process gains, the CPU arena,
 * memory pattern and arena shrinkage through the session's arena statistics (AllocatorGetStats).
 *
 * Not observable on CPU: session.use_device_allocator_for_initializers (onnxruntime 1.30 allocates no CPU
 * initializer from the arena either way; on a GPU it decides between the CUDA arena and plain cudaMalloc: the GPU
 * script shows it).
 */

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'nereid-capi-obs-'));
  await writeModel(join(dir, 'fold.onnx'), foldableModel());
  await writeModel(join(dir, 'matmul.onnx'), matmulModel(64));
  await writeModel(join(dir, 'inter.onnx'), intermediatesModel());
  await writeModel(join(dir, 'branches.onnx'), branchesModel());
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
  assert.equal(envReferences(), 0);
});

const threads = (): number => readdirSync('/proc/self/task').length;
const settle = async (target: number): Promise<void> => {
  for (let i = 0; i < 100 && threads() > target; i++) await new Promise((r) => setTimeout(r, 10));
};

async function run(m: Opened, x: Tensor, outputs: string[], i = 0): Promise<void> {
  await m.instances[i].execute([request([x], outputs, x.shape[0])], new Collected(), never());
}
const fp32 = (name: string, rows: number, cols: number): Tensor => ({
  name,
  datatype: 'FP32',
  shape: [rows, cols],
  data: new Float32Array(rows * cols).fill(1),
});

/** Threads the process gains while `count` instances of `file` with `config` are up and have run once. */
async function threadsAdded(
  file: string,
  config: ModelConfig,
  backendConfig: BackendConfig = {},
  count = 1,
): Promise<number> {
  const before = threads();
  const m = await open(join(dir, file), { max_batch_size: 8, ...config }, { backendConfig, count });
  try {
    for (let i = 0; i < count; i++)
      await run(m, fp32('X', 256, 64), file === 'branches.onnx' ? ['Y1', 'Y2'] : ['Y'], i);
    return threads() - before;
  } finally {
    await m.close();
    await settle(before);
  }
}

describe(
  'onnxruntime options as observed in onnxruntime (C API engine)',
  { skip: process.platform !== 'linux' },
  () => {
    it('graph level 2 keeps the constant chain; default, -1 and 1 fold it', async () => {
      const nodes = async (level: number | undefined, tag: string): Promise<string[]> => {
        const prefix = join(dir, `opt-${tag}-`);
        const config: ModelConfig = level === undefined ? {} : { optimization: { graph: { level } } };
        const m = await open(join(dir, 'fold.onnx'), config, { optimizedModelPrefix: prefix });
        await m.close();
        return readNodeOps(`${prefix}m_0.onnx`);
      };
      assert.deepEqual(await nodes(2, 'disabled'), ['Add', 'Add']);
      assert.deepEqual(await nodes(-1, 'basic'), ['Add']);
      assert.deepEqual(await nodes(1, 'extended'), ['Add']);
      assert.deepEqual(await nodes(undefined, 'all'), ['Add']);
    });

    it('intra_op_thread_count sets the size of the session thread pool', async () => {
      await threadsAdded('matmul.onnx', { parameters: params({ intra_op_thread_count: '1' }) }); // libuv's pool starts
      const one = await threadsAdded('matmul.onnx', { parameters: params({ intra_op_thread_count: '1' }) });
      const five = await threadsAdded('matmul.onnx', { parameters: params({ intra_op_thread_count: '5' }) });
      // onnxruntime's pool of n has n - 1 threads (the caller, here a libuv pool thread, is the n-th).
      assert.equal(five - one, 4, `intra=1 added ${one} threads, intra=5 added ${five}`);
    });

    it('inter_op_thread_count applies in parallel execution mode only (execution_mode reaches onnxruntime)', async () => {
      const p = (mode: string): ModelConfig => ({
        parameters: params({ intra_op_thread_count: '1', execution_mode: mode, inter_op_thread_count: '4' }),
      });
      const seq = await threadsAdded('branches.onnx', p('0'));
      const par = await threadsAdded('branches.onnx', p('1'));
      assert.equal(par - seq, 3, `sequential added ${seq} threads, parallel with inter=4 added ${par}`);
    });

    it('the global thread pool is real: created once with the backend-config size, shared by every instance', async () => {
      const model = { parameters: params({ intra_op_thread_count: '1' }) };
      const perSession3 = await threadsAdded(
        'matmul.onnx',
        { parameters: params({ intra_op_thread_count: '4' }) },
        {},
        3,
      );
      const global1 = await threadsAdded(
        'matmul.onnx',
        model,
        { 'enable-global-threadpool': '1', intra_op_thread_count: '4' },
        1,
      );
      const global3 = await threadsAdded(
        'matmul.onnx',
        model,
        { 'enable-global-threadpool': '1', intra_op_thread_count: '4' },
        3,
      );
      // Per-session: three pools of 3 threads. Global: one pool of 3 (+ onnxruntime's inter-op pool), whatever the
      // instance count, and the model's intra_op_thread_count 1 is ignored.
      assert.equal(global3, global1, `global pool: 1 instance added ${global1} threads, 3 instances ${global3}`);
      assert.ok(global1 >= 3, `the global intra-op pool of 4 has 3 threads (added ${global1})`);
      assert.ok(perSession3 >= 9 && perSession3 > global3, `per-session pools: 3 instances added ${perSession3}`);
    });

    it('enable_mem_arena 0 removes the CPU arena (no arena statistics); 1 keeps it', async () => {
      const stats = async (value: string): Promise<Record<string, number>> => {
        const m = await open(join(dir, 'inter.onnx'), {
          max_batch_size: 8,
          parameters: params({ enable_mem_arena: value }),
        });
        try {
          await run(m, fp32('X', 64, 256), ['Y']);
          return m.instances[0].cpuArenaStats();
        } finally {
          await m.close();
        }
      };
      assert.deepEqual(await stats('0'), {});
      const on = await stats('1');
      assert.ok(on.TotalAllocated > 0 && on.NumArenaExtensions >= 1, JSON.stringify(on));
    });

    it('enable_mem_pattern: with it a run allocates its intermediates as one planned block, without it one by one', async () => {
      const perRun = async (value: string): Promise<{ allocs: number; maxAlloc: number }> => {
        const m = await open(join(dir, 'inter.onnx'), {
          max_batch_size: 8,
          parameters: params({ enable_mem_pattern: value, intra_op_thread_count: '1' }),
        });
        try {
          await run(m, fp32('X', 64, 256), ['Y']); // first run: onnxruntime records the pattern
          const a = m.instances[0].cpuArenaStats();
          await run(m, fp32('X', 64, 256), ['Y']);
          const b = m.instances[0].cpuArenaStats();
          return { allocs: b.NumAllocs - a.NumAllocs, maxAlloc: b.MaxAllocSize };
        } finally {
          await m.close();
        }
      };
      const on = await perRun('1');
      const off = await perRun('0');
      assert.ok(on.allocs < off.allocs, `allocations per run: pattern ${on.allocs}, no pattern ${off.allocs}`);
      const tensor = 64 * 256 * 4;
      assert.ok(
        on.maxAlloc >= 2 * tensor && off.maxAlloc === tensor,
        `largest allocation: ${on.maxAlloc} vs ${off.maxAlloc}`,
      );
    });

    it('memory.enable_memory_arena_shrinkage is applied per run: the arena gives back what a big run grew', async () => {
      const trace = async (shrink: boolean): Promise<Array<Record<string, number>>> => {
        const config: ModelConfig = {
          max_batch_size: 8192,
          parameters: params(shrink ? { 'memory.enable_memory_arena_shrinkage': 'cpu:0' } : {}),
        };
        const m = await open(join(dir, 'inter.onnx'), config);
        try {
          const out: Array<Record<string, number>> = [];
          for (const rows of [4, 4096, 4]) {
            await run(m, fp32('X', rows, 256), ['Y']);
            out.push(m.instances[0].cpuArenaStats());
          }
          return out;
        } finally {
          await m.close();
        }
      };
      const kept = await trace(false);
      const shrunk = await trace(true);
      assert.equal(kept[2].NumArenaShrinkages, 0);
      assert.ok(kept[2].TotalAllocated > kept[0].TotalAllocated, 'without shrinkage the arena keeps its growth');
      assert.ok(shrunk[1].NumArenaShrinkages >= 1 && shrunk[2].NumArenaShrinkages > shrunk[1].NumArenaShrinkages);
      assert.equal(shrunk[2].TotalAllocated, shrunk[0].TotalAllocated, 'with shrinkage it returns to its first region');
    });

    it('session.use_device_allocator_for_initializers is accepted on CPU (its effect is on GPU arenas)', async () => {
      const m = await open(join(dir, 'matmul.onnx'), {
        max_batch_size: 8,
        parameters: params({ 'session.use_device_allocator_for_initializers': '1' }),
      });
      try {
        await run(m, fp32('X', 2, 64), ['Y']);
      } finally {
        await m.close();
      }
    });
  },
);
