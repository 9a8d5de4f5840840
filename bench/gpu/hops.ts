/**
 * Where one request's time goes at concurrency 1, across the three processes it visits: the server (Triton's trace:
 * REQUEST_START, QUEUE_START, COMPUTE_START — its batch's start —, REQUEST_END), the engine process's stub
 * (python/nereid_python/hops.py: when its channel read the batch, when the instance's thread began it, when the
 * answer was sent) and the TensorRT engine (its batch record: tw..t1). All three are CLOCK_MONOTONIC, so a request's
 * records line up by time: at concurrency 1 exactly one batch runs between a request's COMPUTE_START and its
 * REQUEST_END. The medians of each hop say which one a c=1 request loses to bare TensorRT in.
 *
 * On with NEREID_BENCH_TRACE=FILE (bench/gpu/tensorrt-phases.ts): the stub and the engine write to FILE, the server
 * to FILE.triton.json, traced only while the c=1 point runs (the trace extension's settings, switched at run time).
 */
import { readFileSync } from 'node:fs';

interface Request {
  start: number;
  queued: number;
  compute: number;
  end: number;
}
interface Hop {
  rx: number;
  t0: number;
  sent: number;
}
interface Batch {
  tw: number;
  t1: number;
}

/** The hops, median µs each, and how many requests lined up. */
export interface Hops {
  requests: number;
  parse: number;
  schedule: number;
  to_engine: number;
  to_thread: number;
  before_run: number;
  engine: number;
  after_run: number;
  back: number;
  server_total: number;
}

export const HOP_NAMES: (keyof Hops)[] = [
  'parse',
  'schedule',
  'to_engine',
  'to_thread',
  'before_run',
  'engine',
  'after_run',
  'back',
  'server_total',
];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : s[Math.floor(s.length / 2)];
}

/** Triton's trace records written so far (the file's array is closed only at shutdown). */
function requests(file: string): Request[] {
  const out: Request[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const text = line.replace(/,$/, '');
    if (!text.startsWith('{') || !text.includes('"timestamps"')) continue;
    const t = (JSON.parse(text) as { timestamps: { name: string; ns: number }[] }).timestamps;
    const at = (name: string): number => (t.find((x) => x.name === name)?.ns ?? NaN) / 1e3;
    out.push({
      start: at('REQUEST_START'),
      queued: at('QUEUE_START'),
      compute: at('COMPUTE_START'),
      end: at('REQUEST_END'),
    });
  }
  return out.filter((r) => Number.isFinite(r.compute)).sort((a, b) => a.start - b.start);
}

function events<T>(file: string, event: string, pick: (o: Record<string, number>) => T): T[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.includes(`"event":"${event}"`))
    .map((l) => pick(JSON.parse(l) as Record<string, number>));
}

/** The c=1 hops of the requests traced in `tritonFile` that started after `since` (µs, CLOCK_MONOTONIC). */
export function hops(tritonFile: string, engineFile: string, since: number): Hops | undefined {
  const us = (ns: number): number => ns / 1e3;
  const reqs = requests(tritonFile).filter((r) => r.start >= since);
  const hopRecords = events(engineFile, 'hop', (o) => ({ rx: us(o.rx), t0: us(o.t0), sent: us(o.sent) })).filter((h) =>
    Number.isFinite(h.rx),
  );
  const batches = events(engineFile, 'batch', (o) => ({ tw: us(o.tw), t1: us(o.t1) }));
  const rows: Record<keyof Hops, number>[] = [];
  for (const r of reqs) {
    const h = hopRecords.find((x: Hop) => x.rx >= r.compute && x.sent <= r.end);
    if (h === undefined) continue;
    const b = batches.find((x: Batch) => x.tw >= h.t0 && x.t1 <= h.sent);
    if (b === undefined) continue;
    rows.push({
      requests: 1,
      parse: r.queued - r.start,
      schedule: r.compute - r.queued,
      to_engine: h.rx - r.compute,
      to_thread: h.t0 - h.rx,
      before_run: b.tw - h.t0,
      engine: b.t1 - b.tw,
      after_run: h.sent - b.t1,
      back: r.end - h.sent,
      server_total: r.end - r.start,
    });
  }
  if (rows.length === 0) return undefined;
  const out = { requests: rows.length } as Hops;
  for (const k of HOP_NAMES) out[k] = median(rows.map((x) => x[k]));
  return out;
}
