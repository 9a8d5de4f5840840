/**
 * Nereid's onnxruntime engine called directly (no server, no HTTP) on a KIND_GPU instance: one batch at a time,
 * host inputs, outputs into JavaScript memory — the engine's share of a request next to bench/gpu/baselines.py's
 * `ort-host-io` (the same work from Python). Run by bench/gpu.ts on the GPU machine.
 *
 *   node engine-direct.js '{"file":"model.onnx","batches":[1,32],"ms":1000,"vocab":30522,"seq":128,"hidden":768,
 *     "datatype":"FP16","parameters":{}}'
 *
 * Prints one JSON line per point: {"tool","batch","seq_s","p50_us","p99_us","split":{input,infer,output}} where
 * split is the engine's own timing (µs per run) and `tool` says whether Run went through libuv's pool (koffi
 * `.async`, what the server does) or was called on the JavaScript thread (`sync`: the pool hop's cost).
 */
import { ortApi } from '../../src/backends/onnxruntime/capi/api.js';
import type { Tensor } from '../../src/core/tensor.js';
import { Collected, open, params, request } from '../../test/helpers/capi-engine.js';

interface Job {
  file: string;
  batches: number[];
  ms: number;
  vocab: number;
  seq: number;
  hidden: number;
  datatype: 'FP32' | 'FP16';
  /** The model outputs [batch, hidden] (bench/gpu/models.ts `pooled`). */
  pooled?: boolean;
  parameters?: Record<string, string>;
  /** KIND_CPU: a dry run of this script on a machine without a GPU (its numbers mean nothing for the GPU). */
  kind?: 'KIND_GPU' | 'KIND_CPU';
  /** Label of the async rows (default `engine`); `syncToo: false` skips the sync variant. */
  label?: string;
  syncToo?: boolean;
  /**
   * CUDA graphs: the instance runs on this thread (as on the engine-thread transport) with enable_cuda_graph and a
   * graph_spec for each batch size, captured at load; every point then replays.
   */
  graphs?: boolean;
}

const job = JSON.parse(process.argv[2] ?? '{}') as Job;
const never = new AbortController().signal;

function inputs(batch: number): Tensor[] {
  const ids = new Int32Array(batch * job.seq);
  const types = new Int32Array(batch * job.seq);
  for (let b = 0; b < batch; b++) {
    for (let i = 0; i < job.seq; i++) {
      ids[b * job.seq + i] = (i * 7919 + 101) % job.vocab;
      types[b * job.seq + i] = i < job.seq / 2 ? 0 : 1;
    }
  }
  const shape = [batch, job.seq];
  return [
    { name: 'input_ids', datatype: 'INT32', shape, data: ids },
    { name: 'attention_mask', datatype: 'INT32', shape, data: new Int32Array(batch * job.seq).fill(1) },
    { name: 'token_type_ids', datatype: 'INT32', shape, data: types },
  ];
}

const input = (n: string): { name: string; data_type: string; dims: number[] } => ({
  name: n,
  data_type: 'TYPE_INT32',
  dims: [-1],
});
const m = await open(
  job.file,
  {
    name: 'm',
    max_batch_size: Math.max(...job.batches),
    input: ['input_ids', 'attention_mask', 'token_type_ids'].map(input),
    output: [
      {
        name: 'output',
        data_type: `TYPE_${job.datatype}`,
        dims: job.pooled === true ? [job.hidden] : [-1, job.hidden],
      },
    ],
    parameters: params(job.parameters ?? {}),
    ...(job.graphs === true
      ? {
          optimization: {
            execution_accelerators: {
              gpu_execution_accelerator: [{ name: 'cuda', parameters: { enable_cuda_graph: '1' } }],
            },
            cuda: {
              graph_spec: job.batches.map((b) => ({
                batch_size: b,
                input: Object.fromEntries(
                  ['input_ids', 'attention_mask', 'token_type_ids'].map((n) => [n, { dim: [job.seq] }]),
                ),
              })),
            },
          },
        }
      : {}),
  } as never,
  {
    ...(job.kind === 'KIND_CPU' ? { kind: 'KIND_CPU' as const } : { kind: 'KIND_GPU' as const, device: 0 }),
    blocking: job.graphs === true,
  },
);
const inst = m.instances[0]!;

async function point(tool: string, batch: number): Promise<void> {
  const x = inputs(batch);
  const once = async (): Promise<{ input: number; infer: number; output: number }> => {
    const t = await inst.execute([request(x, ['output'], batch)], new Collected(), never);
    return { input: t.computeInputNs, infer: t.computeInferNs, output: t.computeOutputNs };
  };
  for (let i = 0; i < 5; i++) await once();
  const lat: number[] = [];
  const sum = { input: 0, infer: 0, output: 0 };
  const end = performance.now() + job.ms;
  while (performance.now() < end) {
    const t = performance.now();
    const s = await once();
    lat.push((performance.now() - t) * 1e3);
    sum.input += s.input;
    sum.infer += s.infer;
    sum.output += s.output;
  }
  lat.sort((a, b) => a - b);
  const mean = lat.reduce((a, b) => a + b, 0) / lat.length;
  const per = (ns: number): number => ns / lat.length / 1e3;
  console.log(
    JSON.stringify({
      tool,
      batch,
      seq_s: batch / (mean / 1e6),
      p50_us: lat[Math.floor(lat.length / 2)],
      p99_us: lat[Math.min(lat.length - 1, Math.floor(lat.length * 0.99))],
      split: { input: per(sum.input), infer: per(sum.infer), output: per(sum.output) },
    }),
  );
}

for (const b of job.batches) await point(job.label ?? 'engine', b);
// The same runs with Run called on this thread: the difference is the libuv pool hop (koffi `.async`).
const run = ortApi().Run as unknown as { async: (...args: unknown[]) => void } & ((...args: unknown[]) => unknown);
const asyncRun = run.async;
try {
  if (job.syncToo === false) throw new Error('not asked');
  run.async = (...args: unknown[]): void => {
    const cb = args.pop() as (err: unknown, status: unknown) => void;
    let status: unknown;
    try {
      status = run(...args);
    } catch (err) {
      cb(err, null);
      return;
    }
    cb(null, status);
  };
  for (const b of job.batches) await point('engine-sync', b);
} catch (err) {
  console.error(`sync variant not measured: ${(err as Error).message}`);
} finally {
  run.async = asyncRun;
}
await m.close();
