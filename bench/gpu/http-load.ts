/**
 * The GPU benchmarks' HTTP side (bench/gpu.ts, bench/tensorrt.ts): closed-loop load from several load generator
 * processes (bench/gpu/loadgen-binary.ts; perf_analyzer is not on the GPU machine), the load generator's own
 * ceiling against a canned server, and a model's statistics between two points.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { freePort, percentile, waitReady } from '../common.js';

const HERE = dirname(fileURLToPath(import.meta.url));

/** `node` arguments that run a script of bench/gpu/, as source (tsx) or as bundled JavaScript beside the bundle. */
export function script(name: string): string[] {
  if (import.meta.url.endsWith('.ts')) return ['--import', 'tsx', join(HERE, `${name}.ts`)];
  return [join(HERE, `${name}.mjs`)];
}

export function lines(child: ChildProcess, onLine: (l: string) => void): Promise<number> {
  createInterface({ input: child.stdout! }).on('line', onLine);
  let err = '';
  child.stderr?.on('data', (b: Buffer) => void (err = (err + b.toString()).slice(-3000)));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(0) : reject(new Error(`exit ${code}: ${err.trim()}`))));
  });
}

export interface LoadResult {
  seq_s: number;
  p50_us: number;
  p99_us: number;
  errors: number;
}

export interface LoadTiming {
  warmupMs: number;
  durationMs: number;
}

/**
 * Load generator processes per point: NEREID_BENCH_LOADGEN_PROCS, else half the host's cores (at most 8, at least
 * 2): the other half serves.
 */
export const LOADGEN_PROCS = Number(
  process.env.NEREID_BENCH_LOADGEN_PROCS ?? Math.max(2, Math.min(8, Math.floor(availableParallelism() / 2))),
);

/** Closed loop at `concurrency`, spread over LOADGEN_PROCS load generator processes; `body` is a file. */
export async function drive(
  url: string,
  path: string,
  body: string,
  headers: Record<string, string>,
  concurrency: number,
  timing: LoadTiming,
): Promise<LoadResult> {
  const procs = Math.min(concurrency, LOADGEN_PROCS);
  const results: Array<{ ok: number; errors: number; firstError: string; latencies_us: number[] }> = [];
  await Promise.all(
    Array.from({ length: procs }, async (_, i) => {
      const c = Math.floor(concurrency / procs) + (i < concurrency % procs ? 1 : 0);
      const job = { url, path, body, headers, concurrency: c, ...timing };
      const child = spawn(process.execPath, [...script('loadgen-binary'), JSON.stringify(job)], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      await lines(child, (l) => results.push(JSON.parse(l) as (typeof results)[number]));
    }),
  );
  const lat = results.flatMap((r) => r.latencies_us).sort((a, b) => a - b);
  const errors = results.reduce((n, r) => n + r.errors, 0);
  if (lat.length === 0) throw new Error(`no successful request: ${results.find((r) => r.firstError)?.firstError}`);
  return {
    seq_s: lat.length / (timing.durationMs / 1000),
    p50_us: percentile(lat, 50),
    p99_us: percentile(lat, 99),
    errors,
  };
}

/** Starts the canned server (answers every request with `size` bytes); resolves to its port and a stop function. */
export async function cannedServer(size: number): Promise<{ port: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [...script('loadgen-binary'), '--canned', String(size)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<string>((resolve) =>
    createInterface({ input: child.stdout! }).once('line', (l) => resolve(l.trim())),
  );
  return { port, child };
}

export interface StatsSnapshot {
  inferences: number;
  executions: number;
  requests: number;
  queueNs: number;
  inputNs: number;
  inferNs: number;
  outputNs: number;
}

export async function inferenceCounts(http: string, model: string): Promise<StatsSnapshot> {
  const res = await fetch(`http://${http}/v2/models/${model}/stats`);
  type Dur = { count: number; ns: number };
  const body = (await res.json()) as {
    model_stats: Array<{
      inference_count: number;
      execution_count: number;
      inference_stats: { success: Dur; queue: Dur; compute_input: Dur; compute_infer: Dur; compute_output: Dur };
    }>;
  };
  return body.model_stats.reduce(
    (a, s) => ({
      inferences: a.inferences + Number(s.inference_count),
      executions: a.executions + Number(s.execution_count),
      requests: a.requests + Number(s.inference_stats.success.count),
      queueNs: a.queueNs + Number(s.inference_stats.queue.ns),
      inputNs: a.inputNs + Number(s.inference_stats.compute_input.ns),
      inferNs: a.inferNs + Number(s.inference_stats.compute_infer.ns),
      outputNs: a.outputNs + Number(s.inference_stats.compute_output.ns),
    }),
    { inferences: 0, executions: 0, requests: 0, queueNs: 0, inputNs: 0, inferNs: 0, outputNs: 0 },
  );
}

/** Rows per execution between two snapshots: the batch size the dynamic batcher formed. */
export function averageBatch(a: StatsSnapshot, b: StatsSnapshot): number {
  return (b.inferences - a.inferences) / Math.max(1, b.executions - a.executions);
}

/** µs per request in each phase between two snapshots (Triton counts compute times per request of a batch). */
export function split(
  a: StatsSnapshot,
  b: StatsSnapshot,
): { queue: number; input: number; infer: number; output: number } {
  const n = Math.max(1, b.requests - a.requests);
  const us = (k: 'queueNs' | 'inputNs' | 'inferNs' | 'outputNs'): number => (b[k] - a[k]) / n / 1e3;
  return { queue: us('queueNs'), input: us('inputNs'), infer: us('inferNs'), output: us('outputNs') };
}

/**
 * `nereid serve` on 127.0.0.1 (a free HTTP port; gRPC and metrics on ports of their own) from `entry` (node
 * arguments naming the CLI), resolved once /v2/health/ready answers; the error carries the server's last output.
 */
export async function startServe(
  entry: string[],
  repo: string,
  extra: string[],
  opts: { env?: NodeJS.ProcessEnv; readyMs?: number } = {},
): Promise<{ child: ChildProcess; http: string; readyMs: number }> {
  const port = await freePort();
  const http = `127.0.0.1:${port}`;
  const t0 = performance.now();
  const args = [...entry, 'serve', `--model-repository=${repo}`, `--http-port=${port}`, '--http-address=127.0.0.1'];
  const child = spawn(process.execPath, [...args, '--grpc-port=0', '--metrics-port=0', '--log-info=false', ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: opts.env ?? process.env,
  });
  let output = '';
  const keep = (b: Buffer): void => void (output = (output + b.toString()).slice(-4000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  try {
    const alive = (): boolean => child.exitCode === null;
    const readyMs = await waitReady(`http://${http}/v2/health/ready`, t0, opts.readyMs ?? 180_000, alive);
    return { child, http, readyMs };
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`${(err as Error).message}\n${output}`);
  }
}
