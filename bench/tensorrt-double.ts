/**
 * The TensorRT engine's host path on a machine without a GPU: the real server and engine process over HTTP binary
 * against the TEST DOUBLE of TensorRT (test/fixtures/tensorrt/double), with a BERT-shaped plan (three INT32
 * [-1,128] inputs, one small output per row) whose "GPU" is a sleep. What it measures is host work only: the
 * server's and the engine process's CPU per request, the batch formed and the per-request split, for the engine's
 * wire path and its general path (NEREID_TRT_WIRE=0) in interleaved rounds, and their ratio. Not TensorRT: the H200
 * numbers come from bench/tensorrt.ts.
 *
 *   node --conditions=nereid-source --import tsx bench/tensorrt-double.ts [--c 64] [--ms 3000] [--rounds 3]
 *        [--instances 2] [--sleep-ms 1.2] [--hops]
 * --hops: every request traced (the server's trace, the stub's and the engine's), and a request's trip across the
 * processes printed per point, median µs per hop (bench/gpu/hops.ts).
 */
import { execSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { encodeInferRequest } from '../src/client/http-codec.js';
import { serve } from '../src/serve.js';
import { DOUBLE, planBytes, type FakePlan } from '../test/helpers/tensorrt.js';
import { averageBatch, drive, inferenceCounts, split } from './gpu/http-load.js';
import { hops } from './gpu/hops.js';

const { values: a } = parseArgs({
  options: {
    c: { type: 'string', default: '64' },
    ms: { type: 'string', default: '3000' },
    rounds: { type: 'string', default: '3' },
    instances: { type: 'string', default: '2' },
    'sleep-ms': { type: 'string', default: '1.2' },
    hops: { type: 'boolean', default: false },
  },
});
const SEQ = 128;

function plan(): FakePlan {
  const input = (name: string) => ({ name, mode: 'INPUT' as const, dtype: 'INT32', shape: [-1, SEQ] });
  const range: [number[], number[], number[]] = [
    [1, SEQ],
    [32, SEQ],
    [64, SEQ],
  ];
  return {
    io: [
      input('input_ids'),
      input('attention_mask'),
      input('token_type_ids'),
      { name: 'pooled', mode: 'OUTPUT', dtype: 'HALF', shape: [-1, SEQ] },
    ],
    profiles: [{ input_ids: range, attention_mask: range, token_type_ids: range }],
    compute: { pooled: { op: 'copy', args: ['input_ids'] } },
    sleep_ms: Number(a['sleep-ms']),
  };
}

/** CPU milliseconds used so far by every engine process of this machine (/proc; Linux only). */
function engineCpuMs(): number {
  const pids = execSync('pgrep -f "python -m [n]ereid_python" || true').toString().trim().split('\n').filter(Boolean);
  return pids.reduce((sum, pid) => {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return sum + (Number(f[11]) + Number(f[12])) * 10;
  }, 0);
}

async function point(root: string, body: string, headers: Record<string, string>, wire: boolean) {
  process.env.NEREID_TRT_WIRE = wire ? '1' : '0';
  const traces = a.hops
    ? { triton: join(root, `../triton-${wire}.json`), engine: join(root, '../engine.jsonl') }
    : null;
  if (traces) process.env.NEREID_HOP_TRACE = process.env.NEREID_TRT_TRACE = traces.engine;
  const running = await serve({
    repositories: [root],
    httpPort: 0,
    httpAddress: '127.0.0.1',
    grpcPort: 0,
    grpcAddress: '127.0.0.1',
    metricsPort: 0,
    httpThreadCount: 1,
    gpus: [0],
    backendConfig: new Map([['tensorrt', { 'coalesce-request-input': 'true', 'execution-policy': 'BLOCKING' }]]),
    ...(traces && { trace: { file: traces.triton, level: 'TIMESTAMPS', rate: 1 } }),
  });
  const since = Number(process.hrtime.bigint() / 1000n);
  try {
    const url = running.httpUrl!.replace('http://', '');
    const before = await inferenceCounts(url, 'trt');
    const cpu0 = process.cpuUsage();
    const eng0 = engineCpuMs();
    const c = Number(a.c);
    const load = await drive(url, '/v2/models/trt/infer', body, headers, c, {
      warmupMs: 1000,
      durationMs: Number(a.ms),
    });
    const cpu = process.cpuUsage(cpu0);
    const eng = engineCpuMs() - eng0;
    const after = await inferenceCounts(url, 'trt');
    const n = Math.max(1, after.requests - before.requests);
    return {
      wire,
      seq_s: Math.round(load.seq_s),
      p50_us: Math.round(load.p50_us),
      errors: load.errors,
      batch: Number(averageBatch(before, after).toFixed(1)),
      server_cpu_us: Math.round((cpu.user + cpu.system) / n),
      engine_cpu_us: Math.round((eng * 1000) / n),
      split: Object.fromEntries(Object.entries(split(before, after)).map(([k, v]) => [k, Math.round(v)])),
      ...(traces && { hops: hops(traces.triton, traces.engine, since) }),
    };
  } finally {
    await running.close();
  }
}

const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];

const work = mkdtempSync(join(tmpdir(), 'nereid-trt-double-bench-'));
try {
  process.env.PYTHONPATH = DOUBLE;
  const root = join(work, 'repo');
  mkdirSync(join(root, 'trt', '1'), { recursive: true });
  writeFileSync(join(root, 'trt', '1', 'model.plan'), planBytes(plan()));
  writeFileSync(
    join(root, 'trt', 'config.pbtxt'),
    `name: "trt"\nbackend: "tensorrt"\nmax_batch_size: 64\ndynamic_batching { }\n` +
      `instance_group [ { kind: KIND_GPU count: ${a.instances} } ]\n`,
  );
  const ids = Int32Array.from({ length: SEQ }, (_, k) => k);
  const names = ['input_ids', 'attention_mask', 'token_type_ids'];
  const { body, headers } = encodeInferRequest(
    names.map((name) => ({ name, datatype: 'INT32', shape: [1, SEQ], data: ids })),
    { binary: true, outputs: [{ name: 'pooled' }] },
  );
  const file = join(work, 'body.bin');
  writeFileSync(file, body);
  const rows: Awaited<ReturnType<typeof point>>[] = [];
  for (let r = 0; r < Number(a.rounds); r++) {
    for (const wire of [true, false]) {
      const row = await point(root, file, headers, wire);
      rows.push(row);
      process.stdout.write(`${JSON.stringify(row)}\n`);
    }
  }
  const of = (wire: boolean, k: 'seq_s' | 'server_cpu_us' | 'engine_cpu_us') =>
    median(rows.filter((x) => x.wire === wire).map((x) => x[k]));
  for (const k of ['seq_s', 'server_cpu_us', 'engine_cpu_us'] as const)
    process.stdout.write(
      `${k}: wire ${of(true, k)}, general ${of(false, k)}, ratio ${(of(true, k) / of(false, k)).toFixed(2)} (medians of ${a.rounds})\n`,
    );
} finally {
  rmSync(work, { recursive: true, force: true });
}
process.exit(0);
