/**
 * The onnxruntime C API engine (in process, koffi `.async` runs on libuv's pool) against onnxruntime-node's JS
 * `session.run` on the same model, in one process, one after the other, same inputs.
 *
 *   node --import tsx bench/capi-engine.ts [--runs N] [--model path] [--soak N]
 *
 * Prints runs/s and µs per run at concurrency 1 (sequential awaits) for each, the ratio, the engine's own time
 * split (input OrtValues, Run incl. the pool hop, output copy), and with --soak N: N more engine runs with RSS
 * sampled along the way (flat RSS = every native object released).
 */
import { InferenceSession, Tensor as OrtTensor } from 'onnxruntime-node';
import { Collected, never, open, params, request } from '../test/helpers/capi-engine.js';
import type { Tensor } from '../src/core/tensor.js';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? (process.argv[i + 1] as string) : fallback;
}

const runs = Number(arg('runs', '20000'));
const soak = Number(arg('soak', '0'));
const model = arg('model', 'examples/model_repository/simple/1/model.onnx');
const a = new Int32Array(16).map((_, i) => i);
const b = new Int32Array(16).fill(1);

async function timeLoop(n: number, once: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < Math.min(2000, n); i++) await once();
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await once();
  return Number(process.hrtime.bigint() - t) / 1e3 / n;
}

const m = await open(model, { max_batch_size: 8, parameters: params({ intra_op_thread_count: '1' }) });
const inst = m.instances[0];
const split = { input: 0, infer: 0, output: 0, n: 0 };
const inputs = (): Tensor[] => [
  { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: a },
  { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: b },
];
const engineOnce = async (): Promise<void> => {
  const t = await inst.execute([request(inputs(), ['OUTPUT0', 'OUTPUT1'], 1)], new Collected(), never());
  split.input += t.computeInputNs;
  split.infer += t.computeInferNs;
  split.output += t.computeOutputNs;
  split.n++;
};

const session = await InferenceSession.create(model, { intraOpNumThreads: 1, logSeverityLevel: 4 });
const nodeOnce = (): Promise<unknown> =>
  session.run({ INPUT0: new OrtTensor('int32', a, [1, 16]), INPUT1: new OrtTensor('int32', b, [1, 16]) });

const results: Record<string, number> = {};
// Alternate twice so neither side gets the quieter half of a shared machine.
for (const round of [1, 2]) {
  results[`engine${round}`] = await timeLoop(runs, engineOnce);
  results[`node${round}`] = await timeLoop(runs, nodeOnce);
}
const engineUs = Math.min(results.engine1, results.engine2);
const nodeUs = Math.min(results.node1, results.node2);
const per = (ns: number): string => (ns / split.n / 1e3).toFixed(1);
console.log(`model ${model}, ${runs} runs per round, concurrency 1, intra_op_thread_count 1`);
console.log(`C API engine (koffi .async): ${engineUs.toFixed(1)} µs/run, ${(1e6 / engineUs).toFixed(0)} runs/s`);
console.log(
  `  split: input ${per(split.input)} µs, Run incl. pool hop ${per(split.infer)} µs, output ${per(split.output)} µs`,
);
console.log(
  `onnxruntime-node session.run: ${nodeUs.toFixed(1)} µs/run, ${(1e6 / nodeUs).toFixed(0)} runs/s (blocks the event loop for its run)`,
);
console.log(
  `ratio engine/node runs/s: ${(nodeUs / engineUs).toFixed(2)}; per-run overhead difference ${(engineUs - nodeUs).toFixed(1)} µs`,
);
await session.release();

if (soak > 0) {
  const rss = (): number => Math.round(process.memoryUsage().rss / 1048576);
  const samples: number[] = [rss()];
  const step = Math.max(1, Math.floor(soak / 10));
  const t0 = Date.now();
  for (let i = 1; i <= soak; i++) {
    await engineOnce();
    if (i % step === 0) {
      globalThis.gc?.();
      samples.push(rss());
    }
  }
  const s = (Date.now() - t0) / 1000;
  console.log(
    `soak: ${soak} runs in ${s.toFixed(0)} s (${(soak / s).toFixed(0)}/s); RSS MiB every ${step}: ${samples.join(' ')}`,
  );
  console.log(
    `soak: RSS first sample after warm-up ${samples[1]} MiB, last ${samples.at(-1)} MiB, max ${Math.max(...samples.slice(1))} MiB`,
  );
}
await m.close();
