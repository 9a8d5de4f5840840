/**
 * What the TensorRT engine recorded about each batch of a benchmark row (NEREID_TRT_TRACE, the engine's own trace:
 * python/nereid_python/engines/tensorrt/trace.py), summed up as mean microseconds per batch: waiting for the
 * device lock, setting shapes and queueing the copies in, enqueueing the run, queueing the copies out, waiting for
 * the GPU, and the time between one batch's end and the next batch's start on the same instance (the request's
 * trip from the caller to the engine and back, and the runner's work around execute). Where a row loses to bare
 * TensorRT, this says which of those it is.
 *
 * On only with NEREID_BENCH_TRACE=FILE (set before the engine process starts: it inherits the variable).
 */
import { closeSync, openSync, readSync, statSync } from 'node:fs';

interface Batch {
  instance: string;
  tw: number;
  t0: number;
  t1: number;
  rows: number;
  out_copies?: number;
  copies?: Record<string, number>;
  phases?: { in: number; run: number; out: number; done: number };
}

const FILE = process.env.NEREID_BENCH_TRACE;
/** The engine processes' trace file (NEREID_BENCH_TRACE), where tracing is on. */
export const TRACE_FILE = FILE;
if (FILE) {
  process.env.NEREID_TRT_TRACE = FILE;
  process.env.NEREID_HOP_TRACE = FILE;
}

function readFrom(offset: number): string {
  const size = statSync(FILE!, { throwIfNoEntry: false })?.size ?? 0;
  if (size <= offset) return '';
  const buf = Buffer.alloc(size - offset);
  const fd = openSync(FILE!, 'r');
  try {
    readSync(fd, buf, 0, buf.length, offset);
  } finally {
    closeSync(fd);
  }
  return buf.toString('utf8');
}

function mean(xs: number[]): number {
  return xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length;
}

/** Mean µs per batch of each phase, over the batches recorded since the last `mark`. */
function summarize(batches: Batch[]): Record<string, number> {
  const us = (ns: number) => ns / 1e3;
  const withPhases = batches.filter((b) => b.phases);
  const between: number[] = [];
  const last = new Map<string, Batch>();
  for (const b of batches) {
    const prev = last.get(b.instance);
    if (prev) between.push(us(b.tw - prev.t1));
    last.set(b.instance, b);
  }
  return {
    batches: batches.length,
    rows: mean(batches.map((b) => b.rows)),
    lock_wait: mean(batches.map((b) => us(b.t0 - b.tw))),
    copy_in: mean(withPhases.map((b) => us(b.phases!.in - b.t0))),
    enqueue: mean(withPhases.map((b) => us(b.phases!.run - b.phases!.in))),
    copy_out: mean(withPhases.map((b) => us(b.phases!.out - b.phases!.run))),
    gpu_wait: mean(withPhases.map((b) => us(b.phases!.done - b.phases!.out))),
    inside: mean(batches.map((b) => us(b.t1 - b.tw))),
    between: mean(between),
    copies_in: mean(batches.map((b) => Object.values(b.copies ?? {}).reduce((a, c) => a + c, 0))),
    copies_out: mean(batches.map((b) => b.out_copies ?? 0)),
  };
}

export function enginePhases(): { mark(): void; take(): Record<string, number> | undefined } {
  let offset = 0;
  return {
    mark() {
      if (FILE) offset = statSync(FILE, { throwIfNoEntry: false })?.size ?? 0;
    },
    take() {
      if (!FILE) return undefined;
      const batches = readFrom(offset)
        .split('\n')
        .filter((l) => l.includes('"event":"batch"'))
        .map((l) => JSON.parse(l) as Batch);
      return batches.length > 0 ? summarize(batches) : undefined;
    },
  };
}
