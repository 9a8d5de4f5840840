/**
 * The TensorRT benchmark's report (bench/tensorrt.ts): every row in one table, then issue 23's goals as ratios of
 * rows of the same run.
 */
import { HOP_NAMES, type Hops } from './hops.js';
import { nvidiaSmi } from './table.js';

export interface Row {
  what: string;
  batch?: number;
  concurrency?: number;
  seq_s: number;
  p50_us: number;
  p99_us?: number;
  avg_batch?: number;
  split?: { queue: number; input: number; infer: number; output: number };
  errors?: number;
  /** What the engine recorded, mean µs per batch (bench/gpu/tensorrt-phases.ts), where traced. */
  engine?: Record<string, number>;
  /** A c=1 request's trip across the processes, median µs per hop (bench/gpu/hops.ts), where traced. */
  hops?: Hops;
}

function ratio(a: number | undefined, b: number | undefined): string {
  return a === undefined || b === undefined ? '–' : (a / b).toFixed(3);
}

/** The table of every row and the goals computed from them, as markdown. */
export function report(rows: Row[], plan: string, MS: number): string {
  const bareAt = (b: number): Row | undefined => rows.find((r) => r.what.startsWith('bare') && r.batch === b);
  const best = (xs: Row[]): Row | undefined =>
    xs.reduce<Row | undefined>((a, r) => (!a || r.seq_s > a.seq_s ? r : a), undefined);
  const bareBest = best(rows.filter((r) => r.what.startsWith('bare')));
  const d32 = best(rows.filter((r) => /\(outputs viewed(, CUDA graphs)?\)$/.test(r.what) && r.batch === 32));
  const d32x2 = best(rows.filter((r) => r.what.includes('2 instances') && r.batch === 32));
  const cannedAt = (c: number): Row | undefined =>
    rows.find((r) => r.what.startsWith('load generator') && r.concurrency === c);
  const canned = cannedAt(1);
  const servers = [...new Set(rows.filter((r) => r.what.startsWith('nereid')).map((r) => r.what))];
  const httpGoals = servers.flatMap((what) => {
    const at = (c: number) => rows.find((r) => r.what === what && r.concurrency === c);
    const [c1, c64, c128] = [at(1), at(64), at(128)];
    const formed = c64?.avg_batch !== undefined ? Math.max(1, Math.round(c64.avg_batch)) : undefined;
    return [
      `- ${what}:`,
      `  - c=64 / bare at the batch formed (${formed ?? '?'}): ${ratio(c64?.seq_s, formed !== undefined ? bareAt(formed)?.seq_s : undefined)} (goal ≥ 0.90; the load generator's ceiling there ${cannedAt(64)?.seq_s.toFixed(0) ?? '?'}/s)`,
      `  - c=128 / bare's best (batch ${bareBest?.batch}): ${ratio(c128?.seq_s, bareBest?.seq_s)} (goal ≥ 0.90; ceiling ${cannedAt(128)?.seq_s.toFixed(0) ?? '?'}/s)`,
      `  - c=1 p50 − bare batch-1 p50: ${c1 && bareAt(1) ? (c1.p50_us - bareAt(1)!.p50_us).toFixed(0) : '?'} µs; allowed: canned round trip ${canned?.p50_us.toFixed(0) ?? '?'} + 150 µs`,
    ];
  });
  const out = [
    `# TensorRT benchmark: ${plan} (${new Date().toISOString()})`,
    '',
    `${nvidiaSmi('name,driver_version')}; Node ${process.version}; ${MS} ms per point.`,
    '',
    '| what | batch / c | seq/s | p50 µs | p99 µs | avg batch | µs/request: queue · input · infer · output |',
    '|---|---:|---:|---:|---:|---:|---|',
    ...rows.map(
      (r) =>
        `| ${r.what} | ${r.batch ?? `c=${r.concurrency}`} | ${r.seq_s.toFixed(0)} | ${r.p50_us.toFixed(0)} | ${r.p99_us?.toFixed(0) ?? '–'} | ${r.avg_batch?.toFixed(1) ?? ''} | ${r.split ? [r.split.queue, r.split.input, r.split.infer, r.split.output].map((x) => x.toFixed(0)).join(' · ') : ''} |`,
    ),
    '',
    '## Goals',
    '',
    `- backend direct / bare at batch 32: ${ratio(d32?.seq_s, bareAt(32)?.seq_s)} one instance (${d32?.what.includes('graphs') ? 'CUDA graphs' : 'no graphs'}), ${ratio(d32x2?.seq_s, bareAt(32)?.seq_s)} two (${d32x2?.what.split(', ').slice(2).join(', ').replace(')', '') ?? '?'}) (goal ≥ 0.95)`,
    ...httpGoals,
    ...phasesTable(rows),
    ...hopsTable(rows),
  ];
  return `${out.join('\n')}\n`;
}

/** Where a traced row's time went inside the engine, per batch (empty without NEREID_BENCH_TRACE). */
function phasesTable(rows: Row[]): string[] {
  const traced = rows.filter((r) => r.engine);
  if (traced.length === 0) return [];
  const keys = Object.keys(traced[0]!.engine!);
  return [
    '',
    '## Inside the engine (NEREID_TRT_TRACE), mean µs per batch',
    '',
    `| what | batch / c | ${keys.join(' | ')} |`,
    `|---|---:|${keys.map(() => '---:').join('|')}|`,
    ...traced.map(
      (r) =>
        `| ${r.what} | ${r.batch ?? `c=${r.concurrency}`} | ${keys.map((k) => r.engine![k]!.toFixed(k === 'batches' ? 0 : 1)).join(' | ')} |`,
    ),
  ];
}

/** A c=1 request's trip, median µs per hop (empty without NEREID_BENCH_TRACE). */
function hopsTable(rows: Row[]): string[] {
  const traced = rows.filter((r) => r.hops);
  if (traced.length === 0) return [];
  return [
    '',
    "## A c=1 request's trip (server trace + stub + engine, CLOCK_MONOTONIC), median µs",
    '',
    'parse: REQUEST_START → QUEUE_START; schedule: → its batch starts; to_engine: → the stub read the batch;',
    "to_thread: → the instance's thread began it; before_run / engine / after_run: the engine's batch record and",
    'around it; back: the answer sent → REQUEST_END. The client p50 less server_total is the HTTP exchange.',
    '',
    `| what | requests | ${HOP_NAMES.join(' | ')} | client p50 |`,
    `|---|---:|${HOP_NAMES.map(() => '---:').join('|')}|---:|`,
    ...traced.map(
      (r) =>
        `| ${r.what} | ${r.hops!.requests} | ${HOP_NAMES.map((k) => r.hops![k].toFixed(0)).join(' | ')} | ${r.p50_us.toFixed(0)} |`,
    ),
  ];
}
