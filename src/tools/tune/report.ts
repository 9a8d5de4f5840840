/**
 * What `nereid tune` prints and writes: the summary table (one row per config: its chosen point, or why it was not
 * measured), the Markdown report beside the chart, and the config.pbtxt with a comment block that says what was
 * measured, where and when.
 */
import { printModelConfig } from '../../config/index.js';
import type { ModelConfig } from '../../config/model-config.js';
import { NEREID_VERSION } from '../../core/version.js';
import { chartSvg, paretoFront, type ChartPoint } from './chart.js';
import type { PointResult } from './measure.js';
import type { CandidateResult } from './search.js';
import type { TuneReport } from './tune.js';

export interface Row {
  index: number;
  label: string;
  point?: PointResult;
  note: string;
}

/** The point a candidate is shown with: its best under the constraints, else its highest-throughput one. */
function shownPoint(c: CandidateResult): PointResult | undefined {
  return c.best ?? [...c.points].sort((a, b) => b.throughput - a.throughput)[0];
}

export function rows(r: TuneReport): Row[] {
  const shown = r.candidates.map(shownPoint);
  const measured = shown.filter((p): p is PointResult => p !== undefined);
  const front = paretoFront(measured);
  return r.candidates.map((c, i) => {
    const p = shown[i];
    const notes: string[] = [];
    if (c.label === r.written?.label) notes.push('★ written');
    if (p !== undefined && front.has(measured.indexOf(p))) notes.push('pareto');
    if (c.refused) notes.push(`refused: ${c.refused}`);
    if (c.failed) notes.push(`failed: ${c.failed}`);
    if (p !== undefined && c.best === undefined && !c.failed) notes.push('misses constraints');
    if (p !== undefined && !p.stable) notes.push(`±${(p.ci * 100).toFixed(0)}% (time cap)`);
    if (p !== undefined && r.ceiling && p.throughput > 0.8 * r.ceiling.throughput)
      notes.push('near load-generator ceiling');
    return { index: i + 1, label: c.label, point: p, note: notes.join('; ').replace(/\s*\n\s*/g, ' ') };
  });
}

const num = (v: number | undefined, digits: number): string => (v === undefined ? '–' : v.toFixed(digits));

function cells(row: Row): string[] {
  const p = row.point;
  return [
    String(row.index),
    row.label,
    p ? String(p.concurrency) : '–',
    num(p?.throughput, 1),
    num(p?.p50Ms, 2),
    num(p?.p99Ms, 2),
    num(p?.cpuPct, 0),
    num(p?.gpuPct, 0),
    num(p?.gpuMemMiB, 0),
    row.note,
  ];
}

const HEAD = ['#', 'config', 'conc', 'infer/s', 'p50 ms', 'p99 ms', 'CPU %', 'GPU %', 'GPU MiB', 'note'];

/** The plain-text table printed at the end. */
export function summaryTable(r: TuneReport): string {
  const table = [HEAD, ...rows(r).map(cells)];
  const widths = HEAD.map((_, i) => Math.max(...table.map((t) => t[i].length)));
  return `${table
    .map((t) =>
      t
        .map((c, i) => c.padEnd(widths[i]))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')}\n`;
}

function markdownTable(head: string[], body: string[][]): string {
  const line = (cs: string[]): string => `| ${cs.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;
  return [line(head), line(head.map(() => '---')), ...body.map(line)].join('\n');
}

export function chartOf(r: TuneReport): string {
  const points: ChartPoint[] = r.candidates.flatMap((c, i) =>
    c.points
      .filter((p) => p.requests > 0)
      .map((p) => ({ index: i + 1, label: c.label, point: p, written: c.label === r.written?.label && p === c.best })),
  );
  return chartSvg(`nereid tune: ${r.model} (${r.objective})`, points);
}

function outcomeLines(r: TuneReport): string[] {
  const out: string[] = [];
  if (r.written) out.push(`**Written config:** ${r.written.label} — ${r.written.reason}.`);
  if (r.noneMet) {
    out.push(`**${r.noneMet.message}.**`, '');
    for (const c of r.noneMet.closest) {
      out.push(
        `- ${c.label} @ concurrency ${c.point.concurrency}: ${c.point.throughput.toFixed(1)}/s, p99 ${c.point.p99Ms.toFixed(2)} ms`,
      );
    }
  }
  const c = r.confirmation;
  if (c) {
    out.push(
      '',
      `**Confirmation** (${c.rounds} interleaved rounds): default ${c.default.throughput.toFixed(1)}/s p99 ${c.default.p99Ms.toFixed(2)} ms ` +
        `(concurrency ${c.concurrency.default}); best ${c.best.throughput.toFixed(1)}/s p99 ${c.best.p99Ms.toFixed(2)} ms ` +
        `(concurrency ${c.concurrency.best}); ratio ${c.ratio.toFixed(3)}.`,
    );
  }
  return out;
}

/** The Markdown report written beside chart.svg. */
export function markdownReport(r: TuneReport): string {
  const detail = r.candidates.flatMap((c, i) =>
    c.points.map((p) => [
      String(i + 1),
      c.label,
      String(p.concurrency),
      p.throughput.toFixed(1),
      p.p50Ms.toFixed(2),
      p.p99Ms.toFixed(2),
      `±${(p.ci * 100).toFixed(1)}%`,
      String(p.requests),
      String(p.errors),
    ]),
  );
  const cons = [
    r.constraints.latencyBudgetMs !== undefined ? `p99 ≤ ${r.constraints.latencyBudgetMs} ms` : '',
    r.constraints.minThroughput !== undefined ? `throughput ≥ ${r.constraints.minThroughput}/s` : '',
    r.constraints.maxGpuMemoryMb !== undefined ? `GPU memory ≤ ${r.constraints.maxGpuMemoryMb} MiB` : '',
  ].filter(Boolean);
  return [
    `# nereid tune: ${r.model}`,
    '',
    `${r.startedAt} → ${r.finishedAt} on ${r.machine.host} (${r.machine.cores} cores, ${r.machine.cpu}), ${r.target}; ` +
      `${r.mode} search, objective: ${r.objective === 'throughput' ? 'maximize throughput' : 'minimize p99 latency'}` +
      `${cons.length ? ` under ${cons.join(', ')}` : ''}; time budget ${r.timeBudgetS} s, ${r.pointMs} ms per point.`,
    r.interrupted ? '\n**Interrupted**: the results below are what was measured before.' : '',
    '',
    ...outcomeLines(r),
    '',
    '![throughput vs p99](chart.svg)',
    '',
    '## Summary',
    '',
    markdownTable(HEAD, rows(r).map(cells)),
    '',
    '## Every point',
    '',
    markdownTable(['#', 'config', 'conc', 'infer/s', 'p50 ms', 'p99 ms', 'CI (95%)', 'requests', 'errors'], detail),
    '',
    '## How it was measured',
    '',
    `- Load generator ceiling (health endpoint, concurrency ${r.ceiling?.concurrency ?? '–'}): ${num(r.ceiling?.throughput, 0)} requests/s; a point above 80% of it is marked.`,
    `- Answers checked against the default config's on the same requests: ${r.tolerance}.`,
    `- Dimensions: ${r.dimensions.map((d) => `${d.name} (${d.settings.join(' | ')})`).join('; ')}.`,
    `- GPU use and GPU memory (the device's, every process on it): ${r.gpu}.`,
    `- Not explored (time budget): ${r.unexplored.length === 0 ? 'nothing' : r.unexplored.join('; ')}.`,
    '',
  ].join('\n');
}

/** config.pbtxt text: a comment block, then the config in canonical text format. */
export function configText(config: ModelConfig, r: TuneReport): string {
  const p = r.written?.point;
  const lines = [
    `Written by nereid tune ${NEREID_VERSION} at ${r.finishedAt} on ${r.machine.host} (${r.machine.cores} cores, ${r.machine.cpu}).`,
    `Chosen: ${r.written?.label ?? '–'}: ${r.written?.reason ?? ''}.`,
    p
      ? `Measured: ${p.throughput.toFixed(1)} infer/s, p50 ${p.p50Ms.toFixed(2)} ms, p99 ${p.p99Ms.toFixed(2)} ms at concurrency ${p.concurrency} (${r.objective}).`
      : '',
    `Answers checked against the default config (${r.tolerance}).`,
    `${r.candidates.length} configs measured, ${r.unexplored.length} left unexplored; see report.md.`,
  ].filter(Boolean);
  return `${lines.map((l) => `# ${l}`).join('\n')}\n${printModelConfig(config)}`;
}
