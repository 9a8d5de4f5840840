/**
 * The cores benchmark (issue 15): how Nereid scales with front-end threads. For each `--http-thread-count` it
 * starts the built server pinned to the server cores (taskset), drives it from load-generator processes pinned to
 * the other cores (bench/cores/load.ts: HTTP binary tensors and gRPC, closed loop), and reports req/s, latency, and
 * the CPU of the main thread (models, schedulers, statistics: the thread that must not saturate), of the front-end
 * threads and of the whole process, per request and per server core.
 *
 *   npm run bench -- --cores [--threads 1,2,4,8,16] [--concurrency 1,16,64,256] [--protocols http,grpc]
 *     [--server-cpus 0-7 --client-cpus 8-15] [--loadgen-procs 8] [--batching on|off] [--instances 1]
 *     [--duration-ms 5000] [--warmup-ms 1500] [--rounds 1] [--baseline <other build's dist/cli/nereid.cjs>]
 *     [--baseline-last] [--out cores]
 *
 * `--baseline` adds an A/B in the same run: that build (started without the thread flag: today's single-threaded
 * path) against this one at one thread, interleaved per round; with --rounds 3 each figure is the median of three,
 * and the ratio this/baseline should be >= 0.95. Results: bench/results/<out>.{json,md}; the table also on stdout.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { appendFile, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, median, progress, ROOT, sleep } from './common.js';
import { coresMarkdown, type CoresReport, type CoresSample } from './cores/report.js';
import type { ModelName } from './models.js';
import { makeRepos } from './repos.js';
import { awaitReady, kserveStats, stopProcess } from './servers/server.js';

const cores = availableParallelism();
const half = Math.max(1, Math.floor(cores / 2));
const { values: o } = parseArgs({
  args: process.argv.slice(2).filter((a) => a !== '--cores'),
  options: {
    threads: { type: 'string', default: '1,2,4,8,16' },
    concurrency: { type: 'string', default: '1,16,64,256' },
    protocols: { type: 'string', default: 'http,grpc' },
    'server-cpus': { type: 'string', default: cores > 1 ? `0-${half - 1}` : '' },
    'client-cpus': { type: 'string', default: cores > 1 ? `${half}-${cores - 1}` : '' },
    'loadgen-procs': { type: 'string' },
    model: { type: 'string', default: 'simple' },
    batching: { type: 'string', default: 'on' },
    instances: { type: 'string', default: '1' },
    'duration-ms': { type: 'string', default: '5000' },
    'warmup-ms': { type: 'string', default: '1500' },
    rounds: { type: 'string', default: '1' },
    baseline: { type: 'string' },
    'baseline-last': { type: 'boolean', default: false },
    main: { type: 'string', default: join(ROOT, 'dist/cli/nereid.cjs') },
    out: { type: 'string', default: 'cores' },
  },
});

const list = (s: string): number[] => s.split(',').map(Number);
const cpuCount = (set: string): number =>
  set === ''
    ? cores
    : set.split(',').reduce((n, part) => {
        const [lo, hi] = part.split('-').map(Number);
        return n + (hi === undefined ? 1 : hi - lo + 1);
      }, 0);
const serverCpus = o['server-cpus'] as string;
const clientCpus = o['client-cpus'] as string;
const loadgenProcs = Number(o['loadgen-procs'] ?? cpuCount(clientCpus));
const durationMs = Number(o['duration-ms']);
const warmupMs = Number(o['warmup-ms']);
const model = o.model as ModelName;
const TICKS_PER_S = 100;
/** Load-generator processes start under tsx: time for them to load and connect before the warm-up counts. */
const SPAWN_SLACK_MS = 2500;

function hasTaskset(): boolean {
  try {
    execFileSync('taskset', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
const pinned = hasTaskset() && serverCpus !== '';
if (!pinned) progress('taskset not found or one core: server and load generator are not pinned');

/** `node …args` pinned to `cpus` where taskset exists. */
function pinnedSpawn(cpus: string, args: string[], env: NodeJS.ProcessEnv = process.env): ChildProcess {
  const [cmd, argv] = pinned ? ['taskset', ['-c', cpus, process.execPath, ...args]] : [process.execPath, args];
  return spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'], env });
}

/** user+system ticks of each thread of `pid`: the main thread, front-end threads, and the process in all. */
function cpuTicks(pid: number): { main: number; frontEnd: number; total: number } {
  const ticks = (path: string): number => {
    try {
      const f = readFileSync(path, 'utf8');
      const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
      return Number(fields[11]) + Number(fields[12]);
    } catch {
      return 0;
    }
  };
  let frontEnd = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      if (readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').startsWith('nereid-frontend')) {
        frontEnd += ticks(`/proc/${pid}/task/${tid}/stat`);
      }
    } catch {
      /* the thread exited meanwhile */
    }
  }
  return { main: ticks(`/proc/${pid}/task/${pid}/stat`), frontEnd, total: ticks(`/proc/${pid}/stat`) };
}

interface Server {
  pid: number;
  http: number;
  grpc: number;
  stop(): Promise<void>;
}

async function startServer(main: string, repo: string, threads: number | undefined): Promise<Server> {
  const [http, grpc] = [await freePort(), await freePort()];
  const args = [main, 'serve', `--model-repository=${repo}`, `--http-port=${http}`, `--grpc-port=${grpc}`];
  args.push('--http-address=127.0.0.1', '--grpc-address=127.0.0.1', '--allow-metrics=false', '--log-info=false');
  if (threads !== undefined) args.push(`--http-thread-count=${threads}`);
  const child = pinnedSpawn(serverCpus, args);
  await awaitReady(child, `http://127.0.0.1:${http}`, performance.now(), 60_000);
  return { pid: child.pid as number, http, grpc, stop: () => stopProcess(child) };
}

/** Runs `procs` load generators for one cell and reads the server's CPU and statistics around the window. */
async function measure(server: Server, protocol: string, concurrency: number): Promise<Omit<CoresSample, 'label'>> {
  const procs = Math.min(loadgenProcs, concurrency);
  const from = Date.now() + SPAWN_SLACK_MS + warmupMs;
  const to = from + durationMs;
  const port = protocol === 'grpc' ? server.grpc : server.http;
  const outputs = Array.from({ length: procs }, (_, i) => {
    const connections = Math.floor(concurrency / procs) + (i < concurrency % procs ? 1 : 0);
    const child = pinnedSpawn(clientCpus, [
      '--import',
      'tsx',
      join(ROOT, 'bench/cores/load.ts'),
      `--protocol=${protocol}`,
      `--port=${port}`,
      `--model=${model}`,
      `--connections=${connections}`,
      `--from=${from}`,
      `--to=${to}`,
    ]);
    let out = '';
    let err = '';
    child.stdout?.on('data', (d: Buffer) => (out += d));
    child.stderr?.on('data', (d: Buffer) => (err += d));
    return new Promise<{ count: number; errors: number; histogram: number[] }>((resolve, reject) =>
      child.once('exit', (code) =>
        code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`load generator exited ${code}: ${err}`)),
      ),
    );
  });
  await sleep(from - Date.now());
  const cpu0 = cpuTicks(server.pid);
  const stats0 = await kserveStats(`127.0.0.1:${server.http}`, model);
  await sleep(to - Date.now());
  const cpu1 = cpuTicks(server.pid);
  const stats1 = await kserveStats(`127.0.0.1:${server.http}`, model);
  const results = await Promise.all(outputs);
  const count = results.reduce((n, r) => n + r.count, 0);
  const histogram = results[0].histogram.map((_, i) => results.reduce((n, r) => n + r.histogram[i], 0));
  const seconds = durationMs / 1000;
  // The statistics count what the server finished in the window (the stats reads take a moment: close enough).
  const served = stats0 && stats1 ? stats1.count - stats0.count : count;
  const perRequestUs = (ticks: number): number => (ticks / TICKS_PER_S / Math.max(1, served)) * 1e6;
  return {
    protocol,
    concurrency,
    rps: count / seconds,
    p50_us: percentileOf(histogram, 0.5),
    p99_us: percentileOf(histogram, 0.99),
    errors: results.reduce((n, r) => n + r.errors, 0),
    main_cpu: (cpu1.main - cpu0.main) / TICKS_PER_S / seconds,
    frontend_cpu: (cpu1.frontEnd - cpu0.frontEnd) / TICKS_PER_S / seconds,
    process_cpu: (cpu1.total - cpu0.total) / TICKS_PER_S / seconds,
    main_us_per_request: perRequestUs(cpu1.main - cpu0.main),
    process_us_per_request: perRequestUs(cpu1.total - cpu0.total),
  };
}

/** The latency at quantile q of a bench/cores/load.ts histogram (2 % buckets), µs. */
function percentileOf(histogram: number[], q: number): number {
  const total = histogram.reduce((a, b) => a + b, 0);
  let seen = 0;
  for (let i = 0; i < histogram.length; i++) {
    seen += histogram[i];
    if (seen >= q * total && total > 0) return 1.02 ** (i + 0.5);
  }
  return NaN;
}

async function main(): Promise<void> {
  const repos = await makeRepos();
  const repo = o.batching === 'off' ? repos.off : repos.on;
  const instances = Number(o.instances);
  if (instances > 1) {
    await appendFile(join(repo, model, 'config.pbtxt'), `instance_group [ { count: ${instances} kind: KIND_CPU } ]\n`);
  }
  const servers: { label: string; main: string; threads: number | undefined }[] = [];
  for (const t of list(o.threads as string)) servers.push({ label: `${t}`, main: o.main as string, threads: t });
  // The baseline runs first in each round unless asked otherwise (to tell an order effect from a difference).
  if (o.baseline) {
    const baseline = { label: 'baseline', main: o.baseline, threads: undefined };
    if (o['baseline-last']) servers.push(baseline);
    else servers.unshift(baseline);
  }
  const samples: CoresSample[] = [];
  const started = performance.now();
  progress(
    `cores: ${cores} CPUs (server ${serverCpus || 'all'}, load ${clientCpus || 'all'}, ${loadgenProcs} load processes), ` +
      `${model}, batching ${o.batching}, ${instances} instance(s), load average ${loadavg()[0].toFixed(1)}`,
  );
  try {
    for (let round = 1; round <= Number(o.rounds); round++) {
      for (const s of servers) {
        const server = await startServer(s.main, repo, s.threads);
        try {
          for (const protocol of (o.protocols as string).split(',')) {
            for (const c of list(o.concurrency as string)) {
              const r = await measure(server, protocol, c);
              samples.push({ label: s.label, ...r });
              progress(
                `round ${round} threads ${s.label.padEnd(8)} ${protocol.padEnd(4)} c=${String(c).padEnd(3)} ` +
                  `${r.rps.toFixed(0).padStart(7)} req/s  p50 ${r.p50_us.toFixed(0)} µs  main ${(r.main_cpu * 100).toFixed(0)} %` +
                  ` (${r.main_us_per_request.toFixed(1)} µs/req)  process ${r.process_cpu.toFixed(2)} cores` +
                  (r.errors > 0 ? `  ${r.errors} errors` : ''),
              );
            }
          }
        } finally {
          await server.stop();
        }
      }
    }
  } finally {
    await repos.cleanup();
  }
  const report: CoresReport = {
    date: new Date().toISOString(),
    duration_s: (performance.now() - started) / 1000,
    machine: `${cores} CPUs, Node ${process.version}, load average ${loadavg()[0].toFixed(1)} at the end`,
    server_cpus: serverCpus || 'all',
    client_cpus: clientCpus || 'all',
    server_cores: cpuCount(serverCpus),
    loadgen_procs: loadgenProcs,
    model,
    batching: o.batching as string,
    instances,
    rounds: Number(o.rounds),
    duration_ms: durationMs,
    samples,
  };
  const md = coresMarkdown(report, median);
  const out = join(ROOT, 'bench/results', o.out as string);
  await writeFile(`${out}.json`, `${JSON.stringify(report, null, 2)}\n`);
  await writeFile(`${out}.md`, md);
  process.stdout.write(md);
  progress(`done in ${report.duration_s.toFixed(0)} s: ${out}.{json,md}`);
}

await main();
