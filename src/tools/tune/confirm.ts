/**
 * The confirmation round: the search's winner and the default config, both loaded, measured in turn (default,
 * best, default, best …) at the concurrency each was best at, so machine drift hits both alike. The winner is
 * written only if it is at least as good as the default here; otherwise the default is kept, and the report says so.
 */
import { measurePoint, prepareInfer, type PointResult } from './measure.js';
import type { GpuSampler } from './gpu.js';
import type { CandidateResult, Objective } from './search.js';
import type { TuneTarget } from './target.js';

export interface Confirmation {
  rounds: number;
  concurrency: { default: number; best: number };
  default: { throughput: number; p99Ms: number; p50Ms: number };
  best: { throughput: number; p99Ms: number; p50Ms: number };
  /** Objective of the best over the default's (throughput ratio; for latency the default's p99 over the best's). */
  ratio: number;
}

export interface ConfirmOptions {
  target: TuneTarget;
  objective: Objective;
  defaultName: string;
  bestName: string;
  requests: Parameters<typeof prepareInfer>[1];
  rounds: number;
  pointMs: number;
  warmupMs: number;
  gpu?: GpuSampler;
  signal?: AbortSignal;
}

const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);

function summary(points: readonly PointResult[]): Confirmation['default'] {
  return {
    throughput: mean(points.map((p) => p.throughput)),
    p99Ms: mean(points.map((p) => p.p99Ms)),
    p50Ms: mean(points.map((p) => p.p50Ms)),
  };
}

/** Re-measures `best` against `def` (the default candidate); `best` must already be loaded as `o.bestName`. */
export async function confirm(def: CandidateResult, best: CandidateResult, o: ConfirmOptions): Promise<Confirmation> {
  const bestC = best.best?.concurrency ?? 1;
  const defC = def.best?.concurrency ?? bestC;
  const run = (name: string, concurrency: number): Promise<PointResult> =>
    measurePoint(prepareInfer(name, o.requests), {
      url: o.target.url,
      concurrency,
      warmupMs: o.warmupMs,
      maxMs: o.pointMs,
      gpu: o.gpu,
      signal: o.signal,
    });
  const d: PointResult[] = [];
  const b: PointResult[] = [];
  for (let i = 0; i < o.rounds && !o.signal?.aborted; i++) {
    d.push(await run(o.defaultName, defC));
    b.push(await run(o.bestName, bestC));
  }
  const ds = summary(d);
  const bs = summary(b);
  const ratio =
    o.objective === 'throughput' ? bs.throughput / Math.max(ds.throughput, 1e-9) : ds.p99Ms / Math.max(bs.p99Ms, 1e-9);
  return { rounds: d.length, concurrency: { default: defC, best: bestC }, default: ds, best: bs, ratio };
}

/** Whether a confirmation keeps the winner (ties go to the winner: it was better in the search). */
export function keepsWinner(c: Confirmation): boolean {
  return c.ratio >= 1;
}
