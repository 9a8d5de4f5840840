/**
 * Large outputs through front-end threads, two builds of Nereid A/B in interleaved rounds: the python backend's
 * identity model (test/fixtures/python, FP32 [1, N] in and out, dynamic batching) over HTTP binary with
 * `--http-thread-count` threads, closed-loop load from the GPU benchmarks' raw-socket load generator. Per round and
 * side: req/s, p50, and the server's CPU per request, the main thread's alone (the scheduler's thread, which serves
 * every front-end thread) and the whole process's. What it shows: whether the main thread still copies each
 * output into a buffer for the thread (before) or the thread writes it from the engine's memory (after).
 *
 *   node --import tsx bench/thread-outputs.ts --before /tmp/nereid-before/dist/cli/nereid.cjs
 *        [--after dist/cli/nereid.cjs] [--floats 49152] [--c 16] [--threads 2] [--ms 4000] [--rounds 3]
 * Writes bench/results/thread-outputs.{md,json}.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { encodeInferRequest } from '../src/client/http-codec.js';
import { ROOT } from './common.js';
import { drive, inferenceCounts, startServe } from './gpu/http-load.js';
import { stopProcess } from './servers/server.js';

const { values: a } = parseArgs({
  options: {
    before: { type: 'string' },
    after: { type: 'string', default: join(ROOT, 'dist/cli/nereid.cjs') },
    floats: { type: 'string', default: '49152' },
    c: { type: 'string', default: '16' },
    threads: { type: 'string', default: '2' },
    ms: { type: 'string', default: '4000' },
    rounds: { type: 'string', default: '3' },
  },
});
if (!a.before) throw new Error('--before PATH (the nereid.cjs of the build to compare with) is required');
const N = Number(a.floats);
const REPO = join(ROOT, 'test/fixtures/python');

/** CPU ms of a process, or of one of its threads (/proc, Linux): utime + stime at 100 ticks a second. */
function cpuMs(pid: number, tid?: number): number {
  const path = tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`;
  const f = readFileSync(path, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

interface Point {
  side: 'before' | 'after';
  rps: number;
  p50_us: number;
  main_cpu_us: number;
  process_cpu_us: number;
}

async function point(side: Point['side'], entry: string, body: string, headers: Record<string, string>) {
  const flags = [`--http-thread-count=${a.threads}`, '--model-control-mode=explicit', '--load-model=identity'];
  const { child, http } = await startServe([entry], REPO, flags, { readyMs: 120_000 });
  try {
    const path = '/v2/models/identity/infer';
    await drive(http, path, body, headers, Number(a.c), { warmupMs: 0, durationMs: 1000 });
    const before = await inferenceCounts(http, 'identity');
    const [main0, all0] = [cpuMs(child.pid!, child.pid!), cpuMs(child.pid!)];
    const load = await drive(http, path, body, headers, Number(a.c), { warmupMs: 0, durationMs: Number(a.ms) });
    const [main1, all1] = [cpuMs(child.pid!, child.pid!), cpuMs(child.pid!)];
    const n = Math.max(1, (await inferenceCounts(http, 'identity')).requests - before.requests);
    if (load.errors > 0) throw new Error(`${side}: ${load.errors} requests failed`);
    return {
      side,
      rps: Math.round(load.seq_s),
      p50_us: Math.round(load.p50_us),
      main_cpu_us: Math.round(((main1 - main0) * 1000) / n),
      process_cpu_us: Math.round(((all1 - all0) * 1000) / n),
    };
  } finally {
    await stopProcess(child);
  }
}

const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];

const work = await mkdtemp(join(tmpdir(), 'nereid-thread-outputs-'));
try {
  const { body, headers } = encodeInferRequest(
    [{ name: 'INPUT0', datatype: 'FP32', shape: [1, N], data: Float32Array.from({ length: N }, (_, i) => i) }],
    { binary: true, outputs: [{ name: 'OUTPUT0' }] },
  );
  const file = join(work, 'body.bin');
  writeFileSync(file, body);
  const points: Point[] = [];
  for (let r = 0; r < Number(a.rounds); r++) {
    for (const [side, entry] of [
      ['before', a.before],
      ['after', a.after!],
    ] as const) {
      const p = await point(side, entry, file, headers);
      points.push(p);
      process.stderr.write(`${JSON.stringify(p)}\n`);
    }
  }
  const of = (side: Point['side'], k: 'rps' | 'p50_us' | 'main_cpu_us' | 'process_cpu_us') =>
    median(points.filter((p) => p.side === side).map((p) => p[k]));
  const keys = ['rps', 'p50_us', 'main_cpu_us', 'process_cpu_us'] as const;
  const md = [
    `# Large outputs through front-end threads (${new Date().toISOString()})`,
    '',
    `python identity, FP32 [1, ${N}] (${(N * 4) / 1024} KiB) in and out, HTTP binary, ${a.threads} front-end threads, ` +
      `c=${a.c}, ${a.ms} ms per point, medians of ${a.rounds} interleaved rounds.`,
    '',
    '| | req/s | p50 µs | main thread CPU µs/req | process CPU µs/req |',
    '|---|---:|---:|---:|---:|',
    ...(['before', 'after'] as const).map((s) => `| ${s} | ${keys.map((k) => of(s, k)).join(' | ')} |`),
    `| after / before | ${keys.map((k) => (of('after', k) / of('before', k)).toFixed(2)).join(' | ')} |`,
    '',
  ].join('\n');
  process.stdout.write(md);
  writeFileSync(join(ROOT, 'bench/results/thread-outputs.md'), md);
  writeFileSync(join(ROOT, 'bench/results/thread-outputs.json'), `${JSON.stringify({ points }, null, 2)}\n`);
} finally {
  await rm(work, { recursive: true, force: true });
}
process.exit(0);
