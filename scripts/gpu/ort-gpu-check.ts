/**
 * GPU check of the onnxruntime C API engine (run by scripts/gpu/ort-gpu-check.sh on a machine with an NVIDIA GPU
 * and the CUDA provider libraries placed beside libonnxruntime.so.1). Every section prints `== <name>` and what it
 * observed; onnxruntime's own verbose log goes to stderr (the shell script greps it).
 *
 *   node ort-gpu-check.mjs --dir /tmp/ortgpu-models [--bert /tmp/bert/model.onnx] [--section name]
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { matmulChainModel } from '../../test/fixtures/capi-models.js';
import { ELEM, writeModel } from '../../test/fixtures/onnx-builder.js';
import { Collected, never, open, params, request, type Opened } from '../../test/helpers/capi-engine.js';
import type { ModelConfig } from '../../src/config/model-config.js';
import type { Tensor } from '../../src/core/tensor.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
const dir = arg('dir') ?? '/tmp/ortgpu-models';
const bert = arg('bert');
const only = arg('section');
mkdirSync(dir, { recursive: true });

const SIMPLE = 'examples/model_repository/simple/1/model.onnx';
const log = (...a: unknown[]): void => console.log(...a);
const errLine = (e: unknown): string => `${(e as { code?: string }).code ?? 'ERROR'}: ${(e as Error).message}`;

async function section(name: string, body: () => Promise<void>): Promise<void> {
  if (only !== undefined && only !== name) return;
  log(`\n== ${name}`);
  console.error(`\n== ${name} (onnxruntime log follows)`);
  const t = performance.now();
  try {
    await body();
  } catch (e) {
    log(`   section failed: ${errLine(e)}`);
  }
  log(`   (${((performance.now() - t) / 1000).toFixed(1)} s)`);
}

const gpu = (extra: ModelConfig = {}, cuda?: Record<string, string>): ModelConfig => ({
  max_batch_size: 64,
  ...extra,
  ...(cuda === undefined
    ? {}
    : {
        optimization: { execution_accelerators: { gpu_execution_accelerator: [{ name: 'cuda', parameters: cuda }] } },
      }),
});

async function execute(m: Opened, inputs: Tensor[], outputs: string[], i = 0): Promise<Tensor[]> {
  const r = new Collected();
  await m.instances[i].execute([request(inputs, outputs)], r, never());
  return r.response(0).outputs;
}

const fp32 = (name: string, shape: number[], fill: (i: number) => number = () => 1): Tensor => {
  const n = shape.reduce((a, b) => a * b, 1);
  return { name, datatype: 'FP32', shape, data: Float32Array.from({ length: n }, (_, i) => fill(i)) };
};

await section('providers placed (KIND_GPU, simple, verbose log)', async () => {
  const m = await open(SIMPLE, gpu(), { kind: 'KIND_GPU', device: 0, logLevel: 'trace' });
  const a: Tensor = {
    name: 'INPUT0',
    datatype: 'INT32',
    shape: [2, 16],
    data: Int32Array.from({ length: 32 }, (_, i) => i),
  };
  const b: Tensor = { name: 'INPUT1', datatype: 'INT32', shape: [2, 16], data: new Int32Array(32).fill(1) };
  const out = await execute(m, [a, b], ['OUTPUT0', 'OUTPUT1']);
  log(`   OUTPUT0[0..4] = ${Array.from((out[0].data as Int32Array).slice(0, 4))} (expect 1,2,3,4)`);
  log(`   CUDA arena after one run: ${JSON.stringify(m.instances[0].gpuArenaStats(0))}`);
  await m.close();
});

await section('bad device_id', async () => {
  try {
    await open(SIMPLE, gpu(), { kind: 'KIND_GPU', device: 7 });
    log('   unexpected: device 7 loaded');
  } catch (e) {
    log(`   load failed as it should: ${errLine(e)}`);
  }
});

await section('TensorRT accelerator (no libnvinfer.so.10 here)', async () => {
  const config: ModelConfig = {
    max_batch_size: 8,
    optimization: {
      execution_accelerators: {
        gpu_execution_accelerator: [
          {
            name: 'tensorrt',
            parameters: {
              precision_mode: 'FP16',
              max_workspace_size_bytes: '1073741824',
              trt_engine_cache_enable: '1',
              trt_engine_cache_path: join(dir, 'trt'),
            },
          },
        ],
      },
    },
  };
  try {
    await open(SIMPLE, config, { kind: 'KIND_GPU', device: 0 });
    log('   unexpected: TensorRT loaded');
  } catch (e) {
    log(`   load failed as it should: ${errLine(e)}`);
  }
});

await section(
  'gpu_mem_limit: an allocation over the limit fails with the arena message; the instance keeps serving',
  async () => {
    const file = join(dir, 'wide.onnx');
    await writeModel(file, {
      inputs: [{ name: 'X', elemType: ELEM.FLOAT, dims: ['n', 1048576] }],
      outputs: [{ name: 'Y', elemType: ELEM.FLOAT, dims: ['n', 1048576] }],
      nodes: [
        { op: 'Relu', inputs: ['X'], outputs: ['a'] },
        { op: 'Neg', inputs: ['a'], outputs: ['Y'] },
      ],
    });
    const limit = 64 * 1024 * 1024;
    const m = await open(file, gpu({}, { gpu_mem_limit: String(limit), arena_extend_strategy: 'kSameAsRequested' }), {
      kind: 'KIND_GPU',
      device: 0,
    });
    log(`   CUDA arena Limit reported by onnxruntime: ${m.instances[0].gpuArenaStats(0).Limit}`);
    try {
      await execute(m, [fp32('X', [32, 1048576])], ['Y']);
      log('   unexpected: 128 MiB tensors ran under a 64 MiB limit');
    } catch (e) {
      log(`   32 rows (128 MiB per tensor) failed: ${errLine(e)}`);
    }
    const out = await execute(m, [fp32('X', [2, 1048576], () => 3)], ['Y']);
    log(`   then 2 rows ran: Y[0] = ${(out[0].data as Float32Array)[0]} (expect -3)`);
    await m.close();
    const unlimited = await open(file, gpu(), { kind: 'KIND_GPU', device: 0 });
    await execute(unlimited, [fp32('X', [32, 1048576])], ['Y']);
    log('   without gpu_mem_limit the 32-row request runs');
    await unlimited.close();
  },
);

await section('arena_extend_strategy and session.use_device_allocator_for_initializers in the CUDA arena', async () => {
  const file = join(dir, 'mm1024.onnx');
  await writeModel(file, matmulChainModel(4, 1024));
  for (const [label, config] of [
    ['kNextPowerOfTwo', gpu({}, { arena_extend_strategy: 'kNextPowerOfTwo' })],
    ['kSameAsRequested', gpu({}, { arena_extend_strategy: 'kSameAsRequested' })],
    [
      'initializers via device allocator',
      gpu({ parameters: params({ 'session.use_device_allocator_for_initializers': '1' }) }),
    ],
    [
      'initializers via arena (default)',
      gpu({ parameters: params({ 'session.use_device_allocator_for_initializers': '0' }) }),
    ],
  ] as const) {
    const m = await open(file, config, { kind: 'KIND_GPU', device: 0 });
    const before = m.instances[0].gpuArenaStats(0);
    await execute(m, [fp32('X', [300, 1024])], ['Y']);
    const after = m.instances[0].gpuArenaStats(0);
    log(
      `   ${label}: after load ${JSON.stringify({ TotalAllocated: before.TotalAllocated, NumReserves: before.NumReserves, InUse: before.InUse })}, after a run ${JSON.stringify({ TotalAllocated: after.TotalAllocated, NumArenaExtensions: after.NumArenaExtensions, MaxAllocSize: after.MaxAllocSize })}`,
    );
    await m.close();
  }
});

await section('other CUDA options reach onnxruntime (session loads and runs with each)', async () => {
  const cudaOptions: Array<Record<string, string>> = [
    { cudnn_conv_algo_search: 'HEURISTIC' },
    { do_copy_in_default_stream: '0' },
    { cudnn_conv_use_max_workspace: '0' },
    { use_ep_level_unified_stream: '1' },
    { use_tf32: '0' },
    { prefer_nhwc: '1' },
  ];
  for (const cuda of cudaOptions) {
    const m = await open(SIMPLE, gpu({}, cuda), { kind: 'KIND_GPU', device: 0 });
    const a: Tensor = { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(2) };
    const out = await execute(m, [a, { ...a, name: 'INPUT1' }], ['OUTPUT0']);
    log(`   ${JSON.stringify(cuda)}: ran, OUTPUT0[0] = ${(out[0].data as Int32Array)[0]}`);
    await m.close();
  }
  try {
    await open(SIMPLE, gpu({}, { cudnn_conv_algo_search: 'FASTEST' }), { kind: 'KIND_GPU', device: 0 });
  } catch (e) {
    log(`   a bad value fails the load: ${errLine(e)}`);
  }
});

await section('enable_cuda_graph: capture/replay (verbose log) and per-run time', async () => {
  const file = join(dir, 'chain256.onnx');
  await writeModel(file, matmulChainModel(200, 256));
  const rows = 16;
  const results: Record<string, number> = {};
  for (const graph of ['0', '1']) {
    const m = await open(file, gpu({}, { enable_cuda_graph: graph }), {
      kind: 'KIND_GPU',
      device: 0,
      logLevel: graph === '1' ? 'trace' : 'info',
    });
    const x1 = fp32('X', [rows, 256], () => 1);
    const x2 = fp32('X', [rows, 256], () => 2);
    const firsts: number[] = [];
    for (let i = 0; i < 5; i++) {
      const out = await execute(m, [i % 2 === 0 ? x1 : x2], ['Y']);
      firsts.push((out[0].data as Float32Array)[0]);
    }
    const n = 300;
    const t = performance.now();
    for (let i = 0; i < n; i++) await execute(m, [x1], ['Y']);
    results[graph] = ((performance.now() - t) / n) * 1000;
    log(
      `   enable_cuda_graph=${graph}: Y[0] over runs with inputs 1,2,1,2,1: ${firsts.join(',')} (a stale replay would repeat); ${results[graph].toFixed(0)} µs/run over ${n} runs`,
    );
    await m.close();
  }
});

await section('BERT-base runs/s (KIND_GPU, one instance, concurrency 1)', async () => {
  if (bert === undefined) {
    log('   skipped: no --bert model');
    return;
  }
  const m = await open(bert, { max_batch_size: 64 }, { kind: 'KIND_GPU', device: 0 });
  const seq = 128;
  for (const batch of [1, 8, 32]) {
    const n = batch * seq;
    const ids: Tensor = {
      name: 'input_ids',
      datatype: 'INT32',
      shape: [batch, seq],
      data: Int32Array.from({ length: n }, (_, i) => (i * 7919) % 30000),
    };
    const mask: Tensor = {
      name: 'attention_mask',
      datatype: 'INT32',
      shape: [batch, seq],
      data: new Int32Array(n).fill(1),
    };
    const types: Tensor = { name: 'token_type_ids', datatype: 'INT32', shape: [batch, seq], data: new Int32Array(n) };
    for (let i = 0; i < 10; i++) await execute(m, [ids, mask, types], ['output']);
    const runs = batch === 1 ? 300 : batch === 8 ? 150 : 60;
    const t = performance.now();
    for (let i = 0; i < runs; i++) await execute(m, [ids, mask, types], ['output']);
    const ms = (performance.now() - t) / runs;
    log(
      `   batch ${batch}: ${ms.toFixed(2)} ms/run, ${(1000 / ms).toFixed(0)} runs/s, ${((1000 / ms) * batch).toFixed(0)} seq/s`,
    );
  }
  await m.close();
});

log('\ndone');
