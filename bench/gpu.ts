/**
 * The GPU benchmark (`npm run bench -- --gpu`): Nereid serving `text_encoder` and a BERT-base (fp32 and fp16)
 * with KIND_GPU instances and dynamic batching over HTTP binary at concurrency 1, 8 and 64, next to, in the same
 * run, the fixed baselines of bench/gpu/baselines.py — onnxruntime-gpu in Python with I/O binding on the same
 * model file, and PyTorch fp16 with a CUDA graph — with absolute seq/s beside the ratios.
 *
 * Skipped with one line (exit 0) where it cannot run: no GPU, no CUDA provider beside onnxruntime's library, or
 * no BERT-base models (they are exported on the GPU machine by scripts/make_examples.py --bert; see
 * scripts/gpu/bench-gpu-on-device.sh, which runs all of this on the H200).
 *
 * Environment: NEREID_BENCH_MODELS (folder with bert-fp32/model.onnx and bert-fp16/model.onnx; default
 * .device/models), NEREID_BENCH_ONLY (model names, comma-separated), NEREID_MAIN (the CLI to serve with; default dist/cli/nereid.cjs), NEREID_BENCH_PYTHON (python
 * with torch and onnxruntime-gpu; default python3), NEREID_BENCH_MS (measurement per point, default 3000).
 *
 * The load generator (bench/gpu/loadgen-binary.ts, several processes) is measured first against a canned server
 * answering with a BERT-base fp32 response's size: its ceiling is printed beside the results.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile, copyFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { decodeInferResponse, encodeInferRequest } from '../src/client/http-codec.js';
import { ortLibraryDir } from '../src/backends/onnxruntime/capi/library.js';
import { progress, ROOT } from './common.js';
import {
  averageBatch,
  cannedServer,
  drive,
  inferenceCounts,
  lines,
  script,
  split,
  startServe,
} from './gpu/http-load.js';
import { formedBatch, report, type GpuRow } from './gpu/report.js';
import { stopProcess } from './servers/server.js';
import { gpuModels, modelConfig, outputShape, SEQ } from './gpu/models.js';

const CONCURRENCY = [1, 8, 64, 128];
const MS = Number(process.env.NEREID_BENCH_MS ?? 3000);
const WARMUP_MS = Math.min(1500, MS / 2);
const TIMING = { warmupMs: WARMUP_MS, durationMs: MS };
const BASELINE_MS = process.env.NEREID_BENCH_BASELINE_MS ?? '1000';
const BASELINE_BATCHES = [1, 8, 32, 64];
const MODELS_DIR = process.env.NEREID_BENCH_MODELS ?? join(ROOT, '.device/models');
const MAIN = process.env.NEREID_MAIN ?? join(ROOT, 'dist/cli/nereid.cjs');
const PYTHON = process.env.NEREID_BENCH_PYTHON ?? 'python3';
const SELF = fileURLToPath(import.meta.url);
/**
 * NEREID_BENCH_DRY_CPU=1: the whole pipeline on KIND_CPU with the models that exist, on a machine without a GPU
 * (tests this script; its numbers mean nothing for the GPU).
 */
const DRY = process.env.NEREID_BENCH_DRY_CPU === '1';
const KIND = DRY ? 'KIND_CPU' : 'KIND_GPU';
/**
 * NEREID_BENCH_TRANSPORTS=inprocess,thread: serve with each onnxruntime transport in turn (default: inprocess).
 */
const TRANSPORTS = (process.env.NEREID_BENCH_TRANSPORTS ?? 'inprocess').split(',');
/**
 * NEREID_BENCH_SERVER_ARGS='--a=1 --b=2|--a=3': more `nereid serve` arguments (front-end threads, say); variants
 * separated by `|` are each served in turn (with each transport).
 */
const EXTRA_ARGS = (process.env.NEREID_BENCH_SERVER_ARGS ?? '')
  .split('|')
  .map((v) => v.split(' ').filter((a) => a !== ''));
/** NEREID_BENCH_ONLY=a,b: only these models (names as in the tables). */
const ONLY = process.env.NEREID_BENCH_ONLY?.split(',');
const MODELS = gpuModels({ modelsDir: MODELS_DIR, dry: DRY, only: ONLY });

type Row = GpuRow;

const rows: Row[] = [];
const skipped: string[] = [];

/** Why the benchmark cannot run here, or undefined. */
export function gpuBenchSkipReason(): string | undefined {
  if (DRY) return existsSync(MAIN) ? undefined : `${MAIN} is missing (npm run build)`;
  if (!existsSync('/proc/driver/nvidia/gpus') && !existsSync('/dev/nvidia0')) {
    return 'no NVIDIA GPU here (neither /proc/driver/nvidia/gpus nor /dev/nvidia0)';
  }
  const dir = ortLibraryDir();
  const missing = ['libonnxruntime_providers_shared.so', 'libonnxruntime_providers_cuda.so'].filter(
    (f) => !existsSync(join(dir, f)),
  );
  if (missing.length > 0) return `${missing.join(', ')} not beside onnxruntime in ${dir} (run \`nereid gpu setup\`)`;
  for (const d of ['bert-fp32', 'bert-fp16']) {
    const f = join(MODELS_DIR, d, 'model.onnx');
    if (!existsSync(f)) {
      return `${f} is missing: export it with \`python scripts/make_examples.py --bert ${join(MODELS_DIR, d)} --dtype ${d.slice(5)}\` (needs torch)`;
    }
  }
  if (!existsSync(MAIN)) return `${MAIN} is missing (npm run build)`;
  return undefined;
}

/** One request of batch 1, the values bench/gpu/baselines.py uses. */
function requestBody(vocab: number): { body: Uint8Array; headers: Record<string, string> } {
  const ids = Int32Array.from({ length: SEQ }, (_, i) => (i * 7919 + 101) % vocab);
  const types = Int32Array.from({ length: SEQ }, (_, i) => (i < SEQ / 2 ? 0 : 1));
  return encodeInferRequest(
    [
      { name: 'input_ids', datatype: 'INT32', shape: [1, SEQ], data: ids },
      { name: 'attention_mask', datatype: 'INT32', shape: [1, SEQ], data: new Int32Array(SEQ).fill(1) },
      { name: 'token_type_ids', datatype: 'INT32', shape: [1, SEQ], data: types },
    ],
    { binary: true, outputs: [{ name: 'output' }] },
  );
}

async function loadgenCeiling(work: string): Promise<void> {
  const size = SEQ * 768 * 4 + 200;
  progress(`load generator ceiling: canned server answering ${size} bytes per request`);
  const { port, child: server } = await cannedServer(size);
  try {
    const { body, headers } = requestBody(30522);
    const file = join(work, 'canned-body.bin');
    await writeFile(file, body);
    for (const c of [1, 64, 128]) {
      const r = await drive(`127.0.0.1:${port}`, '/x', file, headers, c, TIMING);
      add({ what: 'load generator vs canned server', model: `${size} B responses`, concurrency: c, ...r });
    }
  } finally {
    await stopProcess(server);
  }
}

function add(row: Row): void {
  rows.push(row);
  const where = row.concurrency !== undefined ? `c=${row.concurrency}` : `batch ${row.batch}`;
  progress(
    `${row.what.padEnd(34)} ${row.model.padEnd(14)} ${where.padEnd(9)} ${row.seq_s.toFixed(0).padStart(7)} seq/s  p50 ${row.p50_us.toFixed(0)} µs  p99 ${row.p99_us.toFixed(0)} µs${row.avg_batch ? `  avg batch ${row.avg_batch.toFixed(1)}` : ''}${
      row.split
        ? `  [µs/request: queue ${row.split.queue.toFixed(0)}, input ${row.split.input.toFixed(0)}, infer ${row.split.infer.toFixed(0)}, output ${row.split.output.toFixed(0)}]`
        : ''
    }`,
  );
}

async function baselines(): Promise<void> {
  const seen = new Set<string>();
  for (const m of MODELS) {
    if (seen.has(m.baseline)) continue;
    seen.add(m.baseline);
    progress(`baseline: onnxruntime-gpu Python, I/O binding, ${m.baseline}`);
    await python(
      [
        'ort',
        '--model',
        m.file,
        '--batches',
        BASELINE_BATCHES.join(','),
        '--ms',
        BASELINE_MS,
        '--vocab',
        String(m.vocab),
      ],
      m.baseline,
    );
  }
  for (const m of MODELS.filter((x) => x.name === x.baseline)) {
    progress(`Nereid's engine called directly (no server), ${m.name}`);
    const job: { label?: string; syncToo?: boolean } & Record<string, unknown> = {
      file: m.file,
      batches: BASELINE_BATCHES,
      ms: Number(BASELINE_MS),
      vocab: m.vocab,
      seq: SEQ,
      hidden: m.hidden,
      pooled: m.pooled === true,
      datatype: m.datatype,
      parameters: m.parameters ?? {},
      kind: KIND,
    };
    // The same async runs with libuv's pool cut to one thread: every Run from the same thread (rotation vs hop).
    // And with CUDA graphs captured at load for each batch size (GPU only): Run on the calling thread, replaying.
    const graphs = DRY ? [] : [{ ...job, label: 'engine-graph', syncToo: false, graphs: true }];
    for (const variant of [job, { ...job, label: 'engine-uv1', syncToo: false }, ...graphs]) {
      const child = spawn(process.execPath, [...script('engine-direct'), JSON.stringify(variant)], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: variant.label === 'engine-uv1' ? { ...process.env, UV_THREADPOOL_SIZE: '1' } : process.env,
      });
      try {
        await lines(child, (l) => {
          if (!l.startsWith('{')) return;
          const r = JSON.parse(l) as { tool: string; batch: number; seq_s: number; p50_us: number; p99_us: number };
          add({ what: r.tool, model: m.name, batch: r.batch, seq_s: r.seq_s, p50_us: r.p50_us, p99_us: r.p99_us });
          progress(`   engine split µs per run: ${l.slice(l.indexOf('"split"'))}`);
        });
      } catch (err) {
        skipped.push(`engine-direct ${m.name}: ${(err as Error).message.split('\n').slice(-3).join(' | ')}`);
        progress(`engine-direct failed: ${(err as Error).message}`);
      }
    }
  }
  progress('baseline: PyTorch fp16 with a CUDA graph, BERT-base');
  await python(['torch', '--batches', BASELINE_BATCHES.join(','), '--ms', BASELINE_MS], 'bert (torch)');
}

/**
 * The onnxruntime baseline again at every batch size Nereid's dynamic batcher formed at c=64 that the sweep did not
 * run (issue 31 compares each server row with the bare engine at the batch it actually ran).
 */
async function formedBaselines(): Promise<void> {
  for (const base of new Set(MODELS.map((m) => m.baseline))) {
    const m = MODELS.find((x) => x.baseline === base)!;
    const have = new Set(rows.filter((r) => r.what === 'ort' && r.model === base).map((r) => r.batch));
    const formed = rows
      .filter(
        (r) =>
          r.concurrency === 64 &&
          r.avg_batch !== undefined &&
          MODELS.some((x) => x.name === r.model && x.baseline === base),
      )
      .map(formedBatch)
      .filter((b) => !have.has(b));
    const want = [...new Set(formed)].sort((a, b) => a - b);
    if (want.length === 0) continue;
    progress(`baseline at the batches formed: ${base} ${want.join(',')}`);
    await python(
      ['ort', '--model', m.file, '--batches', want.join(','), '--ms', BASELINE_MS, '--vocab', String(m.vocab)],
      base,
    );
  }
}

async function python(args: string[], model: string): Promise<void> {
  const child = spawn(PYTHON, [join(ROOT, 'bench/gpu/baselines.py'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    await lines(child, (l) => {
      if (!l.startsWith('{')) return;
      const r = JSON.parse(l) as { tool: string; batch: number; seq_s: number; p50_us: number; p99_us: number };
      add({ what: r.tool, model, batch: r.batch, seq_s: r.seq_s, p50_us: r.p50_us, p99_us: r.p99_us });
    });
  } catch (err) {
    skipped.push(`${args[0]} baseline for ${model}: ${(err as Error).message.split('\n').slice(-3).join(' | ')}`);
    progress(`baseline failed: ${(err as Error).message}`);
  }
}

/** A row's suffix naming how the server ran, when not the default. */
function label(transport: string, extra: string[]): string {
  const parts = [...(transport === 'inprocess' ? [] : [transport]), ...extra.map((a) => a.replace(/^--/, ''))];
  return parts.length === 0 ? '' : ` (${parts.join(', ')})`;
}

async function nereid(work: string, transport: string, extra: string[]): Promise<void> {
  const repo = join(work, `repo-${transport}-${extra.join('_').replace(/[^a-z0-9]/gi, '')}`);
  const list = MODELS;
  for (const m of list) {
    await mkdir(join(repo, m.name, '1'), { recursive: true });
    await copyFile(m.file, join(repo, m.name, '1', 'model.onnx'));
    await writeFile(join(repo, m.name, 'config.pbtxt'), modelConfig(m, DRY));
  }
  const instances = list.reduce((n, m) => n + m.count, 0);
  progress(`starting nereid (${MAIN}) with ${list.map((m) => m.name).join(', ')}`);
  const { child, http, readyMs } = await startServe(
    [MAIN],
    repo,
    [`--backend-config=onnxruntime,transport=${transport}`, ...extra],
    { env: { ...process.env, UV_THREADPOOL_SIZE: String(instances + 8) } },
  );
  progress(`nereid ready in ${readyMs.toFixed(0)} ms`);
  try {
    for (const m of list) {
      const { body, headers } = requestBody(m.vocab);
      const file = join(work, `${m.name}.bin`);
      await writeFile(file, body);
      const path = `/v2/models/${m.name}/infer`;
      // One checked answer first: the right output shape and size, so a fast error is never counted as a result.
      const res = await fetch(`http://${http}${path}`, { method: 'POST', body: Buffer.from(body), headers });
      const bytes = new Uint8Array(await res.arrayBuffer());
      if (res.status !== 200)
        throw new Error(`${m.name}: HTTP ${res.status}: ${Buffer.from(bytes).toString().slice(0, 300)}`);
      const hl = res.headers.get('inference-header-content-length');
      const out = decodeInferResponse(bytes, hl === null ? undefined : Number(hl)).output('output');
      if (out.shape.join(',') !== outputShape(m).join(',') || out.datatype !== m.datatype) {
        throw new Error(`${m.name}: unexpected output ${out.datatype} [${out.shape.join(',')}]`);
      }
      for (const c of CONCURRENCY) {
        try {
          const before = await inferenceCounts(http, m.name);
          const r = await drive(http, path, file, headers, c, TIMING);
          const after = await inferenceCounts(http, m.name);
          const avg = averageBatch(before, after);
          add({
            what: `nereid ${KIND} x${m.count} HTTP binary${label(transport, extra)}`,
            model: m.name,
            concurrency: c,
            ...r,
            avg_batch: avg,
            split: split(before, after),
          });
        } catch (err) {
          skipped.push(`nereid ${m.name} c=${c}: ${(err as Error).message.split('\n')[0]}`);
          progress(`FAILED nereid ${m.name} c=${c}: ${(err as Error).message}`);
        }
      }
    }
  } finally {
    await stopProcess(child);
  }
}

export async function runGpuBench(): Promise<void> {
  const reason = gpuBenchSkipReason();
  if (reason !== undefined) {
    process.stdout.write(`GPU benchmark skipped: ${reason}\n`);
    return;
  }
  const work = await mkdtemp(join(tmpdir(), 'nereid-gpu-bench-'));
  try {
    await loadgenCeiling(work);
    const ceiling = rows.splice(0);
    await baselines();
    for (const extra of EXTRA_ARGS) for (const t of TRANSPORTS) await nereid(work, t, extra);
    await formedBaselines();
    const setup = `${MS} ms per point, ${WARMUP_MS} ms warm-up; nereid serve with --backend-config=onnxruntime,transport=${TRANSPORTS.join('|')} × [${EXTRA_ARGS.map((v) => v.join(' ') || '(defaults)').join(' | ')}]`;
    const md = report({ rows, models: MODELS, skipped, ceiling, setup });
    const dir = join(ROOT, 'bench/results');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'gpu.md'), md);
    await writeFile(join(dir, 'gpu.json'), `${JSON.stringify({ rows, ceiling, skipped }, null, 2)}\n`);
    process.stdout.write(md);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

if (process.argv[1] === SELF) await runGpuBench();
