/**
 * Benchmark orchestrator: where Nereid stands against raw onnxruntime-node and against peers, every
 * figure a ratio measured in the same run (the machines are noisy 2-core boxes).
 *
 *   npm run bench              full: both models, concurrency 1/8/64, every peer that runs here (≤ 10 min)
 *   npm run bench -- --quick   simple only, concurrency 1/64, fastify peer only (≤ 1 min; what CI runs)
 *   npm run bench -- --gpu     the GPU benchmark (bench/gpu.ts; skipped with its reason where no GPU is usable)
 *   npm run bench -- --cores   front-end threads × concurrency, HTTP and gRPC, pinned (bench/cores.ts)
 *
 * Needs `npm run build` and .venv/bin/perf_analyzer (bash scripts/setup-python.sh); `npm run bench` runs both first;
 * the Python peers need .venv/peers/ (bash bench/peers/setup.sh). Progress goes to stderr, the table to stdout,
 * results to bench/results/latest.{json,md,svg} (quick: bench/results/quick.*).
 *
 * Scenarios: S1 raw in-process · S2 HTTP JSON · S3 HTTP binary · S4 gRPC · S5 dynamic batching on (S3 is off)
 * · S6 peers. Nereid serves temporary repositories with complete configs, without and with dynamic_batching.
 */
import { join } from 'node:path';
import { progress, ROOT } from './common.js';
import { runGpuBench } from './gpu.js';
import { runLoadgen } from './loadgen.js';
import { measureServer, type Protocol, type Row } from './measure.js';
import { MODELS, type ModelName, type ModelSpec } from './models.js';
import { perfAnalyzerAvailable, runPerfAnalyzer, type LoadResult } from './perf-analyzer.js';
import { makeRepos } from './repos.js';
import { computeTargets, writeReport, type Report } from './report.js';
import { openRaw } from './scenarios/raw.js';
import { grpcSupport, measureStartup, startNereid } from './servers/nereid.js';
import { peerUnavailable, peerVersions, startFastify, startMlserver, startTriton } from './servers/peers.js';
import type { BenchServer } from './servers/server.js';

if (process.argv.includes('--cores')) {
  // The cores benchmark (front-end threads) is a run of its own: bench/cores.ts.
  await import('./cores.js');
  process.exit(0);
}
const quick = process.argv.includes('--quick');
const MODE = quick
  ? { models: ['simple'] as ModelName[], concurrency: [1, 64], intervalMs: 500, maxTrials: 3, rawMs: 800, startups: 1 }
  : {
      models: ['simple', 'text_encoder'] as ModelName[],
      concurrency: [1, 8, 64],
      intervalMs: 2000,
      maxTrials: 4,
      rawMs: 3000,
      startups: 3,
    };
const RAW_BATCHES = [1, 2, 4, 8];
const started = performance.now();
const rows: Row[] = [];
const skipped: { scenario: string; reason: string }[] = [];

function add(row: Row): void {
  rows.push(row);
  progress(
    `${row.name.padEnd(34)} ${row.model.padEnd(12)} c=${String(row.concurrency).padEnd(3)} ${row.throughput.toFixed(0).padStart(7)}/s  p50 ${row.p50_us.toFixed(0)} µs  p99 ${row.p99_us.toFixed(0)} µs`,
  );
}

function pa(server: BenchServer, model: ModelSpec, protocol: Protocol, c: number): () => Promise<LoadResult> {
  const grpc = protocol === 'grpc';
  return () =>
    runPerfAnalyzer({
      model,
      url: grpc ? (server.grpc as string) : server.http,
      protocol: grpc ? 'grpc' : 'http',
      format: protocol === 'http-binary' ? 'binary' : 'json',
      concurrency: c,
      measurementIntervalMs: MODE.intervalMs,
      maxTrials: MODE.maxTrials,
    });
}

function loadgen(server: BenchServer, model: ModelSpec, c: number): () => Promise<LoadResult> {
  return () =>
    runLoadgen({ model, url: server.http, concurrency: c, warmupMs: MODE.rawMs / 3, durationMs: MODE.rawMs });
}

/** Runs every (model, concurrency, protocol) against one server; a failed run is recorded as skipped. */
async function sweep(
  server: BenchServer,
  scenario: Record<Protocol, string | undefined>,
  label: string,
  tool: Row['tool'] = 'perf_analyzer',
): Promise<void> {
  for (const name of MODE.models) {
    for (const c of MODE.concurrency) {
      for (const [protocol, id] of Object.entries(scenario) as [Protocol, string | undefined][]) {
        if (!id) continue;
        const head = {
          name: `${id} ${label} ${protocol}`,
          scenario: id,
          server: label,
          model: name,
          protocol,
          concurrency: c,
          tool,
        };
        const load = tool === 'node-loadgen' ? loadgen(server, MODELS[name], c) : pa(server, MODELS[name], protocol, c);
        try {
          add(await measureServer(server, head, load));
        } catch (err) {
          skipped.push({ scenario: `${head.name} ${name} c=${c}`, reason: (err as Error).message.split('\n')[0] });
          progress(`FAILED ${head.name} ${name} c=${c}: ${(err as Error).message}`);
        }
      }
    }
  }
}

async function withServer(
  label: string,
  start: () => Promise<BenchServer>,
  body: (s: BenchServer) => Promise<void>,
): Promise<BenchServer | undefined> {
  progress(`starting ${label}`);
  let server: BenchServer;
  try {
    server = await start();
  } catch (err) {
    skipped.push({
      scenario: label,
      reason: `did not start: ${(err as Error).message.split('\n').slice(0, 3).join(' | ')}`,
    });
    progress(`${label} did not start: ${(err as Error).message}`);
    return undefined;
  }
  progress(`${label} ready in ${server.readyMs.toFixed(0)} ms`);
  try {
    await body(server);
  } finally {
    await server.close();
  }
  return server;
}

async function rawScenarios(): Promise<void> {
  for (const name of MODE.models) {
    const raw = await openRaw(MODELS[name]);
    const batches = name === 'text_encoder' ? RAW_BATCHES : [1];
    for (const c of MODE.concurrency) {
      for (const b of c === 1 ? batches : [1]) {
        const r = await raw.run(c, b, MODE.rawMs / 3, MODE.rawMs);
        const id = b === 1 ? 'S1 raw onnxruntime-node' : `S1 raw onnxruntime-node batch ${b}`;
        add({
          name: id,
          scenario: 'S1',
          server: 'raw onnxruntime-node',
          model: name,
          protocol: 'in-process',
          concurrency: c,
          tool: 'in-process',
          ...r,
          batch: b,
          ratio_to_raw: NaN,
        });
      }
    }
    await raw.release();
  }
}

async function main(): Promise<void> {
  if (!perfAnalyzerAvailable()) throw new Error('.venv/bin/perf_analyzer missing: run `bash scripts/setup-python.sh`');
  progress(
    `mode ${quick ? 'quick' : 'full'}: models ${MODE.models.join(', ')}, concurrency ${MODE.concurrency.join('/')}`,
  );
  const grpc = grpcSupport();
  if (!grpc.supported) skipped.push({ scenario: 'S4 nereid grpc', reason: grpc.reason });

  progress('P4: start-to-ready and idle RSS of `node dist/cli/main.js serve` on examples/model_repository');
  const startup = await measureStartup(MODE.startups, grpc.supported);
  progress(`start-to-ready ${startup.readyMs.toFixed(0)} ms, idle RSS ${startup.idleRssMiB.toFixed(1)} MiB`);

  progress('S1: raw onnxruntime-node in-process');
  await rawScenarios();

  const repos = await makeRepos();
  const servers: Report['servers'] = [];
  const note = (s: BenchServer | undefined, what: string): void => {
    if (s) servers.push({ label: what, ready_ms: s.readyMs });
  };
  const mlserverReason = quick ? 'not run in --quick' : peerUnavailable('mlserver');
  try {
    const off = {
      'http-json': 'S2',
      'http-binary': 'S3',
      grpc: grpc.supported ? 'S4' : undefined,
      'in-process': undefined,
    };
    note(
      await withServer(
        'nereid (batching off)',
        () => startNereid(repos.off, grpc.supported),
        async (s) => {
          await sweep(s, off, 'nereid');
          // Like for like with MLServer, which perf_analyzer cannot drive: the same Node load generator.
          if (!mlserverReason)
            await sweep(
              s,
              { 'http-json': 'S2', 'http-binary': undefined, grpc: undefined, 'in-process': undefined },
              'nereid',
              'node-loadgen',
            );
        },
      ),
      'nereid (batching off)',
    );
    const on = { 'http-binary': 'S5', 'http-json': undefined, grpc: undefined, 'in-process': undefined };
    note(
      await withServer(
        'nereid (batching on)',
        () => startNereid(repos.on, grpc.supported),
        (s) => sweep(s, on, 'nereid batching'),
      ),
      'nereid (batching on)',
    );

    const json = { 'http-json': 'S6', 'http-binary': undefined, grpc: undefined, 'in-process': undefined };
    note(
      await withServer(
        'fastify peer',
        () => startFastify(repos.off),
        (s) => sweep(s, json, 'fastify'),
      ),
      'fastify',
    );
    const tritonReason = quick ? 'not run in --quick' : peerUnavailable('triton');
    if (tritonReason) skipped.push({ scenario: 'S6 triton', reason: tritonReason });
    else {
      const both = { 'http-binary': 'S6', grpc: 'S6', 'http-json': undefined, 'in-process': undefined };
      note(await withServer('triton peer', startTriton, (s) => sweep(s, both, 'triton')), 'triton');
    }
    if (mlserverReason) skipped.push({ scenario: 'S6 mlserver', reason: mlserverReason });
    else
      note(
        await withServer('mlserver peer', startMlserver, (s) => sweep(s, json, 'mlserver', 'node-loadgen')),
        'mlserver',
      );
  } finally {
    await repos.cleanup();
  }

  for (const row of rows) {
    const raw = rows.find(
      (r) => r.scenario === 'S1' && r.batch === 1 && r.model === row.model && r.concurrency === row.concurrency,
    );
    row.ratio_to_raw = raw ? row.throughput / raw.throughput : NaN;
  }
  const report: Report = {
    mode: quick ? 'quick' : 'full',
    date: new Date().toISOString(),
    duration_s: (performance.now() - started) / 1000,
    machine: `${(await import('node:os')).cpus().length} CPUs, Node ${process.version}`,
    startup,
    grpc,
    servers,
    peers: await peerVersions(),
    skipped,
    scenarios: rows,
    targets: computeTargets(rows, startup, grpc.supported, quick),
  };
  const out = join(ROOT, 'bench/results', quick ? 'quick' : 'latest');
  const md = await writeReport(report, out);
  process.stdout.write(md);
  progress(`done in ${report.duration_s.toFixed(0)} s: ${out}.{json,md,svg}`);
}

if (process.argv.includes('--gpu')) await runGpuBench();
else await main();
