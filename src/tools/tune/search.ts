/**
 * The search: every candidate is loaded under a temporary name, its answers checked against the default config's,
 * measured at each concurrency, and unloaded. Quick mode is a coordinate search (walk the dimensions in order, try
 * each setting of one with the others at the best so far, keep the best); exhaustive mode measures every
 * combination. Both start with the default config and stop at the time budget, listing what they did not reach.
 */
import type { ModelConfig } from '../../config/model-config.js';
import { NereidError } from '../../core/errors.js';
import { collectAnswers, compareAnswers, type Answers } from './compare.js';
import type { GpuSampler } from './gpu.js';
import type { TuneRequest } from './inputs.js';
import { measurePoint, prepareInfer, type PointResult } from './measure.js';
import {
  allChoices,
  alongDimension,
  choiceKey,
  configOf,
  defaultChoice,
  describeChoice,
  type Choice,
  type Space,
} from './space.js';
import type { TuneTarget } from './target.js';

export type Objective = 'throughput' | 'latency';

export interface Constraints {
  latencyBudgetMs?: number;
  minThroughput?: number;
  /** Peak GPU memory used, MiB (needs NVML). */
  maxGpuMemoryMb?: number;
}

export interface CandidateResult {
  key: string;
  label: string;
  choice: Choice;
  config: ModelConfig;
  points: PointResult[];
  /** The point the objective picks among those meeting the constraints. */
  best?: PointResult;
  /** Why the candidate was not measured: its answers differ, or it failed to load or serve. */
  refused?: string;
  failed?: string;
}

export interface SearchOptions {
  target: TuneTarget;
  space: Space;
  base: ModelConfig;
  mode: 'quick' | 'exhaustive';
  objective: Objective;
  constraints: Constraints;
  /** Concurrencies to measure; empty: a sweep 1, 2, 4 … until throughput stops growing. */
  concurrency: number[];
  requests: TuneRequest[];
  tempName: (n: number) => string;
  deadline: number;
  pointMs: number;
  warmupMs: number;
  signal?: AbortSignal;
  onPoint?: (state: SearchState) => void;
  /** The default config's answers to the first requests: every candidate must give the same. */
  reference: Answers;
  gpu?: GpuSampler;
}

export interface SearchState {
  results: CandidateResult[];
  /** Candidates the search meant to measure and did not reach before the budget ran out. */
  unexplored: string[];
  pointsDone: number;
}

export function meets(p: PointResult, c: Constraints): boolean {
  if (p.errors > 0 || p.requests === 0) return false;
  if (c.latencyBudgetMs !== undefined && p.p99Ms > c.latencyBudgetMs) return false;
  if (c.maxGpuMemoryMb !== undefined && (p.gpuMemMiB ?? Infinity) > c.maxGpuMemoryMb) return false;
  return c.minThroughput === undefined || p.throughput >= c.minThroughput;
}

/** How far a point is from meeting the constraints (0 when it meets them): relative excess, summed. */
export function violation(p: PointResult, c: Constraints): number {
  if (p.requests === 0) return Infinity;
  const lat = c.latencyBudgetMs === undefined ? 0 : Math.max(0, p.p99Ms / c.latencyBudgetMs - 1);
  const thr = c.minThroughput === undefined ? 0 : Math.max(0, 1 - p.throughput / c.minThroughput);
  const mem =
    c.maxGpuMemoryMb === undefined || p.gpuMemMiB === undefined ? 0 : Math.max(0, p.gpuMemMiB / c.maxGpuMemoryMb - 1);
  return lat + thr + mem + (p.errors > 0 ? 1 : 0);
}

/** True when `a` is better than `b` for the objective. */
export function better(a: PointResult, b: PointResult | undefined, objective: Objective): boolean {
  if (b === undefined) return true;
  return objective === 'throughput' ? a.throughput > b.throughput : a.p99Ms < b.p99Ms;
}

function pickBest(points: readonly PointResult[], o: SearchOptions): PointResult | undefined {
  let best: PointResult | undefined;
  for (const p of points) if (meets(p, o.constraints) && better(p, best, o.objective)) best = p;
  return best;
}

/** The concurrencies of one candidate: the list given, or the sweep (doubling while throughput grows ≥ 5%). */
async function measureCandidate(name: string, o: SearchOptions, state: SearchState): Promise<PointResult[]> {
  const prepared = prepareInfer(name, o.requests);
  const points: PointResult[] = [];
  const sweep = o.concurrency.length === 0;
  const list = sweep ? [1, 2, 4, 8, 16, 32, 64] : o.concurrency;
  for (const concurrency of list) {
    if (o.signal?.aborted) break;
    if (points.length > 0 && Date.now() >= o.deadline) break;
    const p = await measurePoint(prepared, {
      url: o.target.url,
      concurrency,
      warmupMs: o.warmupMs,
      maxMs: o.pointMs,
      gpu: o.gpu,
      signal: o.signal,
    });
    points.push(p);
    state.pointsDone++;
    if (p.errors > 0) break;
    const prev = points.at(-2);
    if (sweep && prev !== undefined && p.throughput < prev.throughput * 1.05) break;
  }
  return points;
}

/** Loads, checks and measures one candidate; a failure is recorded, not thrown (the search goes on). */
async function evaluate(choice: Choice, n: number, o: SearchOptions, state: SearchState): Promise<void> {
  const config = configOf(o.space, o.base, choice);
  const result: CandidateResult = {
    key: choiceKey(choice),
    label: describeChoice(o.space, choice),
    choice,
    config,
    points: [],
  };
  const name = o.tempName(n);
  try {
    await o.target.load(name, config, o.signal);
    const answers = await collectAnswers(o.target.client, name, o.requests.slice(0, 4), o.signal);
    const diff = compareAnswers(o.reference, answers);
    if (diff !== undefined) result.refused = `answers differ from the default config's (${diff})`;
    if (result.refused === undefined) {
      result.points = await measureCandidate(name, o, state);
      result.best = pickBest(result.points, o);
      const bad = result.points.find((p) => p.errors > 0);
      if (bad) result.failed = `${bad.errors} failed requests at concurrency ${bad.concurrency}: ${bad.firstError}`;
    }
  } catch (err) {
    // Interrupted mid-candidate: not a result, just not explored (the report keeps what was measured before).
    if (o.signal?.aborted) {
      state.unexplored.push(result.label);
      return;
    }
    // The default config must load: without it there is nothing to compare against.
    if (n === 0) throw err;
    result.failed = NereidError.from(err).message;
  } finally {
    await o.target.unload(name);
  }
  // A point cut short by the interrupt is not a measurement either.
  if (o.signal?.aborted) {
    state.unexplored.push(result.label);
    return;
  }
  state.results.push(result);
  o.onPoint?.(state);
}

/** The best measured candidate so far. */
export function bestOf(results: readonly CandidateResult[], objective: Objective): CandidateResult | undefined {
  let best: CandidateResult | undefined;
  for (const r of results) if (r.best && better(r.best, best?.best, objective)) best = r;
  return best;
}

/** Runs the search until done, the deadline, or the signal. */
export async function search(o: SearchOptions): Promise<SearchState> {
  const state: SearchState = { results: [], unexplored: [], pointsDone: 0 };
  const seen = new Set<string>();
  let n = 0;
  const run = async (choice: Choice): Promise<void> => {
    // Two choices can spell one config (`1×CPU` where the config has one CPU instance): measured once.
    const key = JSON.stringify(configOf(o.space, o.base, choice));
    if (seen.has(key)) return;
    seen.add(key);
    if (o.signal?.aborted || (n > 0 && Date.now() >= o.deadline)) {
      state.unexplored.push(describeChoice(o.space, choice));
      return;
    }
    await evaluate(choice, n++, o, state);
  };
  await run(defaultChoice(o.space));
  if (o.mode === 'exhaustive') {
    for (const choice of allChoices(o.space)) await run(choice);
    return state;
  }
  let current: Choice = defaultChoice(o.space);
  for (let dim = 0; dim < o.space.dimensions.length; dim++) {
    for (const choice of alongDimension(o.space, current, dim)) await run(choice);
    const along = state.results.filter((r) => r.choice.every((v, j) => j === dim || v === current[j]));
    current = bestOf(along, o.objective)?.choice ?? current;
  }
  return state;
}
