/**
 * The A/B report of bench/ab.ts: its JSON shape and the Markdown table, kept apart from the measuring so a saved
 * ab.json can be rendered again (`abMarkdown(JSON.parse(…))`) without a new run.
 */
import { median } from './common.js';

export type Side = 'before' | 'after';

/** The bar: after/before ≥ 0.95 on every row. */
export const THRESHOLD = 0.95;

/** One perf_analyzer run against a fresh server of one build. */
export interface Sample {
  round: number;
  throughput: number;
  p50_us: number;
  p99_us: number;
  /** Server process CPU (user + system) per request: on a loaded 2-core box far steadier than req/s. */
  cpu_us_per_request?: number;
}

/** Medians over the rounds of one row. */
export interface Summary {
  before_rps: number;
  after_rps: number;
  ratio: number;
  before_p50_us: number;
  after_p50_us: number;
  rounds: { before: number; after: number };
}

export interface AbRow {
  /** `S3:simple:64`, what --only takes. */
  key: string;
  scenario: string;
  model: string;
  concurrency: number;
  first: Summary;
  recheck?: Summary;
  verdict: string;
  samples: Record<Side, Sample[]>;
  recheck_samples?: Record<Side, Sample[]>;
  errors: string[];
}

export interface AbReport {
  date: string;
  machine: string;
  duration: string;
  before: string;
  after: string;
  /** perf_analyzer settings, in words. */
  load: string;
  rounds: string;
  loadavg: string;
  rows: AbRow[];
}

export function summarize(samples: Record<Side, Sample[]>): Summary {
  const pick = (side: Side, f: (s: Sample) => number): number => median(samples[side].map(f));
  const before = pick('before', (s) => s.throughput);
  const after = pick('after', (s) => s.throughput);
  return {
    before_rps: before,
    after_rps: after,
    ratio: after / before,
    before_p50_us: pick('before', (s) => s.p50_us),
    after_p50_us: pick('after', (s) => s.p50_us),
    rounds: { before: samples.before.length, after: samples.after.length },
  };
}

export function verdict(first: Summary, recheck: Summary | undefined): string {
  if (Number.isNaN(first.ratio)) return 'NO DATA';
  if (first.ratio >= THRESHOLD) return 'ok';
  if (!recheck || Number.isNaN(recheck.ratio)) return 'BELOW (no recheck)';
  return recheck.ratio >= THRESHOLD ? 'ok on recheck (noise)' : 'REGRESSION (twice below)';
}

/** A verdict the done-means accepts. */
export const passes = (v: string): boolean => v === 'ok' || v.startsWith('ok on recheck');

const fmt = (n: number, digits = 0): string => (Number.isNaN(n) ? '–' : n.toFixed(digits));

/** Median server CPU µs per request over every run of one side, first measurement and recheck together. */
function cpu(row: AbRow, side: Side): number {
  const all = [...row.samples[side], ...(row.recheck_samples?.[side] ?? [])];
  return median(all.flatMap((s) => (s.cpu_us_per_request === undefined ? [] : [s.cpu_us_per_request])));
}

export function abMarkdown(report: AbReport): string {
  const lines = [
    `# Nereid A/B throughput (${report.date}, ${report.machine}, ${report.duration})`,
    '',
    `before: \`${report.before}\` · after: \`${report.after}\``,
    '',
    `HTTP binary tensors, perf_analyzer (${report.load}); S3 = dynamic batching off, S5 = on.`,
    `Each round starts a fresh server of each build, before then after; req/s and p50 are medians of ${report.rounds}`,
    `rounds. A row under ${THRESHOLD} is measured once more (same number of rounds) and both ratios are shown.`,
    'CPU is the server’s user + system CPU per request (median of every run of that side, recheck included).',
    '',
    '| scenario | model | c | before req/s | after req/s | after/before | p50 before µs | p50 after µs | recheck after/before | CPU µs/req before | CPU µs/req after | verdict |',
    '|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|',
  ];
  for (const r of report.rows) {
    const f = r.first;
    const recheck = r.recheck ? fmt(r.recheck.ratio, 3) : '–';
    lines.push(
      `| ${r.scenario} | ${r.model} | ${r.concurrency} | ${fmt(f.before_rps)} | ${fmt(f.after_rps)} | ${fmt(f.ratio, 3)} | ${fmt(f.before_p50_us)} | ${fmt(f.after_p50_us)} | ${recheck} | ${fmt(cpu(r, 'before'))} | ${fmt(cpu(r, 'after'))} | ${r.verdict} |`,
    );
  }
  lines.push('', 'Per-round req/s (before / after):', '');
  for (const r of report.rows) {
    const list = (s: Sample[]): string => s.map((x) => x.throughput.toFixed(0)).join(', ') || '–';
    let line = `- ${r.key}: ${list(r.samples.before)} / ${list(r.samples.after)}`;
    if (r.recheck_samples) line += `; recheck ${list(r.recheck_samples.before)} / ${list(r.recheck_samples.after)}`;
    lines.push(line);
  }
  const errors = report.rows.flatMap((r) => r.errors);
  if (errors.length) lines.push('', 'Errors:', '', ...errors.map((e) => `- ${e}`));
  lines.push('', `Load average at start / end: ${report.loadavg}.`, '');
  return lines.join('\n');
}
