/**
 * Ensemble overhead: an ensemble of three steps against the same three steps called one after another, at
 * concurrency 16, on one server. Two pipelines: `simple` (add/sub of 16 ints: almost no compute, so the worst
 * case for overhead) and `mm` (a 512×512 matmul per row, a model with real work).
 *
 * - in-process: the facade (`server.infer`) for both, so the difference is the ensemble machinery alone (graph
 *   walk, tensor hand-over, step requests) against a caller doing the steps itself; goal ≤ 5 %;
 * - HTTP: one ensemble request against three HTTP requests made by the client (what a user saves).
 *
 * The machine this runs on is shared, so the two sides alternate in short rounds and the medians are compared;
 * the main thread's busy time per request (event-loop utilization) is reported beside, as it is the cost the
 * ensemble adds and is less sensitive to other processes than throughput.
 *
 *   npm run build && node --import tsx bench/ensemble.ts [--seconds 1.5] [--rounds 6] [--in-process]
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { addSubModel, ELEM, matmulModel, writeModel } from '../test/fixtures/onnx-builder.js';
import type { InferRequest } from '../src/core/inference.js';
import type { Tensor } from '../src/core/tensor.js';
import { median, percentile, progress } from './common.js';

const dist = new URL('../dist/serve.js', import.meta.url).href;
const { serve } = (await import(dist)) as typeof import('../src/serve.js');

const arg = (name: string, d: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : d;
};
const SECONDS = arg('seconds', 1.5);
const ROUNDS = arg('rounds', 6);
const CONCURRENCY = 16;
/** `--in-process`: skip the HTTP rows (the overhead figure needs only the in-process ones). */
const HTTP = !process.argv.includes('--in-process');
const MM = 512;

const stepCfg = (name: string, io: string) =>
  `name: "${name}" backend: "onnxruntime" max_batch_size: 16 ${io}
   dynamic_batching { max_queue_delay_microseconds: 100 } instance_group [{ count: 2 kind: KIND_CPU }]`;
const chain = (name: string, model: string, ins: string[], outs: string[], dims: string, dt: string) => {
  const t = (n: string) => `{ name: "${n}" data_type: ${dt} dims: ${dims} }`;
  const steps = [0, 1, 2].map((k) => {
    const from = k === 0 ? ins : ins.map((n) => `${n}_${k}`);
    const to = k === 2 ? outs : ins.map((n) => `${n}_${k + 1}`);
    const imap = from.map((tn, j) => `input_map { key: "${ins[j]}" value: "${tn}" }`).join(' ');
    const omap = to.map((tn, j) => `output_map { key: "${outs[j]}" value: "${tn}" }`).join(' ');
    return `{ model_name: "${model}" model_version: -1 ${imap} ${omap} }`;
  });
  return `name: "${name}" platform: "ensemble" max_batch_size: 16
    input [ ${ins.map(t).join(', ')} ] output [ ${outs.map(t).join(', ')} ]
    ensemble_scheduling { step [ ${steps.join(', ')} ] }`;
};

interface Pipeline {
  name: string;
  model: string;
  ensemble: string;
  inputs(): Tensor[];
  /** Step k's outputs become step k+1's inputs (by position). */
  inputNames: string[];
}

const PIPELINES: Pipeline[] = [
  {
    name: 'simple ×3',
    model: 'simple',
    ensemble: 'simple_chain',
    inputNames: ['INPUT0', 'INPUT1'],
    inputs: () => [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: Int32Array.from({ length: 16 }, (_, i) => i) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(1) },
    ],
  },
  {
    name: `mm${MM} ×3`,
    model: 'mm',
    ensemble: 'mm_chain',
    inputNames: ['X'],
    inputs: () => [
      { name: 'X', datatype: 'FP32', shape: [1, MM], data: Float32Array.from({ length: MM }, (_, i) => (i % 5) / 5) },
    ],
  },
];

async function makeRepo(): Promise<string> {
  const repo = await mkdtemp(join(tmpdir(), 'nereid-bench-ens-'));
  const add = async (name: string, config: string, onnx?: Parameters<typeof writeModel>[1]) => {
    await mkdir(join(repo, name, '1'), { recursive: true });
    await writeFile(join(repo, name, 'config.pbtxt'), config);
    if (onnx) await writeModel(join(repo, name, '1', 'model.onnx'), onnx);
  };
  const i32 = (n: string) => `{ name: "${n}" data_type: TYPE_INT32 dims: [ 16 ] }`;
  await add(
    'simple',
    stepCfg('simple', `input [ ${i32('INPUT0')}, ${i32('INPUT1')} ] output [ ${i32('OUTPUT0')}, ${i32('OUTPUT1')} ]`),
    addSubModel(ELEM.INT32),
  );
  await add(
    'simple_chain',
    chain('simple_chain', 'simple', ['INPUT0', 'INPUT1'], ['OUTPUT0', 'OUTPUT1'], '[ 16 ]', 'TYPE_INT32'),
  );
  const f = (n: string) => `{ name: "${n}" data_type: TYPE_FP32 dims: [ ${MM} ] }`;
  await add('mm', stepCfg('mm', `input [ ${f('X')} ] output [ ${f('Y')} ]`), matmulModel(MM));
  await add('mm_chain', chain('mm_chain', 'mm', ['X'], ['Y'], `[ ${MM} ]`, 'TYPE_FP32'));
  return repo;
}

interface Result {
  rps: number;
  p50: number;
  p99: number;
  /** Main-thread busy µs per request. */
  busyUs: number;
  /** Process CPU (every thread: main, engines) µs per request. */
  cpuUs: number;
  /** Mean batch size the step model ran. */
  batch: number;
}

/** Closed loop: CONCURRENCY workers, each sending the next request when its last one is answered. */
async function closedLoop(once: () => Promise<void>, model: string): Promise<Result> {
  const warmupEnd = performance.now() + 500;
  while (performance.now() < warmupEnd) await Promise.all(Array.from({ length: CONCURRENCY }, once));
  const lat: number[] = [];
  const elu0 = performance.eventLoopUtilization();
  const cpu0 = process.cpuUsage();
  const stats0 = server.modelStatistics(model)[0];
  const end = performance.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        await once();
        lat.push(performance.now() - t);
      }
    }),
  );
  const elu = performance.eventLoopUtilization(elu0);
  const cpu = process.cpuUsage(cpu0);
  const stats1 = server.modelStatistics(model)[0];
  lat.sort((a, b) => a - b);
  return {
    rps: lat.length / SECONDS,
    p50: percentile(lat, 50),
    p99: percentile(lat, 99),
    busyUs: (elu.active * 1000) / lat.length,
    cpuUs: (cpu.user + cpu.system) / lat.length,
    batch: (stats1.inference_count - stats0.inference_count) / (stats1.execution_count - stats0.execution_count),
  };
}

function httpJson(port: number, agent: http.Agent, model: string, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: `/v2/models/${model}/infer`, method: 'POST', agent },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => (res.statusCode === 200 ? resolve(text) : reject(new Error(`${res.statusCode} ${text}`))));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const jsonOf = (inputs: Tensor[]): string =>
  JSON.stringify({
    inputs: inputs.map((t) => ({
      name: t.name,
      shape: t.shape,
      datatype: t.datatype,
      data: Array.from(t.data as Int32Array),
    })),
  });

const repo = await makeRepo();
const running = await serve({
  repositories: [repo],
  httpPort: 0,
  httpAddress: '127.0.0.1',
  allowGrpc: false,
  allowMetrics: false,
});
const server = running.server;
const port = running.httpPort as number;
const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
const lines: string[] = [];
const fmt = (r: Result) =>
  `${r.rps.toFixed(0).padStart(6)} req/s  p50 ${r.p50.toFixed(2).padStart(6)} ms  p99 ${r.p99.toFixed(2).padStart(6)} ms  main thread ${r.busyUs.toFixed(1).padStart(6)} µs/req  cpu ${r.cpuUs.toFixed(1).padStart(6)} µs/req  step batch ${r.batch.toFixed(1)}`;
/** Medians of each field over the rounds. */
const med = (rs: Result[]): Result => {
  const m = (f: (r: Result) => number) => median(rs.map(f));
  return {
    rps: m((r) => r.rps),
    p50: m((r) => r.p50),
    p99: m((r) => r.p99),
    busyUs: m((r) => r.busyUs),
    cpuUs: m((r) => r.cpuUs),
    batch: m((r) => r.batch),
  };
};
try {
  for (const p of PIPELINES) {
    const viaSteps = async (): Promise<void> => {
      let inputs = p.inputs();
      for (let k = 0; k < 3; k++) {
        const req: InferRequest = { model: p.model, inputs };
        const res = await server.infer(req);
        inputs = res.outputs.map((t, j) => ({ ...t, name: p.inputNames[j] }));
      }
    };
    const viaEnsemble = async (): Promise<void> => {
      await server.infer({ model: p.ensemble, inputs: p.inputs() });
    };
    const httpSteps = async (): Promise<void> => {
      let body = jsonOf(p.inputs());
      for (let k = 0; k < 3; k++) {
        const out = JSON.parse(await httpJson(port, agent, p.model, body)) as {
          outputs: { data: number[]; shape: number[]; datatype: string }[];
        };
        body = JSON.stringify({
          inputs: out.outputs.map((o, j) => ({
            name: p.inputNames[j],
            shape: o.shape,
            datatype: o.datatype,
            data: o.data,
          })),
        });
      }
    };
    const httpEnsemble = async (): Promise<void> => {
      await httpJson(port, agent, p.ensemble, jsonOf(p.inputs()));
    };
    const runs: Record<string, Result[]> = { steps: [], ensemble: [], 'http steps': [], 'http ensemble': [] };
    for (let r = 0; r < ROUNDS; r++) {
      // Interleaved, so drift on a shared machine hits both sides alike.
      progress(`${p.name}: round ${r + 1}/${ROUNDS}`);
      runs.steps.push(await closedLoop(viaSteps, p.model));
      runs.ensemble.push(await closedLoop(viaEnsemble, p.model));
      if (HTTP) {
        runs['http steps'].push(await closedLoop(httpSteps, p.model));
        runs['http ensemble'].push(await closedLoop(httpEnsemble, p.model));
      }
    }
    const s = med(runs.steps);
    const e = med(runs.ensemble);
    lines.push(`${p.name}, concurrency ${CONCURRENCY}, ${SECONDS} s × ${ROUNDS} alternating rounds (medians)`);
    for (const [k, rs] of Object.entries(runs)) if (rs.length > 0) lines.push(`  ${k.padEnd(14)} ${fmt(med(rs))}`);
    lines.push(
      `  in-process ensemble overhead: throughput ${((s.rps / e.rps - 1) * 100).toFixed(1)} %, p50 ${((e.p50 / s.p50 - 1) * 100).toFixed(1)} %, p99 ${((e.p99 / s.p99 - 1) * 100).toFixed(1)} %, main thread ${(e.busyUs - s.busyUs).toFixed(1)} µs/request, CPU ${((e.cpuUs / s.cpuUs - 1) * 100).toFixed(1)} %`,
    );
    if (HTTP) {
      const hs = med(runs['http steps']);
      const he = med(runs['http ensemble']);
      lines.push(
        `  over HTTP the ensemble answers ${(hs.p50 / he.p50).toFixed(2)}× faster (p50) than three client calls`,
      );
    }
  }
} finally {
  agent.destroy();
  await running.close();
  await rm(repo, { recursive: true, force: true });
}
process.stdout.write(`${lines.join('\n')}\n`);
