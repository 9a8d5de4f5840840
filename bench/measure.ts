/** One scenario row: a load run against a server, with the server-side readings taken around it. */
import { cpuSeconds, rssMiB } from './common.js';
import type { ModelName } from './models.js';
import type { LoadResult } from './perf-analyzer.js';
import type { BenchServer } from './servers/server.js';

export type Protocol = 'in-process' | 'http-json' | 'http-binary' | 'grpc';

export interface Row {
  /** e.g. "S3 nereid http-binary". */
  name: string;
  /** S1 … S6. */
  scenario: string;
  /** 'raw onnxruntime-node', 'nereid', 'nereid batching', 'fastify', 'triton', 'mlserver'. */
  server: string;
  model: ModelName;
  protocol: Protocol;
  concurrency: number;
  /** Samples per request (1 except the raw batch sweep). */
  batch: number;
  /** Who generated the load: perf_analyzer, the in-process loop, or bench/loadgen.ts. */
  tool: 'perf_analyzer' | 'in-process' | 'node-loadgen';
  /** Inferences (samples) per second. */
  throughput: number;
  p50_us: number;
  p99_us: number;
  /** throughput / S1 at the same model and concurrency. */
  ratio_to_raw: number;
  /** Server statistics: mean request duration minus mean compute_infer, µs (Nereid and Triton). */
  server_overhead_us?: number;
  /** Server process tree user+system CPU per request, µs. */
  cpu_us_per_request?: number;
  /** Server event-loop delay p99 during the run, ms (Node servers). */
  event_loop_p99_ms?: number;
  /** Server RSS after the run, MiB. */
  rss_mib?: number;
}

export type RowHead = Pick<Row, 'name' | 'scenario' | 'server' | 'model' | 'protocol' | 'concurrency' | 'tool'>;

/** Runs `load` against `server` and reads statistics, CPU, event-loop delay and RSS around it. */
export async function measureServer(server: BenchServer, head: RowHead, load: () => Promise<LoadResult>): Promise<Row> {
  const statsBefore = await server.stats(head.model);
  await server.lag?.(); // resets the histogram
  const cpuBefore = cpuSeconds(server.pid);
  const t0 = performance.now();
  const result = await load();
  const wallS = (performance.now() - t0) / 1000;
  const cpu = cpuSeconds(server.pid) - cpuBefore;
  const lag = await server.lag?.();
  const statsAfter = await server.stats(head.model);
  const row: Row = { ...head, batch: 1, ...result, ratio_to_raw: NaN, rss_mib: rssMiB(server.pid) };
  // Exact request count from the statistics when the server has them; otherwise throughput × wall time
  // (which slightly overstates CPU per request: the load generator's start-up is inside the wall time).
  let requests = result.throughput * wallS;
  if (statsBefore && statsAfter && statsAfter.count > statsBefore.count) {
    requests = statsAfter.count - statsBefore.count;
    const success = statsAfter.successNs - statsBefore.successNs;
    const infer = statsAfter.computeInferNs - statsBefore.computeInferNs;
    row.server_overhead_us = (success - infer) / requests / 1000;
  }
  row.cpu_us_per_request = requests > 0 ? (cpu * 1e6) / requests : undefined;
  if (lag) row.event_loop_p99_ms = lag.p99_ms;
  return row;
}
