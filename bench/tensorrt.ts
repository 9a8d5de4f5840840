/**
 * The TensorRT benchmark: one plan served by Nereid's tensorrt backend next to bare TensorRT on the same GPU, in one
 * run (issue 23's goals):
 * - bare TensorRT (bench/peers/tensorrt_bare.py: one context, pinned host buffers, H2D + execute_async_v3 + D2H,
 *   synchronized per run) at batch 1, 8, 32, 64, and at the batch the dynamic batcher formed;
 * - Nereid's backend called directly (backend.load → instance.execute, what a request reaches after the protocol
 *   and scheduler layers) at batch 1 and 32: goal ≥ 0.95 of bare at 32;
 * - `nereid serve` over HTTP with binary tensors, requests of batch 1, dynamic batching, at concurrency 1, 64, 128:
 *   goal ≥ 0.90 of bare at the batch formed (c=64) and of bare's best (c=128); c=1 p50 − bare batch-1 p50 ≤ the
 *   load generator's round trip to a canned server (measured here) + 150 µs.
 * Skips with one line (exit 0) without a plan or a TensorRT that runs it.
 *
 *   node --import tsx bench/tensorrt.ts --plan P [--ms 3000] [--out DIR] [--label NAME] [--instances 2]
 * Inputs are the plan's profile-0 opt shape past the batch dim, zero-filled (valid token ids). Writes
 * DIR/tensorrt-<label>.md and .json (default DIR bench/results).
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile, copyFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { noopLogger } from '../src/core/logger.js';
import type { Tensor } from '../src/core/tensor.js';
import type { EngineResponse } from '../src/backends/contract.js';
import { DATATYPES } from '../src/core/datatypes.js';
import { tensorrtBackend } from '../src/backends/tensorrt/index.js';
import { resolveEnvironment } from '../src/backends/tensorrt/environment.js';
import { backendOptions } from '../src/backends/tensorrt/options.js';
import { finalizeConfig, type ModelConfig } from '../src/config/model-config.js';
import { encodeInferRequest } from '../src/client/http-codec.js';
import { percentile, progress, ROOT } from './common.js';
import { stopProcess } from './servers/server.js';
import {
  averageBatch,
  cannedServer,
  drive,
  inferenceCounts,
  LOADGEN_PROCS,
  split,
  startServe,
} from './gpu/http-load.js';
import { report, type Row } from './gpu/tensorrt-report.js';
import { enginePhases, TRACE_FILE } from './gpu/tensorrt-phases.js';
import { hops } from './gpu/hops.js';

const args = process.argv.slice(2);
const arg = (name: string, dflt: string | undefined): string | undefined => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const plan = arg('plan', process.env.NEREID_BENCH_PLAN);
const MS = Number(arg('ms', '3000'));
const TIMING = { warmupMs: Math.min(1500, MS / 2), durationMs: MS };
const OUT = arg('out', join(ROOT, 'bench/results'))!;
const LABEL = arg('label', 'gpu')!;
const INSTANCES = Number(arg('instances', '2'));
const BARE_BATCHES = [1, 8, 32, 64];
const CONCURRENCY = [1, 64, 128];
/**
 * The servers of the HTTP rows (`--servers plain/1,tuned/1,tuned/0`, or NEREID_BENCH_SERVERS): the model's config as Triton's defaults
 * leave it (`plain`) or tuned (`tuned`: CUDA graphs for every batch size, busy-wait events, coalesce-request-input, execution-policy
 * BLOCKING), each with that
 * many front-end threads (0 = the server's default, one per core from 4 cores); a third part `general` runs the
 * engine with NEREID_TRT_WIRE=0 (every batch through the python backend's request objects: the A/B of the wire path).
 */
const SERVERS = arg('servers', process.env.NEREID_BENCH_SERVERS ?? 'plain/1,tuned/1,tuned/0')!
  .split(',')
  .map((v) => ({
    tuned: v.startsWith('tuned'),
    threads: Number(v.split('/')[1] ?? 1),
    general: v.split('/')[2] === 'general',
  }));

const rows: Row[] = [];

function skip(why: string): never {
  process.stdout.write(`tensorrt benchmark: skipped: ${why}\n`);
  process.exit(0);
}

function add(r: Row): Row {
  rows.push(r);
  const where = r.concurrency !== undefined ? `c=${r.concurrency}` : `batch ${r.batch}`;
  progress(
    `${r.what.padEnd(36)} ${where.padEnd(9)} ${r.seq_s.toFixed(0).padStart(7)} seq/s  p50 ${r.p50_us.toFixed(0)} µs${r.avg_batch !== undefined ? `  avg batch ${r.avg_batch.toFixed(1)}` : ''}${r.split ? `  [µs/req queue ${r.split.queue.toFixed(0)} input ${r.split.input.toFixed(0)} infer ${r.split.infer.toFixed(0)} output ${r.split.output.toFixed(0)}]` : ''}`,
  );
  return r;
}

const env = resolveEnvironment(backendOptions({}));
function bare(batches: number[]): Row[] {
  const out = execFileSync(
    env.executable,
    [
      join(ROOT, 'bench/peers/tensorrt_bare.py'),
      '--plan',
      plan!,
      '--batch',
      batches.join(','),
      '--seconds',
      String(MS / 1000),
    ],
    { env: env.env, encoding: 'utf8' },
  );
  return out
    .trim()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { batch: number; samples_per_s: number; p50_ms: number; p99_ms: number })
    .map((r) =>
      add({
        what: 'bare TensorRT (pinned host I/O)',
        batch: r.batch,
        seq_s: r.samples_per_s,
        p50_us: r.p50_ms * 1e3,
        p99_us: r.p99_ms * 1e3,
      }),
    );
}

function inputsOf(config: ModelConfig, batch: number): Tensor[] {
  return (config.input ?? []).map((i) => {
    const dt = Object.entries(DATATYPES).find(([, v]) => v.configName === i.data_type)![0] as keyof typeof DATATYPES;
    const dims = (i.dims ?? []).map((d) => (d < 0 ? 128 : d));
    const shape = [batch, ...dims];
    const Ctor = DATATYPES[dt].array!;
    return { name: i.name ?? '', datatype: dt, shape, data: new Ctor(shape.reduce((a, b) => a * b, 1)) } as Tensor;
  });
}

/**
 * NEREID_BENCH_PROFILE=DIR: the server runs with --cpu-prof into DIR, and every python child (NEREID_PY_PROFILE,
 * inherited) writes its own profile of each timed run there when signalled: where the time per request goes.
 */
const PROFILE = process.env.NEREID_BENCH_PROFILE;
if (PROFILE) process.env.NEREID_PY_PROFILE = PROFILE;

/** Asks every python child on the machine for its profile so far, headed by `label` (device runs only). */
function profileChildren(label: string): void {
  if (!PROFILE) return;
  try {
    execFileSync('bash', [
      '-c',
      `for p in $(pgrep -f '^[^ ]*python[^ ]* -m nereid_python'); do echo "### ${label}" >> ${PROFILE}/py-$p.txt; kill -USR1 $p; done`,
    ]);
  } catch {
    // no child alive: nothing to profile
  }
}

/**
 * Nereid's backend called directly: batches of `batch` rows, closed loop, one instance; once with outputs copied
 * out for the caller (what every consumer but an HTTP writer gets) and once viewing the child's block (viewsOk, the
 * lease released as soon as the response arrives: what the HTTP binary path does after its write). Then two
 * instances of the model on the GPU, each with its own closed loop (outputs viewed): with Triton's default
 * execution-policy DEVICE_BLOCKING (their GPU work never overlaps; one instance's host work, the request's trip
 * to the engine process and back and its Python, runs while the other's batch is on the GPU), and with BLOCKING
 * (each instance's stream runs when it is ready, so the GPU also overlaps one batch's copies with the other's
 * kernels).
 */
async function direct(config: ModelConfig, batches: number[]): Promise<void> {
  const outputs = (config.output ?? []).map((o) => o.name ?? '');
  const signal = new AbortController().signal;
  const responder = {
    send(_i: number, r: EngineResponse | Error | null): void {
      if (r !== null && !(r instanceof Error)) r.lease?.release();
    },
  };
  const load = async (policy: string, graphs: boolean) => {
    const backend = tensorrtBackend();
    const name = 'trt';
    const handle = await backend.load({
      name,
      version: 1,
      config: finalizeConfig(graphs ? { ...config, optimization: { cuda: { graphs: true } } } : config, name),
      modelDir: join(plan!, '..', '..'),
      modelPath: plan!,
      backendConfig: { 'execution-policy': policy },
      logLevel: 'warn',
      logger: noopLogger,
    });
    const spec = (index: number) => ({
      name: `${name}_${index}`,
      index,
      kind: 'KIND_GPU' as const,
      device: 0,
      profiles: [],
    });
    return { handle, insts: [await handle.createInstance(spec(0)), await handle.createInstance(spec(1))] };
  };
  const phases = enginePhases();
  const measure = async (
    insts: Awaited<ReturnType<typeof load>>['insts'],
    batch: number,
    viewsOk: boolean,
    loops: number,
    what: string,
  ): Promise<void> => {
    const inputs = inputsOf(config, batch);
    const run = async (k: number): Promise<void> => {
      await insts[k]!.execute([{ inputs, outputs, batchSize: batch, viewsOk }], responder, signal);
    };
    const label = `${what} batch ${batch}`;
    profileChildren(`warm-up before direct ${label}`);
    const warm = performance.now() + TIMING.warmupMs;
    await Promise.all(
      Array.from({ length: loops }, async (_, k) => {
        while (performance.now() < warm) await run(k);
      }),
    );
    const lat: number[] = [];
    phases.mark();
    const end = performance.now() + MS;
    await Promise.all(
      Array.from({ length: loops }, async (_, k) => {
        while (performance.now() < end) {
          const t0 = performance.now();
          await run(k);
          lat.push((performance.now() - t0) * 1e3);
        }
      }),
    );
    profileChildren(`direct ${label} (${lat.length} runs)`);
    lat.sort((a, b) => a - b);
    add({
      what: `Nereid's backend, called directly (${what})`,
      batch,
      seq_s: (lat.length * batch) / (MS / 1000),
      p50_us: percentile(lat, 50),
      p99_us: percentile(lat, 99),
      engine: phases.take(),
    });
  };
  // Last: CUDA graphs (one per batch size, captured at load), which replace TensorRT's enqueue (~0.55 ms of host
  // time per BERT batch on the H200) by one launch.
  for (const [policy, graphs] of [
    ['DEVICE_BLOCKING', false],
    ['BLOCKING', false],
    ['BLOCKING', true],
  ] as const) {
    const { handle, insts } = await load(policy, graphs);
    const big = Math.max(...batches);
    try {
      if (policy === 'DEVICE_BLOCKING')
        for (const batch of batches) {
          await measure(insts, batch, false, 1, 'outputs copied');
          await measure(insts, batch, true, 1, 'outputs viewed');
        }
      if (graphs) await measure(insts, big, true, 1, 'outputs viewed, CUDA graphs');
      await measure(insts, big, true, 2, `outputs viewed, 2 instances, ${policy}${graphs ? ', CUDA graphs' : ''}`);
    } finally {
      for (const inst of insts) await inst.destroy();
      await handle.unload();
    }
  }
}

function requestFile(config: ModelConfig): { body: Uint8Array; headers: Record<string, string> } {
  const inputs = inputsOf(config, 1).map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape, data: t.data }));
  return encodeInferRequest(inputs as Parameters<typeof encodeInferRequest>[0], {
    binary: true,
    outputs: (config.output ?? []).map((o) => ({ name: o.name ?? '' })),
  });
}

async function overHttp(config: ModelConfig, work: string): Promise<void> {
  const { body, headers } = requestFile(config);
  const file = join(work, 'body.bin');
  await writeFile(file, body);
  const outBytes = (config.output ?? []).reduce((n, o) => {
    const dt = Object.values(DATATYPES).find((v) => v.configName === o.data_type);
    return n + (o.dims ?? []).reduce((a, d) => a * (d < 0 ? 128 : d), 1) * (dt?.byteSize ?? 4);
  }, 0);
  // The load generator's own ceiling at every concurrency the servers are driven at, answered with as many bytes
  // as the model's: a server row cannot be read above it.
  const canned = await cannedServer(outBytes + 200);
  try {
    for (const c of CONCURRENCY)
      add({
        what: `load generator vs canned server (${outBytes + 200} B, ${LOADGEN_PROCS} processes)`,
        concurrency: c,
        ...(await drive(`127.0.0.1:${canned.port}`, '/x', file, headers, c, TIMING)),
      });
  } finally {
    await stopProcess(canned.child);
  }
  for (const server of SERVERS) {
    const repo = join(work, server.tuned ? 'tuned' : 'plain');
    await mkdir(join(repo, 'trt', '1'), { recursive: true });
    await copyFile(plan!, join(repo, 'trt', '1', 'model.plan'));
    const graphs = server.tuned ? 'optimization { cuda { graphs: true busy_wait_events: true } }\n' : '';
    await writeFile(
      join(repo, 'trt', 'config.pbtxt'),
      `name: "trt"\nbackend: "tensorrt"\nmax_batch_size: 64\ndynamic_batching { }\ninstance_group [ { kind: KIND_GPU count: ${INSTANCES} } ]\n${graphs}`,
    );
    await serveAndDrive(repo, file, headers, server.threads, server.tuned, server.general);
  }
}

/**
 * One `nereid serve` with `threads` front-end threads (0: the default, one per core from 4 cores) driven at c=1,
 * 64 and 128. With one thread the HTTP writer sends the outputs from the child's block (leased views); front-end
 * threads get them across threads instead.
 */
async function serveAndDrive(
  repo: string,
  file: string,
  headers: Record<string, string>,
  threads: number,
  tuned: boolean,
  general: boolean,
): Promise<void> {
  const prof = PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE}`] : [];
  const entry = [...prof, '--conditions=nereid-source', '--import', 'tsx', join(ROOT, 'src/cli/main.ts')];
  const flags = threads > 0 ? [`--http-thread-count=${threads}`] : [];
  // Tuned: inputs coalesced into one copy per name, and the instances' batches overlapping on the GPU (one copies
  // while the other computes) instead of Triton's default of one batch at a time per device.
  if (tuned)
    flags.push(
      '--backend-config=tensorrt,coalesce-request-input=true',
      '--backend-config=tensorrt,execution-policy=BLOCKING',
    );
  // Traced runs: the server's trace too (Triton's, off until the c=1 point switches it on), for bench/gpu/hops.ts.
  const triton = TRACE_FILE && `${TRACE_FILE}.${rows.length}.triton.json`;
  if (triton) flags.push(`--trace-config=triton,file=${triton}`);
  const env = general ? { ...process.env, NEREID_TRT_WIRE: '0' } : process.env;
  const { child, http } = await startServe(entry, repo, flags, { readyMs: 300_000, env });
  const phases = enginePhases();
  const label =
    (tuned ? ', tuned (graphs, busy-wait, coalesced, BLOCKING)' : ', config as given') +
    (threads > 0 ? `, ${threads} HTTP thread${threads > 1 ? 's' : ''}` : ', default threads') +
    (general ? ', general path' : '');
  try {
    const path = '/v2/models/trt/infer';
    for (const c of CONCURRENCY) {
      const before = await inferenceCounts(http, 'trt');
      profileChildren(`before HTTP c=${c}`);
      phases.mark();
      const traced = triton !== undefined && c === 1;
      if (traced) await traceSetting(http, { trace_level: ['TIMESTAMPS'], trace_rate: '1' });
      const since = Number(process.hrtime.bigint() / 1000n);
      const r = await drive(http, path, file, headers, c, TIMING);
      if (traced) await traceSetting(http, { trace_level: ['OFF'] });
      const engine = phases.take();
      // The server writes its records as requests end: give the last ones a moment to reach the file.
      if (traced) await new Promise((res) => setTimeout(res, 200));
      profileChildren(`HTTP c=${c}`);
      const after = await inferenceCounts(http, 'trt');
      add({
        what: `nereid HTTP binary, KIND_GPU x${INSTANCES}${label}`,
        concurrency: c,
        ...r,
        avg_batch: averageBatch(before, after),
        split: split(before, after),
        engine,
        hops: traced && TRACE_FILE ? hops(triton, TRACE_FILE, since) : undefined,
      });
    }
  } finally {
    await stopProcess(child);
  }
}

/** Triton's trace extension: the server's trace settings (POST /v2/trace/setting). */
async function traceSetting(http: string, settings: Record<string, unknown>): Promise<void> {
  const res = await fetch(`http://${http}/v2/trace/setting`, { method: 'POST', body: JSON.stringify(settings) });
  if (!res.ok) throw new Error(`trace setting ${JSON.stringify(settings)}: ${res.status} ${await res.text()}`);
}

if (plan === undefined || !existsSync(plan)) skip('no TensorRT plan (give --plan PATH or set NEREID_BENCH_PLAN)');
const backend = tensorrtBackend();
let config: ModelConfig;
try {
  config = await backend.autoComplete(
    { name: 'trt', backend: 'tensorrt' },
    { modelName: 'trt', modelPath: plan, backendConfig: {}, autoComplete: true, logger: noopLogger },
  );
  bare(BARE_BATCHES);
} catch (e) {
  skip(`TensorRT cannot run the plan: ${(e as Error).message.split('\n').slice(-2).join(' ')}`);
}
// NEREID_BENCH_DIRECT: the direct rows' batch sizes (default 1,32; empty: none, for a run about the HTTP rows).
const directBatches = (process.env.NEREID_BENCH_DIRECT ?? '1,32').split(',').filter(Boolean).map(Number);
if (directBatches.length > 0) await direct(config, directBatches);
const work = await mkdtemp(join(tmpdir(), 'nereid-trt-bench-'));
try {
  await overHttp(config, work);
} finally {
  await rm(work, { recursive: true, force: true });
}
const formedAll = rows.filter((r) => r.concurrency === 64 && r.avg_batch !== undefined);
const formed = [...new Set(formedAll.map((r) => Math.max(1, Math.round(r.avg_batch!))))];
const missing = formed.filter((b) => !BARE_BATCHES.includes(b));
if (missing.length > 0) bare(missing);
const md = report(rows, `${plan}`, MS);
await mkdir(OUT, { recursive: true });
await writeFile(join(OUT, `tensorrt-${LABEL}.md`), md);
await writeFile(join(OUT, `tensorrt-${LABEL}.json`), `${JSON.stringify({ plan, rows }, null, 2)}\n`);
process.stdout.write(md);
