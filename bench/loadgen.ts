/**
 * A closed-loop HTTP load generator (KServe v2 JSON, keep-alive): used where perf_analyzer cannot drive the
 * server — MLServer has no /v2/models/<m>/config, which perf_analyzer reads before it starts — and, for a
 * like-for-like row, against Nereid as well.
 */
import http from 'node:http';
import { percentile } from './common.js';
import { jsonRequest, type ModelSpec } from './models.js';
import type { LoadResult } from './perf-analyzer.js';

export interface LoadgenRun {
  model: ModelSpec;
  /** host:port */
  url: string;
  concurrency: number;
  warmupMs: number;
  durationMs: number;
}

export async function runLoadgen(run: LoadgenRun): Promise<LoadResult> {
  const [host, port] = run.url.split(':');
  const body = Buffer.from(jsonRequest(run.model));
  const agent = new http.Agent({ keepAlive: true, maxSockets: run.concurrency });
  const once = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const req = http.request(
        {
          host,
          port: Number(port),
          path: `/v2/models/${run.model.name}/infer`,
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', 'content-length': body.length },
        },
        (res) => {
          res.resume();
          res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  const latencies: number[] = [];
  const start = performance.now();
  const measureFrom = start + run.warmupMs;
  const end = measureFrom + run.durationMs;
  try {
    await Promise.all(
      Array.from({ length: run.concurrency }, async () => {
        while (performance.now() < end) {
          const t = performance.now();
          await once();
          if (t >= measureFrom) latencies.push((performance.now() - t) * 1000);
        }
      }),
    );
  } finally {
    agent.destroy();
  }
  latencies.sort((a, b) => a - b);
  return {
    throughput: latencies.length / (run.durationMs / 1000),
    p50_us: percentile(latencies, 50),
    p99_us: percentile(latencies, 99),
  };
}
