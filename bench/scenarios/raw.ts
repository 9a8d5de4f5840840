/**
 * S1, the limit: raw onnxruntime-node in this process, no server. One session with default options — the same
 * thread budget as Nereid's single instance and the fastify peer — driven by `concurrency` closed loops.
 */
import * as ort from 'onnxruntime-node';
import { percentile } from '../common.js';
import type { ModelSpec } from '../models.js';
import type { LoadResult } from '../perf-analyzer.js';

export interface RawSession {
  run(concurrency: number, batch: number, warmupMs: number, durationMs: number): Promise<LoadResult>;
  release(): Promise<void>;
}

function feeds(spec: ModelSpec, batch: number): Record<string, ort.Tensor> {
  const out: Record<string, ort.Tensor> = {};
  for (const input of spec.inputs) {
    const data = new Int32Array(input.values.length * batch);
    for (let b = 0; b < batch; b++) data.set(input.values, b * input.values.length);
    out[input.name] = new ort.Tensor('int32', data, [batch, ...spec.sampleDims]);
  }
  return out;
}

export async function openRaw(spec: ModelSpec): Promise<RawSession> {
  const session = await ort.InferenceSession.create(spec.onnxFile);
  return {
    /** Throughput counts samples (requests × batch); latencies are per run() call. */
    async run(concurrency, batch, warmupMs, durationMs) {
      const input = feeds(spec, batch);
      const latencies: number[] = [];
      const start = performance.now();
      const measureFrom = start + warmupMs;
      const end = measureFrom + durationMs;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (performance.now() < end) {
            const t = performance.now();
            await session.run(input);
            if (t >= measureFrom) latencies.push((performance.now() - t) * 1000);
          }
        }),
      );
      latencies.sort((a, b) => a - b);
      return {
        throughput: (latencies.length * batch) / (durationMs / 1000),
        p50_us: percentile(latencies, 50),
        p99_us: percentile(latencies, 99),
      };
    },
    release: () => session.release(),
  };
}
