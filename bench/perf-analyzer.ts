/**
 * Runs Triton's perf_analyzer (.venv/bin/perf_analyzer, made by scripts/setup-python.sh) at one concurrency
 * and reads its CSV: throughput (infer/s) and client latency percentiles (µs).
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './common.js';
import { perfAnalyzerData, type ModelSpec } from './models.js';

export const PERF_ANALYZER = join(ROOT, '.venv/bin/perf_analyzer');

export interface LoadResult {
  throughput: number;
  p50_us: number;
  p99_us: number;
}

export interface PerfAnalyzerRun {
  model: ModelSpec;
  /** host:port */
  url: string;
  protocol: 'http' | 'grpc';
  /** Tensor encoding over HTTP: KServe JSON or Triton's binary tensor data. Ignored for gRPC. */
  format: 'json' | 'binary';
  concurrency: number;
  measurementIntervalMs: number;
  maxTrials: number;
}

export function perfAnalyzerAvailable(): boolean {
  return existsSync(PERF_ANALYZER);
}

/** Parses perf_analyzer's -f CSV (one row per concurrency). */
export function parsePerfAnalyzerCsv(csv: string): LoadResult {
  const [head, row] = csv.trim().split('\n');
  if (!row) throw new Error(`perf_analyzer CSV has no data row:\n${csv}`);
  const cols = head.split(',');
  const values = row.split(',').map(Number);
  const col = (name: string): number => {
    const i = cols.indexOf(name);
    if (i < 0) throw new Error(`perf_analyzer CSV lacks column '${name}'`);
    return values[i];
  };
  return { throughput: col('Inferences/Second'), p50_us: col('p50 latency'), p99_us: col('p99 latency') };
}

/**
 * One measurement. Stability checking is in effect off (999 %): on a noisy 2-core box even 100 % failed runs
 * outright (perf_analyzer then writes no CSV); the windows are averaged all the same.
 */
export async function runPerfAnalyzer(run: PerfAnalyzerRun): Promise<LoadResult> {
  const dir = await mkdtemp(join(tmpdir(), 'nereid-pa-'));
  try {
    const data = join(dir, 'data.json');
    await writeFile(data, perfAnalyzerData(run.model));
    const args = [
      `-m${run.model.name}`,
      `-u${run.url}`,
      `-i${run.protocol}`,
      `--concurrency-range=${run.concurrency}`,
      `--measurement-interval=${run.measurementIntervalMs}`,
      `--max-trials=${run.maxTrials}`,
      '--stability-percentage=999',
      `--input-data=${data}`,
      ...run.model.inputs.map((i) => `--shape=${i.name}:${run.model.sampleDims.join(',')}`),
      `-f${join(dir, 'out.csv')}`,
    ];
    if (run.protocol === 'http') {
      args.push(`--input-tensor-format=${run.format}`, `--output-tensor-format=${run.format}`);
    }
    await new Promise<void>((resolve, reject) => {
      execFile(PERF_ANALYZER, args, { maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
        if (err)
          reject(new Error(`perf_analyzer failed: ${(stdout + stderr).trim().split('\n').slice(-4).join(' | ')}`));
        else resolve();
      });
    });
    return parsePerfAnalyzerCsv(await readFile(join(dir, 'out.csv'), 'utf8'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
