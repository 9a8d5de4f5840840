/**
 * `nereid tune`: flags to TuneOptions, SIGINT to the tune's AbortSignal (a second one exits at once), the progress
 * line on stderr, the summary table and the files at the end. The work is src/tools/tune/.
 */
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { InvalidArgError } from '../core/errors.js';
import { parseShapes } from '../tools/tune/inputs.js';
import { writeOutputs } from '../tools/tune/output.js';
import { summaryTable } from '../tools/tune/report.js';
import { runTune, type TuneOptions } from '../tools/tune/tune.js';
import { STDIO, type CommandIo } from './command-io.js';
import { startScratchServer } from './tune-scratch.js';

export const TUNE_HELP = `Usage:
  nereid tune MODEL_DIR [options]
  nereid tune --model-repository R --model NAME [options]

Finds the best config for a model on this machine: loads it in a scratch server (or, with --url, on a running
server under a temporary name), measures the default config, searches instance counts, batching and backend
threads, checks every candidate's answers against the default's, and writes the winner. See docs/tune.md.

Options:
  --url URL                  tune on a running server (explicit model control; candidates are unloaded after)
  --mode quick|exhaustive    coordinate search (default) or every combination
  --objective throughput|latency   maximize throughput (default) or minimize p99 latency
  --concurrency 1,8,64       concurrencies to measure (default: a sweep until throughput stops growing)
  --latency-budget-ms MS     constraint: p99 at most MS
  --min-throughput N         constraint: at least N inferences/s
  --max-gpu-memory-mb MB     constraint: peak GPU memory used at most MB (NVML; the device's, all processes)
  --time-budget SECONDS      bounds the whole search (default 600)
  --input-data FILE          requests in perf_analyzer's JSON form (default: generated from the model's inputs)
  --shape NAME:d1,d2         dimensions of a variable-shaped input (after the batch dimension); repeatable
  --kind cpu,gpu             instance kinds to try (default: the config's)
  --gpus 0,1                 GPUs for KIND_GPU candidates
  --instance-counts 1,2,4    instance counts to try (default 1, 2, 4 … up to the cores)
  --measurement-ms MS        time cap of one measurement point (default: from the time budget)
  --output DIR               write config.pbtxt, report.md, chart.svg, report.json there (else the config is printed)
  --write                    also replace the model's config.pbtxt (the old one kept as config.pbtxt.before-tune)

Exit status: 0 a config was chosen, 1 none met the constraints or the tune failed, 2 bad usage, 130 interrupted.
`;

const list = (flag: string, v: string | undefined): number[] => {
  if (v === undefined) return [];
  const out = v.split(',').map(Number);
  if (out.some((n) => !Number.isInteger(n) || n < (flag === 'gpus' ? 0 : 1))) {
    throw new InvalidArgError(`--${flag} '${v}': expected a comma-separated list of integers`);
  }
  return out;
};

function positiveNumber(flag: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!(n > 0)) throw new InvalidArgError(`--${flag} '${v}': expected a positive number`);
  return n;
}

function oneOf<T extends string>(flag: string, v: string | undefined, allowed: readonly T[], dflt: T): T {
  if (v === undefined) return dflt;
  if (!allowed.includes(v as T)) throw new InvalidArgError(`--${flag} '${v}': expected one of ${allowed.join(', ')}`);
  return v as T;
}

/** node:util's parseArgs, its usage errors (an unknown or valueless option) as INVALID_ARG: exit status 2. */
function parseTuneFlags(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        'model-repository': { type: 'string' },
        model: { type: 'string' },
        url: { type: 'string' },
        mode: { type: 'string' },
        objective: { type: 'string' },
        concurrency: { type: 'string' },
        'latency-budget-ms': { type: 'string' },
        'min-throughput': { type: 'string' },
        'max-gpu-memory-mb': { type: 'string' },
        'time-budget': { type: 'string' },
        'input-data': { type: 'string' },
        shape: { type: 'string', multiple: true },
        kind: { type: 'string' },
        gpus: { type: 'string' },
        'instance-counts': { type: 'string' },
        'measurement-ms': { type: 'string' },
        output: { type: 'string' },
        write: { type: 'boolean' },
      },
    });
  } catch (err) {
    throw new InvalidArgError(`tune: ${(err as Error).message} (see nereid tune --help)`, { cause: err });
  }
}

/** Options from argv (without the signal and progress). */
export function parseTuneArgs(argv: string[]): Omit<TuneOptions, 'startScratch'> & { output?: string; write: boolean } {
  const { values: v, positionals } = parseTuneFlags(argv);
  let modelDir = positionals[0];
  if (positionals.length > 1) throw new InvalidArgError(`'tune' takes one model folder, got ${positionals.join(', ')}`);
  if (modelDir === undefined && v['model-repository'] !== undefined && v.model !== undefined) {
    modelDir = join(v['model-repository'], v.model);
  }
  if (modelDir === undefined) {
    throw new InvalidArgError("'tune' needs MODEL_DIR or --model-repository R --model NAME (see nereid tune --help)");
  }
  const kinds = v.kind?.split(',').map((k) => oneOf('kind', k, ['cpu', 'gpu'] as const, 'cpu'));
  return {
    modelDir: resolve(modelDir),
    url: v.url,
    mode: oneOf('mode', v.mode, ['quick', 'exhaustive'] as const, 'quick'),
    objective: oneOf('objective', v.objective, ['throughput', 'latency'] as const, 'throughput'),
    constraints: {
      latencyBudgetMs: positiveNumber('latency-budget-ms', v['latency-budget-ms']),
      minThroughput: positiveNumber('min-throughput', v['min-throughput']),
      maxGpuMemoryMb: positiveNumber('max-gpu-memory-mb', v['max-gpu-memory-mb']),
    },
    concurrency: list('concurrency', v.concurrency),
    timeBudgetS: positiveNumber('time-budget', v['time-budget']) ?? 600,
    inputData: v['input-data'],
    shapes: parseShapes(v.shape ?? []),
    kinds: kinds?.map((k) => (k === 'gpu' ? 'KIND_GPU' : 'KIND_CPU')),
    gpus: v.gpus === undefined ? undefined : list('gpus', v.gpus),
    instanceCounts: list('instance-counts', v['instance-counts']),
    measurementMs: positiveNumber('measurement-ms', v['measurement-ms']),
    output: v.output,
    write: v.write === true,
  };
}

export async function runTuneCommand(argv: string[], io: CommandIo = STDIO): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    io.out(TUNE_HELP);
    return 0;
  }
  const opts = parseTuneArgs(argv);
  if (opts.write && opts.url !== undefined) {
    throw new InvalidArgError('--write changes the model folder on this machine: it cannot be used with --url');
  }
  const ac = new AbortController();
  const onSigint = (): void => {
    if (ac.signal.aborted) process.exit(130);
    io.err('\ntune: interrupted; unloading the temporary models (Ctrl-C again to quit at once)\n');
    ac.abort(new Error('SIGINT'));
  };
  process.on('SIGINT', onSigint);
  const tty = process.stderr.isTTY === true;
  try {
    const outcome = await runTune({
      ...opts,
      startScratch: startScratchServer,
      signal: ac.signal,
      progress: (line) => io.err(tty ? `\r\x1b[K${line}` : `${line}\n`),
    }).catch((err: unknown) => {
      if (!ac.signal.aborted) throw err;
      return undefined;
    });
    if (outcome === undefined) {
      io.err('tune: interrupted before a config was measured; the temporary models are unloaded\n');
      return 130;
    }
    if (tty) io.err('\n');
    const written = await writeOutputs(outcome, opts.output, opts.write ? opts.modelDir : undefined);
    io.err(summaryTable(outcome.report));
    const r = outcome.report;
    if (r.noneMet) {
      io.err(`tune: ${r.noneMet.message}\n`);
      for (const c of r.noneMet.closest) {
        io.err(
          `  ${c.label} @ c=${c.point.concurrency}: ${c.point.throughput.toFixed(1)}/s, p99 ${c.point.p99Ms.toFixed(2)} ms\n`,
        );
      }
    }
    if (r.written) io.err(`tune: chosen ${r.written.label}: ${r.written.reason}\n`);
    if (r.unexplored.length > 0) io.err(`tune: ${r.unexplored.length} configs left unexplored (time budget)\n`);
    for (const f of written.files) io.err(`tune: wrote ${f}\n`);
    if (opts.output === undefined && written.config !== undefined) io.out(written.config);
    if (r.interrupted) return 130;
    return r.noneMet ? 1 : 0;
  } finally {
    process.off('SIGINT', onSigint);
  }
}
