/**
 * The child-process transport's cost (issue 12): an identity Python model (test/fixtures/python/identity) through
 * the python backend (control socket + /dev/shm), against calling its `execute` in Python directly.
 *
 * - Round trip at concurrency 1: p50 of `Instance.execute` for one request, minus p50 of `model.execute([req])`
 *   inside one Python process (goal: <= 60 us over direct).
 * - Saturation: batches back to back on one instance; CPU per request of the server (Node) and of the stub process
 *   beyond the model's own execute (goal: <= 15 us per request).
 *
 * Run: node --import tsx bench/process-transport.ts [--n 3000] [--elements 16]
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { resolveInterpreter } from '../src/backends/python/interpreter.js';
import { childEnv } from '../src/backends/runtime/process/python-env.js';
import { DEFAULTS } from '../src/backends/python/options.js';
import type { EngineRequest, Instance, Responder } from '../src/backends/contract.js';
import { FIXTURES, loadPython } from '../test/helpers/python-models.js';
import { progress } from './common.js';

const { values: args } = parseArgs({
  options: { n: { type: 'string', default: '3000' }, elements: { type: 'string', default: '16' } },
});
const N = Number(args.n);
const ELEMENTS = Number(args.elements);

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

/** utime + stime of a process, in microseconds (Linux /proc). */
function procCpuUs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1e6) / 100;
}

/** p50/p99 of model.execute([request]) called in Python directly (no transport), microseconds. */
async function directPython(): Promise<{ p50: number; p99: number; buildP50: number }> {
  const interp = await resolveInterpreter({}, FIXTURES, { ...DEFAULTS, pythonExecutable: undefined });
  const code = `
import json, sys, time, numpy as np
sys.path.insert(0, ${JSON.stringify(join(FIXTURES, 'identity', '1'))})
from nereid_python.runner import load_model_class
from nereid_python.api import InferenceRequest
from nereid_python.tensor import Tensor
model = load_model_class(${JSON.stringify(join(FIXTURES, 'identity', '1', 'model.py'))})()
x = np.arange(${ELEMENTS}, dtype=np.float32).reshape(1, ${ELEMENTS})
ex, build = [], []
for i in range(${N} + 500):
    t0 = time.perf_counter_ns()
    reqs = [InferenceRequest._incoming([Tensor._wrap("INPUT0", x, "FP32")], ["OUTPUT0"], "", 0, {}, 0, [False], None)]
    t1 = time.perf_counter_ns()
    out = model.execute(reqs)
    t2 = time.perf_counter_ns()
    assert out[0].output_tensors()[0].as_numpy() is x
    if i >= 500:
        build.append(t1 - t0); ex.append(t2 - t1)
ex.sort(); build.sort()
print(json.dumps({"p50": ex[len(ex)//2]/1000, "p99": ex[int(len(ex)*0.99)]/1000, "buildP50": build[len(build)//2]/1000}))
`;
  return JSON.parse(execFileSync(interp.executable, ['-c', code], { env: childEnv(), encoding: 'utf8' }));
}

const responder: Responder = { send() {} };
const never = new AbortController().signal;

function requests(batch: number): EngineRequest[] {
  return Array.from({ length: batch }, () => ({
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, ELEMENTS], data: new Float32Array(ELEMENTS).fill(1) }],
    outputs: ['OUTPUT0'],
    batchSize: 1,
  }));
}

async function roundTrip(inst: Instance): Promise<{ p50: number; p99: number }> {
  const lat: number[] = [];
  for (let i = 0; i < N + 500; i++) {
    const reqs = requests(1);
    const t0 = process.hrtime.bigint();
    await inst.execute(reqs, responder, never);
    if (i >= 500) lat.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  return { p50: pct(lat, 50), p99: pct(lat, 99) };
}

async function saturation(inst: Instance & { pid: number }, batch: number) {
  const rounds = Math.max(200, Math.ceil(N / batch));
  for (let i = 0; i < 100; i++) await inst.execute(requests(batch), responder, never);
  const prepared = Array.from({ length: rounds }, () => requests(batch));
  let inferNs = 0;
  const node0 = process.cpuUsage();
  const py0 = procCpuUs(inst.pid);
  const t0 = performance.now();
  for (const reqs of prepared) inferNs += (await inst.execute(reqs, responder, never)).computeInferNs;
  const wallMs = performance.now() - t0;
  const node = process.cpuUsage(node0);
  const pyUs = procCpuUs(inst.pid) - py0;
  const n = rounds * batch;
  const nodeUs = (node.user + node.system) / n;
  const stubUs = (pyUs - inferNs / 1000) / n;
  return { batch, reqPerS: Math.round((n / wallMs) * 1000), nodeUs, stubUs, executeUs: inferNs / 1000 / n };
}

async function main(): Promise<void> {
  progress(`identity model, FP32 [1,${ELEMENTS}], n=${N}`);
  const direct = await directPython();
  const m = await loadPython('identity');
  const inst = await m.instance();
  const rt = await roundTrip(inst);
  const sat = [];
  for (const b of [1, 8, 32]) sat.push(await saturation(inst, b));
  await inst.destroy();
  await m.handle.unload();

  const f = (x: number): string => x.toFixed(1);
  console.log(`\n## Child-process transport (identity Python model, FP32 [1,${ELEMENTS}])\n`);
  console.log('| concurrency 1 | p50 (us) | p99 (us) |');
  console.log('|---|---|---|');
  console.log(`| model.execute([req]) in Python | ${f(direct.p50)} | ${f(direct.p99)} |`);
  console.log(`| Instance.execute through the transport | ${f(rt.p50)} | ${f(rt.p99)} |`);
  console.log(`| **transport overhead** (goal <= 60) | **${f(rt.p50 - direct.p50)}** | |`);
  console.log(
    '\n| batch (back to back) | req/s | server CPU/req (us) | stub CPU/req beyond execute (us) | execute/req (us) |',
  );
  console.log('|---|---|---|---|---|');
  for (const s of sat) {
    console.log(`| ${s.batch} | ${s.reqPerS} | ${f(s.nodeUs)} | ${f(s.stubUs)} | ${f(s.executeUs)} |`);
  }
}

await main();
