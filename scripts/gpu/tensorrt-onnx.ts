/**
 * An ONNX model served by the tensorrt backend on the H200 (scripts/gpu/tensorrt-on-device.sh onnx): the plan built
 * at the first load into a fresh plan cache, then reused by an unload+load, by a load with a second instance and by a
 * restarted server, each load timed and its builds counted from the log; the answers compared with the same ONNX
 * model on onnxruntime's CPU provider, served by the same server.
 *
 *   node --import tsx scripts/gpu/tensorrt-onnx.ts MODEL.onnx WORK_DIR   (BERT-base from trt_models.py bert)
 *
 * Env: PRECISION (fp32 default, or fp16), BATCH (max_batch_size, 8), SEQ (128), OUT (folder of the summary,
 * tensorrt-onnx-PRECISION.json).
 * NEREID_ONNX_DRY=1: against the TEST DOUBLE of TensorRT (its PYTHONPATH set; MODEL.onnx an identity model with
 * input x [-1,4] FP32 made by `trt_models.py identity`), the server told GPU 0 exists: checks the wiring on a machine
 * without a GPU; its times mean nothing there. Exits 1 when a reuse builds again or the answers differ.
 */
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { serve, type RunningNereid } from '../../src/serve.js';
import { createLogger } from '../../src/core/logger.js';

const [onnxArg, workArg] = process.argv.slice(2);
if (onnxArg === undefined || workArg === undefined) throw new Error('usage: tensorrt-onnx.ts MODEL.onnx WORK_DIR');
const ONNX = resolve(onnxArg);
const WORK = resolve(workArg);
const DRY = process.env.NEREID_ONNX_DRY === '1';
const PRECISION = process.env.PRECISION ?? 'fp32';
const BATCH = Number(process.env.BATCH ?? 8);
const SEQ = Number(process.env.SEQ ?? 128);
const REPO = join(WORK, 'repo');
const CACHE = join(WORK, 'plans');
const say = (s: string): void => void process.stdout.write(`${s}\n`);
let failures = 0;
const check = (ok: boolean, what: string): void => {
  say(`  ${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures++;
};

/** Inputs and outputs of the model in config.pbtxt form (BERT-base: three INT32 [SEQ] inputs, output [SEQ,768]). */
function io(): string {
  if (DRY) {
    return `input [{ name: "x" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "y" data_type: TYPE_FP32 dims: [4] }]`;
  }
  const i = (n: string) => `{ name: "${n}" data_type: TYPE_INT32 dims: [${SEQ}] }`;
  return `input [${['input_ids', 'attention_mask', 'token_type_ids'].map(i).join(', ')}]
output [{ name: "output" data_type: TYPE_FP32 dims: [${SEQ}, 768] }]`;
}

/** The same, as a load request's JSON config. */
function ioJson(): { input: object[]; output: object[] } {
  if (DRY) {
    return {
      input: [{ name: 'x', data_type: 'TYPE_FP32', dims: [4] }],
      output: [{ name: 'y', data_type: 'TYPE_FP32', dims: [4] }],
    };
  }
  return {
    input: ['input_ids', 'attention_mask', 'token_type_ids'].map((name) => ({
      name,
      data_type: 'TYPE_INT32',
      dims: [SEQ],
    })),
    output: [{ name: 'output', data_type: 'TYPE_FP32', dims: [SEQ, 768] }],
  };
}

function writeRepo(): void {
  rmSync(WORK, { recursive: true, force: true });
  for (const [name, backend, kind] of [
    ['onnx_trt', 'tensorrt', 'KIND_GPU'],
    ['onnx_ort', 'onnxruntime', 'KIND_CPU'],
  ]) {
    mkdirSync(join(REPO, name, '1'), { recursive: true });
    symlinkSync(ONNX, join(REPO, name, '1', 'model.onnx'));
    const params =
      backend === 'tensorrt' ? `parameters { key: "precision" value { string_value: "${PRECISION}" } }` : '';
    writeFileSync(
      join(REPO, name, 'config.pbtxt'),
      `name: "${name}"\nbackend: "${backend}"\nmax_batch_size: ${BATCH}\n${io()}\ninstance_group { kind: ${kind} count: 1 }\n${params}\n`,
    );
  }
}

const lines: { msg?: string; model?: string }[] = [];
const builds = (): number => lines.filter((l) => /building a TensorRT .* plan from/.test(l.msg ?? '')).length;

async function start(): Promise<RunningNereid> {
  return serve({
    repositories: [REPO],
    httpPort: 0,
    httpAddress: '127.0.0.1',
    grpcPort: 0,
    grpcAddress: '127.0.0.1',
    metricsPort: 0,
    modelControlMode: 'explicit',
    backendConfig: new Map([['tensorrt', { 'plan-cache-directory': CACHE }]]),
    logger: createLogger({
      write: (l) => {
        const rec = JSON.parse(l) as { msg?: string; model?: string };
        lines.push(rec);
        if (/TensorRT plan|building a TensorRT|built the TensorRT|waiting for another build/.test(rec.msg ?? ''))
          say(`    | ${rec.msg}`);
      },
    }),
    ...(DRY ? { gpus: [0] } : {}),
  });
}

async function post(url: string, body?: unknown): Promise<Response> {
  return fetch(url, { method: 'POST', body: body === undefined ? undefined : JSON.stringify(body) });
}

/** Loads `model` (with an optional config override), timed; a failed load stops the script with its message. */
async function timedLoad(s: RunningNereid, model: string, config?: string): Promise<number> {
  const t0 = performance.now();
  const res = await post(`${s.httpUrl}/v2/repository/models/${model}/load`, config ? { parameters: { config } } : {});
  const secs = (performance.now() - t0) / 1000;
  if (res.status !== 200) throw new Error(`load of ${model} failed: ${res.status} ${await res.text()}`);
  return secs;
}

function inputs(): { name: string; datatype: string; shape: number[]; data: number[] }[] {
  const rows = Math.min(4, BATCH);
  if (DRY)
    return [{ name: 'x', datatype: 'FP32', shape: [rows, 4], data: Array.from({ length: rows * 4 }, (_, i) => i) }];
  let seed = 7;
  const rnd = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % 30522;
  const n = rows * SEQ;
  return [
    { name: 'input_ids', datatype: 'INT32', shape: [rows, SEQ], data: Array.from({ length: n }, rnd) },
    { name: 'attention_mask', datatype: 'INT32', shape: [rows, SEQ], data: Array(n).fill(1) },
    { name: 'token_type_ids', datatype: 'INT32', shape: [rows, SEQ], data: Array(n).fill(0) },
  ];
}

async function answer(s: RunningNereid, model: string): Promise<number[]> {
  const res = await post(`${s.httpUrl}/v2/models/${model}/infer`, { inputs: inputs() });
  if (res.status !== 200) throw new Error(`infer on ${model}: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { outputs: { data: number[] }[] }).outputs[0].data;
}

async function main(): Promise<void> {
  writeRepo();
  say(`=== ${ONNX} on the tensorrt backend (${PRECISION}, max_batch_size ${BATCH}), plan cache ${CACHE}`);
  const times: Record<string, number> = {};
  let s = await start();
  try {
    times.first_load_s = await timedLoad(s, 'onnx_trt');
    say(`  first load: ${times.first_load_s.toFixed(1)} s, builds ${builds()}`);
    check(builds() === 1, 'the first load built the plan');
    await post(`${s.httpUrl}/v2/repository/models/onnx_trt/unload`);
    times.reload_s = await timedLoad(s, 'onnx_trt');
    say(`  unload + load: ${times.reload_s.toFixed(1)} s, builds ${builds()}`);
    check(builds() === 1, 'the reload used the cached plan');
    // The same config with a second instance: a load request's config replaces the whole config.
    const cfg = JSON.stringify({
      name: 'onnx_trt',
      backend: 'tensorrt',
      max_batch_size: BATCH,
      ...ioJson(),
      instance_group: [{ kind: 'KIND_GPU', count: 2 }],
      parameters: { precision: { string_value: PRECISION } },
    });
    times.two_instances_s = await timedLoad(s, 'onnx_trt', cfg);
    say(`  load with 2 instances: ${times.two_instances_s.toFixed(1)} s, builds ${builds()}`);
    check(builds() === 1, 'the second instance used the cached plan');
  } finally {
    await s.close();
  }
  s = await start();
  try {
    times.restart_load_s = await timedLoad(s, 'onnx_trt');
    say(`  restarted server, load: ${times.restart_load_s.toFixed(1)} s, builds ${builds()}`);
    check(builds() === 1, 'the restarted server used the cached plan');
    times.ort_load_s = await timedLoad(s, 'onnx_ort');
    const [trt, ort] = [await answer(s, 'onnx_trt'), await answer(s, 'onnx_ort')];
    let max = 0;
    let sum = 0;
    for (let i = 0; i < ort.length; i++) {
      const d = Math.abs(trt[i] - ort[i]);
      max = Math.max(max, d);
      sum += d;
    }
    const tol = PRECISION === 'fp32' ? 5e-2 : 2.5e-1; // fp32 builds may use TF32; fp16 drifts over 12 layers
    say(
      `  answers vs onnxruntime CPU: ${ort.length} values, max |diff| ${max.toExponential(2)}, mean ${(sum / ort.length).toExponential(2)}`,
    );
    check(trt.length === ort.length && max <= tol, `answers agree with onnxruntime's (max |diff| <= ${tol})`);
    writeFileSync(
      join(process.env.OUT ?? WORK, `tensorrt-onnx-${PRECISION}.json`),
      `${JSON.stringify({ onnx: ONNX, precision: PRECISION, batch: BATCH, seq: SEQ, builds: builds(), ...times, max_abs_diff: max, mean_abs_diff: sum / ort.length, dry: DRY }, null, 2)}\n`,
    );
  } finally {
    await s.close();
  }
  say(failures === 0 ? 'all checks passed' : `${failures} check(s) failed`);
  process.exitCode = failures === 0 ? 0 : 1;
}

await main();
