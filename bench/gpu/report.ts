/** The GPU benchmark's report (bench/gpu.ts): its rows against the onnxruntime baseline, the goals of issues 11 and 31. */
import { best, fmt, nvidiaSmi } from './table.js';
import type { GpuModel } from './models.js';

export interface GpuRow {
  what: string;
  model: string;
  concurrency?: number;
  batch?: number;
  seq_s: number;
  p50_us: number;
  p99_us: number;
  /** Average rows per execution (Nereid: dynamic batching), from the model's statistics. */
  avg_batch?: number;
  /**
   * Where a request's time went inside the server (the model's statistics over the point, µs per request): queue,
   * compute input/infer/output. Triton counts a batch's compute time for each of its requests, so `infer` is the
   * Run time of the batch a request ran in.
   */
  split?: { queue: number; input: number; infer: number; output: number };
  errors?: number;
}

export interface ReportRun {
  rows: GpuRow[];
  models: GpuModel[];
  skipped: string[];
  ceiling: GpuRow[];
  /** How the run was made: points, warm-up, server arguments. */
  setup: string;
}

/** The onnxruntime baseline's rows for model `m` (several configs share one baseline). */
function ortRows(rows: readonly GpuRow[], m: GpuModel): GpuRow[] {
  return rows.filter((r) => r.what === 'ort' && r.model === m.baseline);
}

/** How a server row ran when not by default, as its label's last parenthesis (` (thread, …)`), else ''. */
function variant(r: GpuRow): string {
  return r.what.endsWith(')') ? r.what.slice(r.what.lastIndexOf(' (')) : '';
}

/** The batch size a server row's dynamic batcher formed, rounded (1 at least). */
export function formedBatch(r: GpuRow): number {
  return Math.max(1, Math.round(r.avg_batch ?? 1));
}

/** The report: Nereid rows against the onnxruntime baseline at its best batch, absolute numbers beside ratios. */
export function report(run: ReportRun): string {
  const { rows, models: MODELS, skipped, ceiling } = run;
  const out: string[] = [];
  const gpu = nvidiaSmi();
  out.push(`# GPU benchmark (${new Date().toISOString()})`, '', `${gpu}; Node ${process.version}; ${run.setup}.`, '');
  out.push('## Baselines (batch sweep, in-process, one run at a time)', '');
  out.push('| baseline | model | batch | seq/s | p50 µs | p99 µs |', '|---|---|---:|---:|---:|---:|');
  for (const r of rows.filter((r) => r.batch !== undefined)) {
    out.push(`| ${r.what} | ${r.model} | ${r.batch} | ${fmt(r.seq_s)} | ${fmt(r.p50_us)} | ${fmt(r.p99_us)} |`);
  }
  out.push('', '## Nereid (HTTP binary, requests of batch 1, dynamic batching, KIND_GPU)', '');
  out.push(
    '| model | instances | c | seq/s | p50 µs | p99 µs | avg batch | µs/request: queue · input · infer · output | onnxruntime at the batch formed | ratio | onnxruntime best (batch) | ratio | torch fp16 graph best | ratio | c=1 p50 − ort batch-1 p50 |',
    '|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|',
  );
  const torchBest = best(rows.filter((r) => r.what.startsWith('torch')));
  for (const m of MODELS) {
    const base = ortRows(rows, m);
    const b = best(base);
    const b1 = base.find((r) => r.batch === 1);
    for (const r of rows.filter((x) => x.model === m.name && x.concurrency !== undefined)) {
      const torch = m.name.startsWith('bert') && torchBest !== undefined;
      const at = base.find((x) => r.avg_batch !== undefined && x.batch === formedBatch(r));
      const sp = r.split
        ? [r.split.queue, r.split.input, r.split.infer, r.split.output].map((x) => fmt(x)).join(' · ')
        : '';
      out.push(
        `| ${m.name}${variant(r)} | ${m.count} | ${r.concurrency} | ${fmt(r.seq_s)} | ${fmt(r.p50_us)} | ${fmt(r.p99_us)} | ${fmt(r.avg_batch, 1)} | ${sp} | ` +
          `${at ? `${fmt(at.seq_s)} (${at.batch})` : '–'} | ${at ? fmt(r.seq_s / at.seq_s, 2) : '–'} | ` +
          `${b ? `${fmt(b.seq_s)} (${b.batch})` : '–'} | ${b ? fmt(r.seq_s / b.seq_s, 2) : '–'} | ` +
          `${torch ? `${fmt(torchBest.seq_s)} (${torchBest.batch})` : '–'} | ${torch ? fmt(r.seq_s / torchBest.seq_s, 2) : '–'} | ` +
          `${r.concurrency === 1 && b1 ? `${fmt(r.p50_us - b1.p50_us)} µs` : ''} |`,
      );
    }
  }
  out.push(
    '',
    '## Goals (issue 11): ≥ 0.90 of the onnxruntime baseline at its best batch; c=1 p50 ≤ baseline batch-1 p50 + 100 µs',
    '',
  );
  for (const m of MODELS) {
    const base = ortRows(rows, m);
    const b = best(base);
    const b1 = base.find((r) => r.batch === 1);
    const mine = rows.filter((r) => r.model === m.name && r.concurrency !== undefined);
    const top = best(mine);
    const c1 = mine.find((r) => r.concurrency === 1);
    if (!b || !top) continue;
    const ratio = top.seq_s / b.seq_s;
    out.push(
      `- ${m.name}: best ${fmt(top.seq_s)} seq/s (c=${top.concurrency}) vs ${fmt(b.seq_s)} (batch ${b.batch}) = ${fmt(ratio, 2)} ${ratio >= 0.9 ? 'MET' : 'NOT MET'}` +
        (c1 && b1
          ? `; c=1 p50 ${fmt(c1.p50_us)} µs vs ${fmt(b1.p50_us)} + 100 → ${c1.p50_us <= b1.p50_us + 100 ? 'MET' : 'NOT MET'}`
          : ''),
    );
  }
  out.push(
    '',
    '## Goals (issue 31): c=64 ≥ 0.95 (pooled) / 0.90 (hidden states) of onnxruntime at the batch formed; c=128 the same of its best',
    '',
  );
  for (const m of MODELS) {
    const base = ortRows(rows, m);
    const goal = m.pooled === true ? 0.95 : 0.9;
    const b = best(base);
    for (const r of rows.filter((x) => x.model === m.name && (x.concurrency === 64 || x.concurrency === 128))) {
      const formed = formedBatch(r);
      const ref = r.concurrency === 64 ? base.find((x) => x.batch === formed) : b;
      if (ref === undefined) continue;
      const ratio = r.seq_s / ref.seq_s;
      out.push(
        `- ${m.name}${variant(r)} c=${r.concurrency}: ${fmt(r.seq_s)} vs ${fmt(ref.seq_s)} (batch ${ref.batch}) = ${fmt(ratio, 2)} (goal ${goal}) ${ratio >= goal ? 'MET' : 'NOT MET'}`,
      );
    }
  }
  out.push('', '## Load generator ceiling (canned server, same process layout)', '');
  for (const r of ceiling)
    out.push(`- c=${r.concurrency}: ${fmt(r.seq_s)} req/s, p50 ${fmt(r.p50_us)} µs (${r.model})`);
  if (skipped.length > 0) out.push('', '## Skipped or failed', '', ...skipped.map((s) => `- ${s}`));
  return `${out.join('\n')}\n`;
}
