import type { ModelStats } from '../core/stats.js';
import type { ModelStatistics } from './api.js';

const copy = (d: { count: number; ns: number }): { count: number; ns: number } => ({ count: d.count, ns: d.ns });

/** A version's statistics in Triton's statistics-extension shape. */
export function toModelStatistics(name: string, version: number, s: ModelStats): ModelStatistics {
  return {
    name,
    version: String(version),
    last_inference: s.lastInference,
    inference_count: s.inferenceCount,
    execution_count: s.executionCount,
    inference_stats: {
      success: copy(s.success),
      fail: copy(s.fail),
      queue: copy(s.queue),
      compute_input: copy(s.computeInput),
      compute_infer: copy(s.computeInfer),
      compute_output: copy(s.computeOutput),
      // No response cache yet: Triton reports zeros when the cache is off.
      cache_hit: { count: 0, ns: 0 },
      cache_miss: { count: 0, ns: 0 },
    },
    response_stats: {},
    batch_stats: [...s.batches.values()]
      .sort((a, b) => a.batch_size - b.batch_size)
      .map((b) => ({
        batch_size: b.batch_size,
        compute_input: copy(b.compute_input),
        compute_infer: copy(b.compute_infer),
        compute_output: copy(b.compute_output),
      })),
    memory_usage: [],
  };
}
