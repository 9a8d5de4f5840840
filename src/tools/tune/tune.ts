/**
 * `nereid tune`: read the model folder (never changed unless `write`), open a target (scratch server or `--url`),
 * keep the default config loaded for reference answers and the confirmation, measure the load generator's ceiling,
 * search, confirm the winner against the default, and build the report. Whatever happens, the target is closed:
 * every temporary model is unloaded, also when the signal fires (SIGINT).
 */
import { readFile } from 'node:fs/promises';
import { availableParallelism, cpus, hostname } from 'node:os';
import { basename, join } from 'node:path';
import { parseModelConfigOrThrow } from '../../config/index.js';
import type { ModelConfig } from '../../config/model-config.js';
import { InvalidArgError, NereidError } from '../../core/errors.js';
import { collectAnswers, toleranceText } from './compare.js';
import { confirm, keepsWinner, type Confirmation } from './confirm.js';
import { openGpuSampler, type GpuSampler } from './gpu.js';
import { generatedRequests, requestsFromFile, type TuneRequest } from './inputs.js';
import { measureCeiling, type PointResult } from './measure.js';
import {
  bestOf,
  search,
  violation,
  type CandidateResult,
  type Constraints,
  type Objective,
  type SearchState,
} from './search.js';
import { buildSpace, type Space } from './space.js';
import { openTarget, type ScratchStarter, type TuneTarget } from './target.js';

export interface TuneOptions {
  /** The model's folder (config.pbtxt and version folders). */
  modelDir: string;
  url?: string;
  mode: 'quick' | 'exhaustive';
  objective: Objective;
  constraints: Constraints;
  concurrency: number[];
  timeBudgetS: number;
  inputData?: string;
  shapes: Map<string, number[]>;
  kinds?: ('KIND_CPU' | 'KIND_GPU')[];
  gpus?: number[];
  instanceCounts?: number[];
  /** Time cap of one measurement point; default: derived from the time budget. */
  measurementMs?: number;
  signal?: AbortSignal;
  /** Starts the scratch server when there is no `url`. */
  startScratch: ScratchStarter;
  /** Called after every candidate with a one-line status. */
  progress?: (line: string) => void;
}

export interface TuneReport {
  model: string;
  mode: 'quick' | 'exhaustive';
  objective: Objective;
  constraints: Constraints;
  target: string;
  machine: { host: string; cores: number; cpu: string; platform: string };
  startedAt: string;
  finishedAt: string;
  timeBudgetS: number;
  pointMs: number;
  ceiling?: PointResult;
  tolerance: string;
  /** Where GPU use was sampled, or why it was not. */
  gpu: string;
  dimensions: { name: string; settings: string[] }[];
  candidates: CandidateResult[];
  unexplored: string[];
  /** The candidate written (the search's winner, or the default when the confirmation kept it). */
  written?: { label: string; reason: string; point?: PointResult };
  confirmation?: Confirmation;
  /** Set when no candidate met the constraints. */
  noneMet?: { message: string; closest: { label: string; point: PointResult; violation: number }[] };
  interrupted: boolean;
}

export interface TuneOutcome {
  report: TuneReport;
  /** The config to write (the original config with the winner's changes and the original name). */
  config?: ModelConfig;
  base: ModelConfig;
}

const PROBE_REQUESTS = 8;

async function readBase(dir: string): Promise<{ base: ModelConfig; name: string }> {
  const file = join(dir, 'config.pbtxt');
  const base = parseModelConfigOrThrow(await readFile(file, 'utf8'), file);
  return { base, name: base.name || basename(dir) };
}

async function prepareRequests(t: TuneTarget, probe: string, base: ModelConfig, o: TuneOptions) {
  const meta = await t.client.modelMetadata(probe, undefined, { signal: o.signal });
  const batching = (base.max_batch_size ?? 0) > 0;
  return o.inputData !== undefined
    ? requestsFromFile(o.inputData, meta, batching)
    : generatedRequests(meta, batching, o.shapes, PROBE_REQUESTS);
}

function constraintText(c: Constraints): string {
  const parts = [
    c.latencyBudgetMs !== undefined ? `p99 ≤ ${c.latencyBudgetMs} ms` : '',
    c.minThroughput !== undefined ? `throughput ≥ ${c.minThroughput}/s` : '',
    c.maxGpuMemoryMb !== undefined ? `GPU memory ≤ ${c.maxGpuMemoryMb} MiB` : '',
  ].filter(Boolean);
  return parts.join(', ');
}

/** The message and the closest candidates when none met the constraints. */
function noneMet(state: SearchState, c: Constraints): TuneReport['noneMet'] {
  const closest = state.results
    .flatMap((r) => r.points.map((p) => ({ label: r.label, point: p, violation: violation(p, c) })))
    .filter((x) => Number.isFinite(x.violation))
    .sort((a, b) => a.violation - b.violation)
    .slice(0, 3);
  return {
    message: `no configuration met the constraints (${constraintText(c)}); the closest measured are listed — relax --latency-budget-ms / --min-throughput or try other concurrencies`,
    closest,
  };
}

/** Point time from the budget: what is left after loads and the confirmation, spread over the planned points. */
function pointTime(o: TuneOptions, space: Space, loadMs: number, budgetMs: number): number {
  const planned =
    o.mode === 'quick'
      ? 1 + space.dimensions.reduce((n, d) => n + d.settings.length - 1, 0)
      : space.dimensions.reduce((n, d) => n * d.settings.length, 1);
  const perCandidate = (0.75 * budgetMs) / planned - loadMs;
  return Math.max(250, Math.min(10_000, perCandidate / Math.max(1, o.concurrency.length || 3)));
}

/** The load generator's ceiling: the better of two runs against the health endpoint (one run can hit a stall). */
async function loadgenCeiling(url: string, concurrency: number, maxMs: number, warmupMs: number, signal?: AbortSignal) {
  const run = (): Promise<PointResult> => measureCeiling({ url, concurrency, warmupMs, maxMs, signal });
  const a = await run();
  const b = await run();
  return a.throughput >= b.throughput ? a : b;
}

/** Runs the whole tune; the target is closed before this returns or throws. */
// Long: the run in order, each step one call; the finally is the one cleanup.
export async function runTune(o: TuneOptions): Promise<TuneOutcome> {
  const started = Date.now();
  const budgetMs = o.timeBudgetS * 1000;
  const { base, name } = await readBase(o.modelDir);
  const space = buildSpace(base, {
    cores: availableParallelism(),
    kinds: o.kinds,
    gpus: o.gpus,
    instanceCounts: o.instanceCounts,
  });
  const tag = `${name}__tune_${process.pid}`;
  const gpu = await gpuSampler(o, base);
  const target = await openTarget(o.modelDir, o.url, o.startScratch).catch(async (err: unknown) => {
    await gpu.sampler?.close();
    throw err;
  });
  try {
    const probe = `${tag}_default`;
    const loadStart = Date.now();
    await target.load(probe, base, o.signal);
    const loadMs = Date.now() - loadStart;
    const requests: TuneRequest[] = await prepareRequests(target, probe, base, o);
    const pointMs = o.measurementMs ?? pointTime(o, space, loadMs, budgetMs - (Date.now() - started));
    const warmupMs = Math.min(500, Math.round(pointMs * 0.2));
    const ceiling = await loadgenCeiling(target.url, Math.max(1, ...o.concurrency), pointMs, warmupMs, o.signal);
    const reference = await collectAnswers(target.client, probe, requests.slice(0, 4), o.signal).catch((err) => {
      throw new InvalidArgError(
        `the default config fails on the ${o.inputData ? '--input-data' : 'generated'} requests: ${NereidError.from(err).message}; give the model's real inputs with --input-data (perf_analyzer's JSON) or --shape NAME:dims`,
        { cause: err },
      );
    });
    const state = await search({
      target,
      space,
      base,
      mode: o.mode,
      objective: o.objective,
      constraints: o.constraints,
      concurrency: o.concurrency,
      requests,
      tempName: (n) => `${tag}_${n}`,
      deadline: started + budgetMs * 0.8,
      pointMs,
      warmupMs,
      signal: o.signal,
      onPoint: (s) => o.progress?.(progressLine(s, o, started, budgetMs)),
      reference,
      gpu: gpu.sampler,
    });
    const report: TuneReport = {
      model: name,
      mode: o.mode,
      objective: o.objective,
      constraints: o.constraints,
      target: o.url ?? 'scratch server',
      machine: {
        host: hostname(),
        cores: availableParallelism(),
        cpu: cpus()[0]?.model ?? '',
        platform: process.platform,
      },
      startedAt: new Date(started).toISOString(),
      finishedAt: '',
      timeBudgetS: o.timeBudgetS,
      pointMs,
      ceiling,
      tolerance: toleranceText(),
      gpu: gpu.note,
      dimensions: space.dimensions.map((d) => ({ name: d.name, settings: d.settings.map((s) => s.label) })),
      candidates: state.results,
      unexplored: state.unexplored,
      interrupted: o.signal?.aborted === true,
    };
    const config = await choose(report, state, {
      target,
      probe,
      tag,
      requests,
      pointMs,
      warmupMs,
      deadline: started + budgetMs,
      o,
      gpu: gpu.sampler,
    });
    report.finishedAt = new Date().toISOString();
    return { report, config, base };
  } finally {
    await target.close();
    await gpu.sampler?.close();
  }
}

/** NVML when the candidates run on GPUs; a GPU memory budget without it is refused before anything runs. */
async function gpuSampler(o: TuneOptions, base: ModelConfig): Promise<{ sampler?: GpuSampler; note: string }> {
  const onGpu = o.kinds?.includes('KIND_GPU') ?? base.instance_group?.some((g) => g.kind === 'KIND_GPU') ?? false;
  if (!onGpu) {
    if (o.constraints.maxGpuMemoryMb !== undefined) {
      throw new InvalidArgError('--max-gpu-memory-mb needs GPU candidates (--kind gpu or KIND_GPU in the config)');
    }
    return { note: 'not sampled (CPU candidates)' };
  }
  const s = await openGpuSampler(o.gpus);
  if ('start' in s) return { sampler: s, note: `sampled with NVML every 100 ms on GPU ${o.gpus?.join(',') ?? 'all'}` };
  if (o.constraints.maxGpuMemoryMb !== undefined) {
    throw new InvalidArgError(`--max-gpu-memory-mb needs GPU memory readings, and NVML is not usable: ${s.reason}`);
  }
  return { note: `not sampled: ${s.reason}` };
}

interface ChooseContext {
  target: TuneTarget;
  probe: string;
  tag: string;
  requests: TuneRequest[];
  pointMs: number;
  warmupMs: number;
  /** The end of the time budget. */
  deadline: number;
  o: TuneOptions;
  gpu?: GpuSampler;
}

/** The written config: the winner if the confirmation keeps it, else the default; none when none met the constraints. */
async function choose(report: TuneReport, state: SearchState, x: ChooseContext): Promise<ModelConfig | undefined> {
  const best = bestOf(state.results, x.o.objective);
  const def = state.results[0];
  if (best === undefined) {
    // Interrupted before anything was measured: nothing to say about the constraints.
    if (state.results.length > 0) report.noneMet = noneMet(state, x.o.constraints);
    return undefined;
  }
  if (best === def || x.o.signal?.aborted) {
    const why = best === def ? 'the default config measured best' : 'the tune was interrupted: best so far';
    report.written = { label: best.label, reason: why, point: best.best };
    return best.config;
  }
  const bestName = `${x.tag}_best`;
  await x.target.load(bestName, best.config, x.o.signal);
  const c = await confirm(def, best, {
    target: x.target,
    objective: x.o.objective,
    defaultName: x.probe,
    bestName,
    requests: x.requests,
    rounds: 3,
    // What the budget has left, shared by the six points (never under 200 ms: a shorter point measures nothing).
    pointMs: Math.max(200, Math.min(x.pointMs, (x.deadline - Date.now()) / 6 - x.warmupMs)),
    warmupMs: x.warmupMs,
    gpu: x.gpu,
    signal: x.o.signal,
  });
  await x.target.unload(bestName);
  report.confirmation = c;
  // A default that misses the constraints cannot be kept, however it compares.
  const keep = keepsWinner(c) || def.best === undefined;
  const chosen = keep ? best : def;
  report.written = {
    label: chosen.label,
    reason: keep
      ? `best in the search; ${c.ratio.toFixed(2)}× the default's ${x.o.objective} in the confirmation`
      : `the winner (${best.label}) reached only ${c.ratio.toFixed(2)}× the default in the confirmation: the default is kept`,
    point: chosen.best,
  };
  return chosen.config;
}

function progressLine(s: SearchState, o: TuneOptions, started: number, budgetMs: number): string {
  const best = bestOf(s.results, o.objective);
  const left = Math.max(0, Math.round((started + budgetMs - Date.now()) / 1000));
  const score = best?.best
    ? o.objective === 'throughput'
      ? `${best.best.throughput.toFixed(1)} infer/s`
      : `p99 ${best.best.p99Ms.toFixed(2)} ms`
    : 'none yet';
  return `tune: ${s.results.length} configs, ${s.pointsDone} points · best ${score} (${best?.label ?? '–'}) · ${left}s left`;
}
